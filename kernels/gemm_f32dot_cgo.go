//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include "isa.h"
#include <string.h>
#include <immintrin.h>
#include "f32tile.h"

// float32 GEMM on AVX-512 (see gemm_f32dot.go): row-major C (m x n) = alpha*op(A)op(B) +
// beta*C. Operands are packed into panels: A into row panels of FMR rows, [k][FMR] each;
// B into column panels of FNR columns, [k][FNR] each; zero past m and n. The micro-kernel
// keeps an FMR x FNR tile in 24 registers and, per k, loads two vectors of the B panel
// and broadcasts each row's A value into fused multiply-adds.

enum { FMR = F32_TILE_MR, FNR = F32_TILE_NR, FKC = 256 };

int hpusim_f32dot_supported(void) {
	__builtin_cpu_init();
	return hpusim_isa_cap() >= HPUSIM_ISA_LEVEL_AVX512 && __builtin_cpu_supports("avx512f");
}

// A (element (i, kk) at a[i*rs + kk*cs]) into ceil(m/FMR) panels of [k][FMR].
void hpusim_f32dot_pack_a(float *dst, const float *a, int64_t rs, int64_t cs, int64_t m, int64_t k) {
	int64_t panels = (m + FMR - 1) / FMR;
	for (int64_t p = 0; p < panels; p++) {
		float *d = dst + p * k * FMR;
		for (int r = 0; r < FMR; r++) {
			int64_t i = p * FMR + r;
			if (i >= m) {
				for (int64_t kk = 0; kk < k; kk++) d[kk * FMR + r] = 0;
				continue;
			}
			const float *row = a + i * rs;
			for (int64_t kk = 0; kk < k; kk++) d[kk * FMR + r] = row[kk * cs];
		}
	}
}

// d[j*ds + i] = s[i*ss + j] for i, j < 16: unpacks of pairs, then of quads, then two
// rounds of 128-bit lane shuffles.
__attribute__((target("avx512f")))
static void tr16(const float *s, int64_t ss, float *d, int64_t ds) {
	__m512 r[16], t[16];
	for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s + i * ss);
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
#define PD(x) _mm512_castps_pd(x)
#define PS(x) _mm512_castpd_ps(x)
	for (int i = 0; i < 16; i += 4) {
		r[i] = PS(_mm512_unpacklo_pd(PD(t[i]), PD(t[i + 2])));
		r[i + 1] = PS(_mm512_unpackhi_pd(PD(t[i]), PD(t[i + 2])));
		r[i + 2] = PS(_mm512_unpacklo_pd(PD(t[i + 1]), PD(t[i + 3])));
		r[i + 3] = PS(_mm512_unpackhi_pd(PD(t[i + 1]), PD(t[i + 3])));
	}
#undef PD
#undef PS
	for (int h = 0; h < 16; h += 8)
		for (int i = 0; i < 4; i++) {
			t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + 4 + i], 0x88);
			t[h + 4 + i] = _mm512_shuffle_f32x4(r[h + i], r[h + 4 + i], 0xdd);
		}
	for (int i = 0; i < 8; i++) {
		r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
		r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
	}
	for (int i = 0; i < 16; i++) _mm512_storeu_ps(d + i * ds, r[i]);
}

// B (element (kk, j) at b[kk*rs + j*cs]) into ceil(n/FNR) panels of [k][FNR].
void hpusim_f32dot_pack_b(float *dst, const float *b, int64_t rs, int64_t cs, int64_t k, int64_t n) {
	int64_t panels = (n + FNR - 1) / FNR;
	for (int64_t q = 0; q < panels; q++) {
		float *d = dst + q * k * FNR;
		int64_t j0 = q * FNR;
		int w = n - j0 < FNR ? (int)(n - j0) : FNR;
		if (cs == 1) {
			for (int64_t kk = 0; kk < k; kk++) {
				memcpy(d + kk * FNR, b + kk * rs + j0, w * sizeof(float));
				for (int j = w; j < FNR; j++) d[kk * FNR + j] = 0;
			}
			continue;
		}
		// Columns contiguous in k (a transposed B): 16x16 blocks transposed in registers,
		// the edges element by element.
		int64_t kk0 = 0;
		if (rs == 1 && w == FNR)
			for (; kk0 + 16 <= k; kk0 += 16) {
				tr16(b + j0 * cs + kk0, cs, d + kk0 * FNR, FNR);
				tr16(b + (j0 + 16) * cs + kk0, cs, d + kk0 * FNR + 16, FNR);
			}
		for (int64_t kk = kk0; kk < k; kk++) {
			float *e = d + kk * FNR;
			for (int j = 0; j < w; j++) e[j] = b[(j0 + j) * cs + kk * rs];
			for (int j = w; j < FNR; j++) e[j] = 0;
		}
	}
}

// One tile over kc values of k: c[r*ldc + j] (r < mr, j < nr) = first ? alpha*sum + beta*c
// (beta 0: c is not read) : c + alpha*sum.
__attribute__((target("avx512f")))
static void f32_tile(const float *pa, const float *pb, int64_t kc, float *c, int64_t ldc, int mr, int nr,
                     float alpha, float beta, int first) {
	__m512 acc[FMR][2];
	f32_tile_sums(pa, pb, FNR, kc, acc);
	__mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
	__mmask16 m1 = nr >= 32 ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
	__m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
	for (int r = 0; r < FMR; r++) {
		if (r >= mr) break;
		float *cr = c + r * ldc;
		__m512 v0 = _mm512_mul_ps(acc[r][0], va), v1 = _mm512_mul_ps(acc[r][1], va);
		if (!first || beta != 0) {
			__m512 s = first ? vb : _mm512_set1_ps(1);
			v0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, cr), s, v0);
			v1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, cr + 16), s, v1);
		}
		_mm512_mask_storeu_ps(cr, m0, v0);
		_mm512_mask_storeu_ps(cr + 16, m1, v1);
	}
}

// C (m x n, row stride ldc) from the packed panels of A (all m rows) and of B's n columns.
void hpusim_f32dot_gemm(const float *pa, const float *pb, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                        float *c, int64_t ldc) {
	int64_t mp = (m + FMR - 1) / FMR, np = (n + FNR - 1) / FNR;
	if (k == 0 || alpha == 0) { // BLAS: C = beta*C, A and B not read
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];
		return;
	}
	for (int64_t k0 = 0; k0 < k; k0 += FKC) {
		int64_t kb = k - k0 < FKC ? k - k0 : FKC;
		for (int64_t q = 0; q < np; q++) {
			const float *b = pb + q * k * FNR + k0 * FNR;
			int nr = n - q * FNR < FNR ? (int)(n - q * FNR) : FNR;
			for (int64_t p = 0; p < mp; p++) {
				int mr = m - p * FMR < FMR ? (int)(m - p * FMR) : FMR;
				f32_tile(pa + p * k * FMR + k0 * FMR, b, kb, c + p * FMR * ldc + q * FNR, ldc, mr, nr, alpha, beta, k0 == 0);
			}
		}
	}
}

// Convolution of one sample's group at stride 1 on the micro-kernel, without an im2col
// matrix. x ([C][H][W]) is copied into a zero-padded image xp whose rows are Wp = W+2*pw
// floats, so output position (oh, ow) of the padded grid q = oh*Wp + ow reads
// xp[koff(k) + q] for each k = (c, kh, kw): per k, a column panel of 32 grid positions is
// 32 consecutive floats. Grid columns ow >= OW are computed into yp and dropped. pa holds
// W's rows packed (hpusim_f32dot_pack_a, k = Kc); sums run over k in the order and
// 256-blocks of hpusim_f32dot_gemm, so y ([O][OH*OW]) gets the bits of the im2col path.
// Scratch: xp C*(H+2ph)*Wp + (32 + (KW-1)*dw) floats, pb Kc*32, yp ceil(O/12)*12 rows of
// ceil(OH*Wp/32)*32.

__attribute__((target("avx512f")))
void hpusim_f32dot_conv_fwd(const float *pa, const float *x, int64_t C, int64_t H, int64_t W, int64_t KH,
                            int64_t KW, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t O, float *y,
                            float *xp, float *pb, float *yp) {
	int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, plane = Hp * Wp;
	int64_t OH = Hp - (KH - 1) * dh, OW = Wp - (KW - 1) * dw;
	int64_t Q = OH * Wp, nq = (Q + FNR - 1) / FNR, Qp = nq * FNR, K = C * KH * KW;
	memset(xp, 0, (C * plane + (Qp - Q) + (KW - 1) * dw) * sizeof(float));
	for (int64_t c = 0; c < C; c++)
		for (int64_t h = 0; h < H; h++)
			f32_copy(xp + c * plane + (h + ph) * Wp + pw, x + (c * H + h) * W, W);
	int64_t mp = (O + FMR - 1) / FMR;
	for (int64_t q = 0; q < nq; q++) {
		float *d = pb;
		for (int64_t c = 0; c < C; c++)
			for (int64_t kh = 0; kh < KH; kh++)
				for (int64_t kw = 0; kw < KW; kw++, d += FNR)
					f32_copy(d, xp + c * plane + kh * dh * Wp + kw * dw + q * FNR, FNR);
		for (int64_t k0 = 0; k0 < K; k0 += FKC) {
			int64_t kb = K - k0 < FKC ? K - k0 : FKC;
			for (int64_t p = 0; p < mp; p++) {
				int mr = O - p * FMR < FMR ? (int)(O - p * FMR) : FMR;
				f32_tile(pa + p * K * FMR + k0 * FMR, pb + k0 * FNR, kb, yp + p * FMR * Qp + q * FNR, Qp, mr, FNR,
				         1.0f, 0.0f, k0 == 0);
			}
		}
	}
	for (int64_t o = 0; o < O; o++)
		for (int64_t oh = 0; oh < OH; oh++)
			f32_copy(y + (o * OH + oh) * OW, yp + o * Qp + oh * Wp, OW);
}
*/
import "C"

import "unsafe"

const (
	f32DotMR = 12
	f32DotNR = 32
)

// f32DotCPU reports whether this CPU runs the AVX-512 micro-kernel.
var f32DotCPU = C.hpusim_f32dot_supported() != 0

func cfloats(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }

// f32DotPackA packs rows [0, m) of A (element (i, kk) at a[i*rs + kk*cs]) into dst.
func f32DotPackA(dst []float32, a unsafe.Pointer, rs, cs int64, m, k int) {
	C.hpusim_f32dot_pack_a(cfloats(dst), (*C.float)(a), C.int64_t(rs), C.int64_t(cs), C.int64_t(m), C.int64_t(k))
}

// f32DotPackB packs the n columns of B at b (element (kk, j) at b[kk*rs + j*cs]) into dst.
func f32DotPackB(dst []float32, b unsafe.Pointer, rs, cs int64, k, n int) {
	C.hpusim_f32dot_pack_b(cfloats(dst), (*C.float)(b), C.int64_t(rs), C.int64_t(cs), C.int64_t(k), C.int64_t(n))
}

// f32DotTiles sets the m×n block at c (row stride ldc) to alpha*A*B + beta*c from the
// packed panels (beta 0: c is not read; alpha 0 or k 0: A and B are not read).
func f32DotTiles(pa, pb []float32, m, n, k int, alpha, beta float32, c unsafe.Pointer, ldc int) {
	C.hpusim_f32dot_gemm(cfloats(pa), cfloats(pb), C.int64_t(m), C.int64_t(n), C.int64_t(k), C.float(alpha),
		C.float(beta), (*C.float)(c), C.int64_t(ldc))
}

// f32DotConvFwd computes one sample's group of a stride-1 convolution into y
// (hpusim_f32dot_conv_fwd); pa is the group's weight rows packed by f32DotPackA.
func f32DotConvFwd(pa, x, y []float32, g convGeom, p ConvParams, s *f32ConvScratch) {
	C.hpusim_f32dot_conv_fwd(cfloats(pa), cfloats(x), C.int64_t(g.Cg), C.int64_t(g.H), C.int64_t(g.W),
		C.int64_t(g.KH), C.int64_t(g.KW), C.int64_t(p.PadH), C.int64_t(p.PadW), C.int64_t(p.DilH),
		C.int64_t(p.DilW), C.int64_t(g.Og), cfloats(y), cfloats(s.xp), cfloats(s.pb), cfloats(s.yp))
}
