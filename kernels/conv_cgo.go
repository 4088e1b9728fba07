//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
// The loops around the per-sample convolution GEMMs (conv_sample.go) in C so that the
// compiler vectorizes them (Go does not): im2col, col2im, the bias add and the bias
// gradient's row sums. Every element gets the same operations in the same order as the
// Go loops (im2colRows, col2imRows, convBiasAddGo, convRowSumsGo), hence the same bits.
// -ffp-contract=off keeps every add rounded as written; no-trapping-math only lets the
// compiler turn selects into blends.
#pragma GCC optimize ("fp-contract=off", "no-trapping-math")
#include <stdint.h>
#include <string.h>

#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

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

// col [Cg*KH*KW, OH*OW] from the Cg planes [H, W] at x.
CLONES static void hpusim_im2col(float *restrict col, const float *restrict x, const conv_geom *g) {
	const int64_t khw = g->kh * g->kw, hw = g->h * g->w, P = g->oh * g->ow, OW = g->ow;
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
			for (int64_t i = 0; i < lo; i++) row[i] = 0;
			for (int64_t i = hi; i < OW; i++) row[i] = 0;
			if (g->sw == 1) {
				const float *s = src + off;
				for (int64_t i = lo; i < hi; i++) row[i] = s[i];
			} else {
				const int64_t sw = g->sw;
				for (int64_t i = lo; i < hi; i++) row[i] = src[i * sw + off];
			}
		}
	}
}

// The Cg planes [H, W] at dx = the sums of col's entries, each element's terms added in
// (kh, kw) order onto zero, as col2imRows does.
CLONES static void hpusim_col2im(float *restrict dx, const float *restrict col, const conv_geom *g) {
	const int64_t khw = g->kh * g->kw, hw = g->h * g->w, P = g->oh * g->ow, OW = g->ow;
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

// sums[o] = the sum of row o (P elements at dy + o*P), added one element at a time from
// zero like the Go loop; eight rows at once so that the eight chains overlap.
CLONES static void hpusim_conv_row_sums(const float *restrict dy, float *restrict sums, int64_t O, int64_t P) {
	int64_t o = 0;
	for (; o + 8 <= O; o += 8) {
		const float *r = dy + o * P;
		float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
		for (int64_t i = 0; i < P; i++) {
			a0 += r[i];
			a1 += r[P + i];
			a2 += r[2 * P + i];
			a3 += r[3 * P + i];
			a4 += r[4 * P + i];
			a5 += r[5 * P + i];
			a6 += r[6 * P + i];
			a7 += r[7 * P + i];
		}
		sums[o] = a0; sums[o + 1] = a1; sums[o + 2] = a2; sums[o + 3] = a3;
		sums[o + 4] = a4; sums[o + 5] = a5; sums[o + 6] = a6; sums[o + 7] = a7;
	}
	for (; o < O; o++) {
		const float *r = dy + o * P;
		float a = 0;
		for (int64_t i = 0; i < P; i++) a += r[i];
		sums[o] = a;
	}
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
