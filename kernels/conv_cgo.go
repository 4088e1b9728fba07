//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3 -Wno-psabi
// The loops around the per-sample convolution GEMMs (conv_sample.go) in C so that the
// compiler vectorizes them (Go does not): im2col, col2im, the bias add and the bias
// gradient's row sums. Every element gets the same operations in the same order as the
// Go loops (im2colRows, col2imRows, convBiasAddGo, convRowSumsGo), hence the same bits.
// -ffp-contract=off keeps every add rounded as written; no-trapping-math only lets the
// compiler turn selects into blends.
#pragma GCC optimize ("fp-contract=off", "no-trapping-math", "no-tree-loop-distribute-patterns")
#include <stdint.h>
#include "isa.h"
#include <string.h>
#include <immintrin.h>

#define CLONES HPUSIM_CLONES_V4_V3

// convSpan in conv_block.go: output columns [*lo, *hi) read input column ow*s+off in [0, w).
static inline int64_t conv_span(int64_t k, int64_t w, int64_t ow, int64_t s, int64_t pad, int64_t dil,
                                int64_t *lo, int64_t *hi) {
	int64_t off = k * dil - pad, l = 0, h = 0;
	if (off < 0) l = (-off + s - 1) / s;
	if (w - 1 - off >= 0) h = (w - 1 - off) / s + 1;
	l = l < ow ? l : ow;
	h = h < ow ? h : ow;
	h = h > l ? h : l;
	*lo = l;
	*hi = h;
	return off;
}

typedef struct {
	int64_t cg, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
} conv_geom;

// Eight floats in a vector (GCC's generic vectors: AVX in the v3/v4 clones, SSE pairs in
// the default one); unaligned loads and stores through memcpy.
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
__attribute__((always_inline)) static inline v8f ld8(const float *p) { v8f v; memcpy(&v, p, sizeof v); return v; }
__attribute__((always_inline)) static inline void st8(float *p, v8f v) { memcpy(p, &v, sizeof v); }
__attribute__((always_inline)) static inline v8f and8(v8f v, v8i m) { return (v8f)((v8i)v & m); }
__attribute__((always_inline)) static inline v8i lanes_in(int64_t j, int64_t a, int64_t b) {
	const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
	v8i p = lane + (int32_t)j;
	return (p >= (int32_t)a) & (p < (int32_t)b);
}

// One output row of im2col for stride 1: row[i] = src[i+off] for i in [lo, hi), zero
// elsewhere. Eight columns at a time (the last eight overlapping the previous when OW is
// not a multiple of 8); src's reads stay inside [xlo, xhi).
__attribute__((always_inline)) static inline void im2col_row_s1(float *restrict row, const float *restrict src, int64_t OW, int64_t lo,
                                 int64_t hi, int64_t off, const float *xlo, const float *xhi) {
	if (OW < 8) {
		for (int64_t i = 0; i < OW; i++) row[i] = i >= lo && i < hi ? src[i + off] : 0;
		return;
	}
	for (int64_t j0 = 0; j0 < OW; j0 += 8) {
		int64_t j = j0 + 8 <= OW ? j0 : OW - 8;
		const float *p = src + j + off;
		v8f v;
		if (j >= lo && j + 8 <= hi) {
			v = ld8(p);
		} else if (j + 8 <= lo || j >= hi) {
			v = (v8f){0};
		} else if (p >= xlo && p + 8 <= xhi) {
			v = and8(ld8(p), lanes_in(j, lo, hi));
		} else {
			for (int l = 0; l < 8; l++) v[l] = j + l >= lo && j + l < hi ? p[l] : 0;
		}
		st8(row + j, v);
	}
}

// dst[0:n] = src[0:n], eight at a time (the last eight overlapping when n % 8 != 0).
__attribute__((always_inline)) static inline void copy_row(float *restrict dst, const float *restrict src, int64_t n) {
	if (n < 8) {
		for (int64_t i = 0; i < n; i++) dst[i] = src[i];
		return;
	}
	for (int64_t j0 = 0; j0 < n; j0 += 8) {
		int64_t j = j0 + 8 <= n ? j0 : n - 8;
		st8(dst + j, ld8(src + j));
	}
}

// im2col for stride 1 along W through a copy of each plane padded with zero columns
// (pw on each side), so every output row is a plain copy of OW padded-plane elements.
#define IM2COL_PADDED_MAX 16384
__attribute__((always_inline)) static inline void im2col_padded(float *restrict col, const float *restrict x,
                                                                const conv_geom *g) {
	const int64_t hw = g->h * g->w, P = g->oh * g->ow, OW = g->ow, W = g->w, Wp = g->w + 2 * g->pw;
	float xp[IM2COL_PADDED_MAX];
	for (int64_t c = 0; c < g->cg; c++) {
		const float *plane = x + c * hw;
		for (int64_t ih = 0; ih < g->h; ih++) {
			float *d = xp + ih * Wp;
			for (int64_t i = 0; i < g->pw; i++) d[i] = d[g->pw + W + i] = 0;
			copy_row(d + g->pw, plane + ih * W, W);
		}
		for (int64_t kh = 0; kh < g->kh; kh++) {
			for (int64_t kw = 0; kw < g->kw; kw++) {
				float *dst = col + ((c * g->kh + kh) * g->kw + kw) * P;
				for (int64_t oh = 0; oh < g->oh; oh++) {
					int64_t ih = oh * g->sh - g->ph + kh * g->dh;
					float *row = dst + oh * OW;
					if (ih < 0 || ih >= g->h) {
						for (int64_t i = 0; i < OW; i++) row[i] = 0;
						continue;
					}
					copy_row(row, xp + ih * Wp + kw * g->dw, OW);
				}
			}
		}
	}
}

// col [Cg*KH*KW, OH*OW] from the Cg planes [H, W] at x.
CLONES static void hpusim_im2col(float *restrict col, const float *restrict x, const conv_geom *g) {
	const int64_t khw = g->kh * g->kw, hw = g->h * g->w, P = g->oh * g->ow, OW = g->ow;
	const float *xhi = x + g->cg * hw;
	if (g->sw == 1 && g->h * (g->w + 2 * g->pw) <= IM2COL_PADDED_MAX) {
		im2col_padded(col, x, g);
		return;
	}
	for (int64_t r = 0; r < g->cg * khw; r++) {
		int64_t c = r / khw, k = r % khw, kh = k / g->kw, kw = k % g->kw;
		const float *plane = x + c * hw;
		float *dst = col + r * P;
		int64_t lo, hi, off = conv_span(kw, g->w, OW, g->sw, g->pw, g->dw, &lo, &hi);
		for (int64_t oh = 0; oh < g->oh; oh++) {
			int64_t ih = oh * g->sh - g->ph + kh * g->dh;
			float *row = dst + oh * OW;
			if (ih < 0 || ih >= g->h) {
				for (int64_t i = 0; i < OW; i++) row[i] = 0;
				continue;
			}
			const float *src = plane + ih * g->w;
			if (g->sw == 1) {
				im2col_row_s1(row, src, OW, lo, hi, off, x, xhi);
				continue;
			}
			for (int64_t i = 0; i < lo; i++) row[i] = 0;
			for (int64_t i = hi; i < OW; i++) row[i] = 0;
			const int64_t sw = g->sw;
			for (int64_t i = lo; i < hi; i++) row[i] = src[i * sw + off];
		}
	}
}

// im2col of bfloat16 bits (the VDPBF16PS convolution's columns): the plain row loop, a
// copy per source row.
static void hpusim_im2col_u16(uint16_t *restrict col, const uint16_t *restrict x, const conv_geom *g) {
	const int64_t khw = g->kh * g->kw, hw = g->h * g->w, P = g->oh * g->ow, OW = g->ow;
	for (int64_t r = 0; r < g->cg * khw; r++) {
		int64_t c = r / khw, k = r % khw, kh = k / g->kw, kw = k % g->kw;
		const uint16_t *plane = x + c * hw;
		uint16_t *dst = col + r * P;
		int64_t lo, hi, off = conv_span(kw, g->w, OW, g->sw, g->pw, g->dw, &lo, &hi);
		for (int64_t oh = 0; oh < g->oh; oh++) {
			int64_t ih = oh * g->sh - g->ph + kh * g->dh;
			uint16_t *row = dst + oh * OW;
			if (ih < 0 || ih >= g->h) {
				memset(row, 0, OW * sizeof *row);
				continue;
			}
			const uint16_t *src = plane + ih * g->w;
			memset(row, 0, lo * sizeof *row);
			memset(row + hi, 0, (OW - hi) * sizeof *row);
			if (g->sw == 1) {
				memcpy(row + lo, src + lo + off, (hi - lo) * sizeof *row);
				continue;
			}
			for (int64_t i = lo; i < hi; i++) row[i] = src[i * g->sw + off];
		}
	}
}

// acc += the terms of (kh, kw) (source row srow, input columns [a, b)) for the eight
// input columns from j: +0 for columns the kernel tap does not reach.
#define C2I_ADD(acc, j) do { \
	if (!((j) + 8 <= a || (j) >= b)) { \
		const float *p = srow + (j) - off[kw]; \
		if ((j) >= a && (j) + 8 <= b) \
			acc += ld8(p); \
		else if (p >= col && p + 8 <= chi) \
			acc += and8(ld8(p), lanes_in((j), a, b)); \
		else \
			for (int l = 0; l < 8; l++) \
				if ((j) + l >= a && (j) + l < b) acc[l] += p[l]; \
	} \
} while (0)

// The Cg planes [H, W] at dx = the sums of col's entries, each element's terms added in
// (kh, kw) order onto zero, as col2imRows does.
//
// For stride 1 along W, each output row is built eight columns at a time in a register:
// the terms of an element are still added in (kh, kw) order onto zero, and a column that a
// (kh, kw) does not reach gets +0 added instead of nothing, which changes no bits since a
// sum that starts at +0 is never -0 (x + +0 == x for every other x, NaN payloads included).
CLONES static void hpusim_col2im(float *restrict dx, const float *restrict col, const conv_geom *g) {
	const int64_t khw = g->kh * g->kw, hw = g->h * g->w, P = g->oh * g->ow, OW = g->ow, W = g->w;
	const float *chi = col + g->cg * khw * P;
	if (g->sw == 1 && W >= 8 && g->kw <= 64 && g->kh <= 64) {
		int64_t lo[64], hi[64], off[64];
		for (int64_t kw = 0; kw < g->kw; kw++) {
			off[kw] = conv_span(kw, W, OW, 1, g->pw, g->dw, &lo[kw], &hi[kw]);
			lo[kw] += off[kw]; // as ranges of input columns
			hi[kw] += off[kw];
		}
		const int64_t nc = (W + 7) / 8;
		for (int64_t c = 0; c < g->cg; c++) {
			float *plane = dx + c * hw;
			for (int64_t ih = 0; ih < g->h; ih++) {
				// The source row of each kh reaching input row ih (nil if none).
				const float *srows[64];
				for (int64_t kh = 0; kh < g->kh; kh++) {
					int64_t t = ih + g->ph - kh * g->dh, oh = t;
					if (g->sh != 1) oh = t >= 0 && t % g->sh == 0 ? t / g->sh : -1;
					srows[kh] = oh >= 0 && oh < g->oh ? col + (c * khw + kh * g->kw) * P + oh * OW : 0;
				}
				// Two chunks of eight columns at a time (two independent add chains).
				for (int64_t q = 0; q < nc; q += 2) {
					int64_t qb = q + 1 < nc ? q + 1 : q;
					int64_t ja = q * 8 + 8 <= W ? q * 8 : W - 8, jb = qb * 8 + 8 <= W ? qb * 8 : W - 8;
					v8f acca = {0}, accb = {0};
					for (int64_t kh = 0; kh < g->kh; kh++) {
						const float *srow = srows[kh];
						if (!srow) continue;
						for (int64_t kw = 0; kw < g->kw; kw++, srow += P) {
							int64_t a = lo[kw], b = hi[kw];
							C2I_ADD(acca, ja);
							C2I_ADD(accb, jb);
						}
					}
					st8(plane + ih * W + ja, acca);
					st8(plane + ih * W + jb, accb);
				}
			}
		}
		return;
	}
	for (int64_t c = 0; c < g->cg; c++) {
		float *plane = dx + c * hw;
		for (int64_t i = 0; i < hw; i++) plane[i] = 0;
		for (int64_t k = 0; k < khw; k++) {
			int64_t kh = k / g->kw, kw = k % g->kw;
			const float *src = col + (c * khw + k) * P;
			int64_t lo, hi, off = conv_span(kw, g->w, OW, g->sw, g->pw, g->dw, &lo, &hi);
			if (hi == lo) continue;
			for (int64_t oh = 0; oh < g->oh; oh++) {
				int64_t ih = oh * g->sh - g->ph + kh * g->dh;
				if (ih < 0 || ih >= g->h) continue;
				float *drow = plane + ih * g->w;
				const float *srow = src + oh * OW;
				if (g->sw == 1) {
					float *d = drow + off;
					for (int64_t i = lo; i < hi; i++) d[i] += srow[i];
				} else {
					const int64_t sw = g->sw;
					for (int64_t i = lo; i < hi; i++) drow[i * sw + off] += srow[i];
				}
			}
		}
	}
}

// y[o, :] += b[o] for the O rows of P elements at y.
CLONES static void hpusim_conv_bias_add(float *restrict y, const float *restrict b, int64_t O, int64_t P) {
	for (int64_t o = 0; o < O; o++) {
		float *row = y + o * P, bv = b[o];
		for (int64_t i = 0; i < P; i++) row[i] += bv;
	}
}

// sums[o] = the sum of row o (P elements at dy + o*P) in convRowSumsGo's order: 16 lane
// sums (lane l takes elements i*16+l of the row's whole 16-blocks, in order from zero),
// folded as lanes l and l+8, then l and l+4, l+2, l+1, then the tail elements one by
// one. An add chain per row (the old order) ran at one add per latency, 2-3x slower than
// torch's CPU bias gradient; 16 lanes over eight rows at once keep the adders busy.
static inline float row_sum_fold(float a[16]) {
	for (int w = 8; w >= 1; w /= 2)
		for (int l = 0; l < w; l++) a[l] += a[l + w];
	return a[0];
}

static void conv_row_sums_scalar(const float *restrict dy, float *restrict sums, int64_t O, int64_t P) {
	const int64_t P16 = P / 16 * 16;
	for (int64_t o = 0; o < O; o++) {
		const float *r = dy + o * P;
		float a[16] = {0};
		for (int64_t i = 0; i < P16; i += 16)
			for (int l = 0; l < 16; l++) a[l] += r[i + l];
		float s = row_sum_fold(a);
		for (int64_t i = P16; i < P; i++) s += r[i];
		sums[o] = s;
	}
}

__attribute__((target("avx512f"))) static void conv_row_sums_avx512(const float *restrict dy, float *restrict sums,
                                                                   int64_t O, int64_t P) {
	const int64_t P16 = P / 16 * 16;
	int64_t o = 0;
	for (; o + 8 <= O; o += 8) {
		const float *r = dy + o * P;
		__m512 acc[8];
		for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_ps();
		for (int64_t i = 0; i < P16; i += 16)
			for (int j = 0; j < 8; j++) acc[j] = _mm512_add_ps(acc[j], _mm512_loadu_ps(r + j * P + i));
		for (int j = 0; j < 8; j++) {
			float a[16];
			_mm512_storeu_ps(a, acc[j]);
			float s = row_sum_fold(a);
			for (int64_t i = P16; i < P; i++) s += r[j * P + i];
			sums[o + j] = s;
		}
	}
	if (o < O) conv_row_sums_scalar(dy + o * P, sums + o, O - o, P);
}

static void hpusim_conv_row_sums(const float *dy, float *sums, int64_t O, int64_t P) {
	if (HPUSIM_AVX512F()) {
		conv_row_sums_avx512(dy, sums, O, P);
		return;
	}
	conv_row_sums_scalar(dy, sums, O, P);
}
*/
import "C"

import "unsafe"

func cConvGeom(g convGeom, p ConvParams) C.conv_geom {
	return C.conv_geom{cg: C.int64_t(g.Cg), h: C.int64_t(g.H), w: C.int64_t(g.W), kh: C.int64_t(g.KH),
		kw: C.int64_t(g.KW), oh: C.int64_t(g.OH), ow: C.int64_t(g.OW), sh: C.int64_t(p.StrideH),
		sw: C.int64_t(p.StrideW), ph: C.int64_t(p.PadH), pw: C.int64_t(p.PadW), dh: C.int64_t(p.DilH),
		dw: C.int64_t(p.DilW)}
}

// im2colF32 is im2colRows(col, x, g, p, gi, 1, 0, g.Kc): group gi's columns of one sample.
func im2colF32(col, x []float32, g convGeom, p ConvParams, gi int) {
	if g.Kc == 0 || g.P == 0 {
		return
	}
	_ = col[g.Kc*g.P-1]
	_ = x[(gi+1)*g.Cg*g.H*g.W-1]
	cg := cConvGeom(g, p)
	C.hpusim_im2col((*C.float)(&col[0]), (*C.float)(&x[gi*g.Cg*g.H*g.W]), &cg)
}

// im2colU16 is im2colRows(col, x, g, p, gi, 1, 0, g.Kc) for bfloat16 bits.
func im2colU16(col, x []uint16, g convGeom, p ConvParams, gi int) {
	if g.Kc == 0 || g.P == 0 {
		return
	}
	_ = col[g.Kc*g.P-1]
	_ = x[(gi+1)*g.Cg*g.H*g.W-1]
	cg := cConvGeom(g, p)
	C.hpusim_im2col_u16((*C.uint16_t)(&col[0]), (*C.uint16_t)(&x[gi*g.Cg*g.H*g.W]), &cg)
}

// col2imF32 is col2imRows(dx, col, g, p, gi, 1, 0, g.Cg): group gi's planes of one sample.
func col2imF32(dx, col []float32, g convGeom, p ConvParams, gi int) {
	if g.Cg == 0 || g.H*g.W == 0 {
		return
	}
	_ = dx[(gi+1)*g.Cg*g.H*g.W-1]
	_ = col[g.Kc*g.P-1]
	cg := cConvGeom(g, p)
	C.hpusim_col2im((*C.float)(&dx[gi*g.Cg*g.H*g.W]), (*C.float)(&col[0]), &cg)
}

// convBiasAddF32 is convBiasAddGo for float32.
func convBiasAddF32(y, b []float32, o, p int) {
	if o*p == 0 {
		return
	}
	_, _ = y[o*p-1], b[o-1]
	C.hpusim_conv_bias_add((*C.float)(&y[0]), (*C.float)(&b[0]), C.int64_t(o), C.int64_t(p))
}

// convRowSumsF32 is convRowSumsGo for float32.
func convRowSumsF32(dy, sums []float32, o, p int) {
	if o == 0 {
		return
	}
	_ = sums[o-1]
	if p == 0 {
		clear(sums[:o])
		return
	}
	_ = dy[o*p-1]
	C.hpusim_conv_row_sums((*C.float)(unsafe.Pointer(&dy[0])), (*C.float)(&sums[0]), C.int64_t(o), C.int64_t(p))
}
