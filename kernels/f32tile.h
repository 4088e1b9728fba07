// The float32 micro-kernel's register tile (gemm_f32dot_cgo.go), shared by the GEMM and
// the convolution input gradient (conv_f32grad_cgo.go), which differ only in what they do
// with the sums; and the masked row copy both use to build padded images.
#ifndef HPUSIM_F32TILE_H
#define HPUSIM_F32TILE_H
#include <immintrin.h>
#include <stdint.h>

enum { F32_TILE_MR = 12, F32_TILE_NR = 32 };

// acc[r][h] (r < 12, h the tile's two 16-column halves) = the sum over kk < kc, in order,
// of pa[kk*12 + r] * pb[kk*ldb + 16*h + lane]: per k, two vectors of the B panel and a
// broadcast of each row's A value into fused multiply-adds, 24 sums in registers.
__attribute__((target("avx512f"), always_inline)) static inline void
f32_tile_sums(const float *pa, const float *pb, int64_t ldb, int64_t kc, __m512 acc[F32_TILE_MR][2]) {
#pragma GCC unroll 12
	for (int r = 0; r < F32_TILE_MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
	for (int64_t kk = 0; kk < kc; kk++) {
		__m512 b0 = _mm512_loadu_ps(pb + kk * ldb), b1 = _mm512_loadu_ps(pb + kk * ldb + 16);
#pragma GCC unroll 12
		for (int r = 0; r < F32_TILE_MR; r++) {
			__m512 av = _mm512_set1_ps(pa[kk * F32_TILE_MR + r]);
			acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
			acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
		}
	}
}

// d[0:n] = s[0:n], 16 floats at a time, the tail masked (no read or write past n).
__attribute__((target("avx512f"))) static inline void f32_copy(float *d, const float *s, int64_t n) {
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_loadu_ps(s + i));
	if (i < n) {
		__mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		_mm512_mask_storeu_ps(d + i, m, _mm512_maskz_loadu_ps(m, s + i));
	}
}
#endif
