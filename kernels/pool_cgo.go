//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
// One plane of 2x2/2 max pooling in C so that the compiler vectorizes the window selects
// (Go does not). Same comparisons as pool2x2PlaneGo, hence the same maxima and indices.
#pragma GCC optimize ("no-trapping-math")
#include <stdint.h>
#include "isa.h"
#include <immintrin.h>

#define CLONES HPUSIM_CLONES_V3

CLONES static void pool2x2_row(const float *r0, const float *r1, float *y, int64_t *ix, int64_t base,
                               int64_t W, int64_t OW) {
	for (int64_t ow = 0; ow < OW; ow++) {
		int64_t k = 2 * ow;
		float mv = r0[k], v;
		int64_t mi = base + k;
		int t;
		v = r0[k + 1]; t = (v > mv) | (v != v); mv = t ? v : mv; mi = t ? base + k + 1 : mi;
		v = r1[k];     t = (v > mv) | (v != v); mv = t ? v : mv; mi = t ? base + W + k : mi;
		v = r1[k + 1]; t = (v > mv) | (v != v); mv = t ? v : mv; mi = t ? base + W + k + 1 : mi;
		y[ow] = mv;
		ix[ow] = mi;
	}
}

// pool2x2_row with AVX-512 masks, 16 windows a step: the compiler vectorized the loop
// above eight windows at a time but ran the rest of a row (all of it for the reference
// CNN's 7- and 14-window rows) as scalar code with branches, which mispredict on real
// data (4x slower for 14x14 planes than for 16x16 ones). The same comparisons in the same
// order, the candidates' positions kept as offsets 0, 1, W, W+1 and widened at the end.
__attribute__((target("avx512f"))) static void pool2x2_row_avx512(const float *r0, const float *r1, float *y,
                                                                  int64_t *ix, int64_t base, int64_t W, int64_t OW) {
	const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
	const __m512i one = _mm512_set1_epi32(1), offw = _mm512_set1_epi32((int32_t)W),
	              offw1 = _mm512_set1_epi32((int32_t)(W + 1));
	const __m512i lane2 = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
	for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
		const int n = OW - ow0 < 16 ? (int)(OW - ow0) : 16;
		const __mmask16 m = (__mmask16)((1u << n) - 1);
		const __mmask16 mlo = n >= 8 ? (__mmask16)0xffff : (__mmask16)((1u << (2 * n)) - 1);
		const __mmask16 mhi = n > 8 ? (__mmask16)((1u << (2 * n - 16)) - 1) : 0;
		const int64_t k = 2 * ow0;
		__m512 a0 = _mm512_maskz_loadu_ps(mlo, r0 + k), a1 = _mm512_maskz_loadu_ps(mhi, r0 + k + 16);
		__m512 b0 = _mm512_maskz_loadu_ps(mlo, r1 + k), b1 = _mm512_maskz_loadu_ps(mhi, r1 + k + 16);
		__m512 mv = _mm512_permutex2var_ps(a0, even, a1);
		__m512i off = _mm512_setzero_si512();
		__m512 v = _mm512_permutex2var_ps(a0, odd, a1);
		__mmask16 t = _mm512_cmp_ps_mask(v, mv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
		mv = _mm512_mask_mov_ps(mv, t, v);
		off = _mm512_mask_mov_epi32(off, t, one);
		v = _mm512_permutex2var_ps(b0, even, b1);
		t = _mm512_cmp_ps_mask(v, mv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
		mv = _mm512_mask_mov_ps(mv, t, v);
		off = _mm512_mask_mov_epi32(off, t, offw);
		v = _mm512_permutex2var_ps(b0, odd, b1);
		t = _mm512_cmp_ps_mask(v, mv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
		mv = _mm512_mask_mov_ps(mv, t, v);
		off = _mm512_mask_mov_epi32(off, t, offw1);
		_mm512_mask_storeu_ps(y + ow0, m, mv);
		const __m512i start = _mm512_add_epi64(_mm512_set1_epi64(base + k), lane2);
		__m512i ilo = _mm512_add_epi64(start, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(off)));
		__m512i ihi = _mm512_add_epi64(_mm512_add_epi64(start, _mm512_set1_epi64(16)),
		                               _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(off, 1)));
		_mm512_mask_storeu_epi64(ix + ow0, (__mmask8)m, ilo);
		_mm512_mask_storeu_epi64(ix + ow0 + 8, (__mmask8)(m >> 8), ihi);
	}
}

// Planes [lo, hi) of an [N, C, H, W] tensor with dense planes; strides in elements.
static void hpusim_pool2x2_planes(const float *x, float *y, int64_t *ix, int64_t lo, int64_t hi, int64_t C,
                                  int64_t xn, int64_t xc, int64_t yn, int64_t yc, int64_t in_, int64_t ic,
                                  int64_t W, int64_t OH, int64_t OW) {
	const int wide = HPUSIM_AVX512F();
	for (int64_t pc = lo; pc < hi; pc++) {
		int64_t n = pc / C, c = pc % C;
		const float *xp = x + n * xn + c * xc;
		float *yp = y + n * yn + c * yc;
		int64_t *ip = ix + n * in_ + c * ic;
		for (int64_t oh = 0; oh < OH; oh++) {
			int64_t base = 2 * oh * W;
			if (wide)
				pool2x2_row_avx512(xp + base, xp + base + W, yp + oh * OW, ip + oh * OW, base, W, OW);
			else
				pool2x2_row(xp + base, xp + base + W, yp + oh * OW, ip + oh * OW, base, W, OW);
		}
	}
}
*/
import "C"

func pool2x2Planes(in, out, idx Tensor, lo, hi int64) {
	C.hpusim_pool2x2_planes((*C.float)(in.Ptr), (*C.float)(out.Ptr), (*C.int64_t)(idx.Ptr), C.int64_t(lo), C.int64_t(hi),
		C.int64_t(in.Sizes[1]), C.int64_t(in.Strides[0]), C.int64_t(in.Strides[1]), C.int64_t(out.Strides[0]),
		C.int64_t(out.Strides[1]), C.int64_t(idx.Strides[0]), C.int64_t(idx.Strides[1]), C.int64_t(in.Sizes[3]),
		C.int64_t(out.Sizes[2]), C.int64_t(out.Sizes[3]))
}
