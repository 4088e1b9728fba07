//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <immintrin.h>
#include "isa.h"

// Small float32 products C = op(A) op(B) (alpha 1, C overwritten) on AVX2+FMA, for the
// per-head products of attention (64x64x16, 64x16x64, ...) where a BLAS call's packing
// and driver cost more than the arithmetic. Every element is one fused multiply-add chain
// over k in increasing order starting from zero (not OpenBLAS's order: the last bits may
// differ; TestF32SmallMatchesBLAS bounds both against float64). B is read row-major
// (b[k*ldb + j]); a transposed B is repacked by the caller. A is read through (ars, acs).

int hpusim_f32small_supported(void) {
	__builtin_cpu_init();
	return hpusim_isa_cap() >= HPUSIM_ISA_LEVEL_AVX2 && __builtin_cpu_supports("avx2") &&
	       __builtin_cpu_supports("fma");
}

__attribute__((target("avx2,fma"))) static inline __m256i f32small_mask(int64_t n) {
	static const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
	return _mm256_loadu_si256((const __m256i *)(lanes + 8 - n));
}

// R rows (1..4) by up to 16 columns (w valid, two vectors, masked past w).
__attribute__((target("avx2,fma"), always_inline)) static inline void f32small_block(
    int R, int64_t w, int64_t k, const float *a, int64_t ars, int64_t acs, const float *b, int64_t ldb,
    float *c, int64_t ldc) {
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
	__m256i m0 = f32small_mask(w >= 8 ? 8 : w), m1 = f32small_mask(w >= 16 ? 8 : (w > 8 ? w - 8 : 0));
	int full = w == 16;
	for (int64_t kk = 0; kk < k; kk++) {
		const float *br = b + kk * ldb;
		__m256 b0, b1;
		if (full) {
			b0 = _mm256_loadu_ps(br);
			b1 = _mm256_loadu_ps(br + 8);
		} else {
			b0 = _mm256_maskload_ps(br, m0);
			b1 = _mm256_maskload_ps(br + 8, m1);
		}
		const float *ak = a + kk * acs;
		__m256 x = _mm256_broadcast_ss(ak);
		c00 = _mm256_fmadd_ps(x, b0, c00);
		c01 = _mm256_fmadd_ps(x, b1, c01);
		if (R > 1) {
			x = _mm256_broadcast_ss(ak + ars);
			c10 = _mm256_fmadd_ps(x, b0, c10);
			c11 = _mm256_fmadd_ps(x, b1, c11);
		}
		if (R > 2) {
			x = _mm256_broadcast_ss(ak + 2 * ars);
			c20 = _mm256_fmadd_ps(x, b0, c20);
			c21 = _mm256_fmadd_ps(x, b1, c21);
		}
		if (R > 3) {
			x = _mm256_broadcast_ss(ak + 3 * ars);
			c30 = _mm256_fmadd_ps(x, b0, c30);
			c31 = _mm256_fmadd_ps(x, b1, c31);
		}
	}
#define F32SMALL_STORE(r, v0, v1)                                   \
	if (full) {                                                     \
		_mm256_storeu_ps(c + (r) * ldc, v0);                        \
		_mm256_storeu_ps(c + (r) * ldc + 8, v1);                    \
	} else {                                                        \
		_mm256_maskstore_ps(c + (r) * ldc, m0, v0);                 \
		_mm256_maskstore_ps(c + (r) * ldc + 8, m1, v1);             \
	}
	F32SMALL_STORE(0, c00, c01)
	if (R > 1) { F32SMALL_STORE(1, c10, c11) }
	if (R > 2) { F32SMALL_STORE(2, c20, c21) }
	if (R > 3) { F32SMALL_STORE(3, c30, c31) }
#undef F32SMALL_STORE
}

__attribute__((target("avx2,fma"))) void hpusim_f32small(int64_t m, int64_t n, int64_t k, const float *a,
                                                          int64_t ars, int64_t acs, const float *b, int64_t ldb,
                                                          float *c, int64_t ldc) {
	for (int64_t j = 0; j < n; j += 16) {
		int64_t w = n - j < 16 ? n - j : 16;
		int64_t i = 0;
		for (; i + 4 <= m; i += 4)
			f32small_block(4, w, k, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc);
		switch (m - i) {
		case 3: f32small_block(3, w, k, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc); break;
		case 2: f32small_block(2, w, k, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc); break;
		case 1: f32small_block(1, w, k, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc); break;
		}
	}
}
*/
import "C"

import "unsafe"

var f32SmallCPU = C.hpusim_f32small_supported() != 0

// f32SmallCall is C = op(A) @ B for row-major B (see the C above); A's element (i, kk) at
// a[i*ars + kk*acs].
func f32SmallCall(m, n, k int, a unsafe.Pointer, ars, acs int64, b unsafe.Pointer, ldb int, c unsafe.Pointer, ldc int) {
	C.hpusim_f32small(C.int64_t(m), C.int64_t(n), C.int64_t(k), (*C.float)(a), C.int64_t(ars), C.int64_t(acs),
		(*C.float)(b), C.int64_t(ldb), (*C.float)(c), C.int64_t(ldc))
}
