//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <immintrin.h>
#include "isa.h"

// Small and mid-sized float32 products C = alpha*op(A) op(B) + beta*C on AVX2+FMA (see
// gemm_f32small.go). Every element of op(A) op(B) is summed as fused multiply-add chains
// over k in increasing order: one chain from zero per block of F32S_KB values of k, the
// blocks' sums added in k order (one chain for k <= F32S_KB). The epilogue rounds
// fma(beta, c, alpha*sum) (beta == 0: alpha*sum, C not read). None of this depends on
// how C is tiled or split, so any worker count gives the same bits. B is read row-major
// (b[k*ldb + j]; a transposed B is repacked by hpusim_f32small_pack_bt); A through
// (ars, acs).

enum { F32S_KB = 256, F32S_MR = 6 };

int hpusim_f32small_supported(void) {
	__builtin_cpu_init();
	return hpusim_isa_cap() >= HPUSIM_ISA_LEVEL_AVX2 && __builtin_cpu_supports("avx2") &&
	       __builtin_cpu_supports("fma");
}

__attribute__((target("avx2,fma"))) static inline __m256i f32small_mask(int64_t n) {
	static const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
	return _mm256_loadu_si256((const __m256i *)(lanes + 8 - n));
}

// R rows (1..6) by up to 16 columns (w valid, two vectors, masked past w), k in [k0, k1):
// the chain sums into acc (2*R vectors), zeroed first.
__attribute__((target("avx2,fma"), always_inline)) static inline void f32small_chain(
    int R, int full, __m256i m0, __m256i m1, int64_t k0, int64_t k1, const float *a, int64_t ars,
    int64_t acs, const float *b, int64_t ldb, __m256 *acc) {
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
	       c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	for (int64_t kk = k0; kk < k1; kk++) {
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
		if (R > 4) {
			x = _mm256_broadcast_ss(ak + 4 * ars);
			c40 = _mm256_fmadd_ps(x, b0, c40);
			c41 = _mm256_fmadd_ps(x, b1, c41);
		}
		if (R > 5) {
			x = _mm256_broadcast_ss(ak + 5 * ars);
			c50 = _mm256_fmadd_ps(x, b0, c50);
			c51 = _mm256_fmadd_ps(x, b1, c51);
		}
	}
	acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11, acc[4] = c20, acc[5] = c21;
	acc[6] = c30, acc[7] = c31, acc[8] = c40, acc[9] = c41, acc[10] = c50, acc[11] = c51;
}

// One R x w tile of C.
__attribute__((target("avx2,fma"), always_inline)) static inline void f32small_block(
    int R, int64_t w, int64_t k, const float *a, int64_t ars, int64_t acs, const float *b, int64_t ldb,
    float *c, int64_t ldc, float alpha, float beta) {
	__m256i m0 = f32small_mask(w >= 8 ? 8 : w), m1 = f32small_mask(w >= 16 ? 8 : (w > 8 ? w - 8 : 0));
	int full = w == 16;
	__m256 sum[2 * F32S_MR], part[2 * F32S_MR];
	f32small_chain(R, full, m0, m1, 0, k < F32S_KB ? k : F32S_KB, a, ars, acs, b, ldb, sum);
	for (int64_t k0 = F32S_KB; k0 < k; k0 += F32S_KB) {
		f32small_chain(R, full, m0, m1, k0, k - k0 < F32S_KB ? k : k0 + F32S_KB, a, ars, acs, b, ldb, part);
		for (int r = 0; r < 2 * R; r++) sum[r] = _mm256_add_ps(sum[r], part[r]);
	}
	__m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
	for (int r = 0; r < R; r++) {
		float *cr = c + r * ldc;
		__m256 v0 = sum[2 * r], v1 = sum[2 * r + 1];
		if (alpha != 1) {
			v0 = _mm256_mul_ps(va, v0);
			v1 = _mm256_mul_ps(va, v1);
		}
		if (full) {
			if (beta != 0) {
				v0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr), v0);
				v1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr + 8), v1);
			}
			_mm256_storeu_ps(cr, v0);
			_mm256_storeu_ps(cr + 8, v1);
		} else {
			if (beta != 0) {
				v0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr, m0), v0);
				v1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr + 8, m1), v1);
			}
			_mm256_maskstore_ps(cr, m0, v0);
			_mm256_maskstore_ps(cr + 8, m1, v1);
		}
	}
}

// Rows [i0, i1) and columns [j0, j1) of C (j0 a multiple of 16, or 0).
__attribute__((target("avx2,fma"))) void hpusim_f32small(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t k,
                                                          const float *a, int64_t ars, int64_t acs, const float *b,
                                                          int64_t ldb, float *c, int64_t ldc, float alpha, float beta) {
	for (int64_t j = j0; j < j1; j += 16) {
		int64_t w = j1 - j < 16 ? j1 - j : 16;
		int64_t i = i0;
		for (; i + F32S_MR <= i1; i += F32S_MR)
			f32small_block(F32S_MR, w, k, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, alpha, beta);
		const float *ai = a + i * ars;
		float *ci = c + i * ldc + j;
		switch (i1 - i) {
		case 5: f32small_block(5, w, k, ai, ars, acs, b + j, ldb, ci, ldc, alpha, beta); break;
		case 4: f32small_block(4, w, k, ai, ars, acs, b + j, ldb, ci, ldc, alpha, beta); break;
		case 3: f32small_block(3, w, k, ai, ars, acs, b + j, ldb, ci, ldc, alpha, beta); break;
		case 2: f32small_block(2, w, k, ai, ars, acs, b + j, ldb, ci, ldc, alpha, beta); break;
		case 1: f32small_block(1, w, k, ai, ars, acs, b + j, ldb, ci, ldc, alpha, beta); break;
		}
	}
}

// dst[kk*n + j] = b[j*ldb + kk] for kk < k and j in [j0, j1): a transposed B (n rows of k)
// made row-major, by 8x8 blocks through registers.
__attribute__((target("avx2,fma"))) void hpusim_f32small_pack_bt(float *dst, const float *b, int64_t ldb,
                                                                  int64_t k, int64_t n, int64_t j0, int64_t j1) {
	int64_t j = j0;
	for (; j + 8 <= j1; j += 8) {
		int64_t kk = 0;
		for (; kk + 8 <= k; kk += 8) {
			const float *s = b + j * ldb + kk;
			__m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ldb), r2 = _mm256_loadu_ps(s + 2 * ldb),
			       r3 = _mm256_loadu_ps(s + 3 * ldb), r4 = _mm256_loadu_ps(s + 4 * ldb),
			       r5 = _mm256_loadu_ps(s + 5 * ldb), r6 = _mm256_loadu_ps(s + 6 * ldb),
			       r7 = _mm256_loadu_ps(s + 7 * ldb);
			__m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
			       t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
			       t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
			r0 = _mm256_shuffle_ps(t0, t2, 0x44), r1 = _mm256_shuffle_ps(t0, t2, 0xee);
			r2 = _mm256_shuffle_ps(t1, t3, 0x44), r3 = _mm256_shuffle_ps(t1, t3, 0xee);
			r4 = _mm256_shuffle_ps(t4, t6, 0x44), r5 = _mm256_shuffle_ps(t4, t6, 0xee);
			r6 = _mm256_shuffle_ps(t5, t7, 0x44), r7 = _mm256_shuffle_ps(t5, t7, 0xee);
			float *d = dst + kk * n + j;
			_mm256_storeu_ps(d, _mm256_permute2f128_ps(r0, r4, 0x20));
			_mm256_storeu_ps(d + n, _mm256_permute2f128_ps(r1, r5, 0x20));
			_mm256_storeu_ps(d + 2 * n, _mm256_permute2f128_ps(r2, r6, 0x20));
			_mm256_storeu_ps(d + 3 * n, _mm256_permute2f128_ps(r3, r7, 0x20));
			_mm256_storeu_ps(d + 4 * n, _mm256_permute2f128_ps(r0, r4, 0x31));
			_mm256_storeu_ps(d + 5 * n, _mm256_permute2f128_ps(r1, r5, 0x31));
			_mm256_storeu_ps(d + 6 * n, _mm256_permute2f128_ps(r2, r6, 0x31));
			_mm256_storeu_ps(d + 7 * n, _mm256_permute2f128_ps(r3, r7, 0x31));
		}
		for (; kk < k; kk++)
			for (int64_t jj = j; jj < j + 8; jj++) dst[kk * n + jj] = b[jj * ldb + kk];
	}
	for (; j < j1; j++)
		for (int64_t kk = 0; kk < k; kk++) dst[kk * n + j] = b[j * ldb + kk];
}
*/
import "C"

import "unsafe"

var f32SmallCPU = C.hpusim_f32small_supported() != 0

// f32SmallCall computes rows [i0, i1) and columns [j0, j1) of C = alpha*op(A)@B + beta*C
// for row-major B (see the C above); A's element (i, kk) at a[i*ars + kk*acs].
func f32SmallCall(i0, i1, j0, j1, k int, a unsafe.Pointer, ars, acs int64, b unsafe.Pointer, ldb int,
	c unsafe.Pointer, ldc int, alpha, beta float32) {
	C.hpusim_f32small(C.int64_t(i0), C.int64_t(i1), C.int64_t(j0), C.int64_t(j1), C.int64_t(k), (*C.float)(a),
		C.int64_t(ars), C.int64_t(acs), (*C.float)(b), C.int64_t(ldb), (*C.float)(c), C.int64_t(ldc),
		C.float(alpha), C.float(beta))
}

// f32SmallPackBT writes columns [j0, j1) of the row-major k×n copy of a transposed B
// (element (kk, j) at b[j*ldb + kk]) into dst.
func f32SmallPackBT(dst []float32, b unsafe.Pointer, ldb, k, n, j0, j1 int) {
	C.hpusim_f32small_pack_bt((*C.float)(unsafe.Pointer(&dst[0])), (*C.float)(b), C.int64_t(ldb), C.int64_t(k),
		C.int64_t(n), C.int64_t(j0), C.int64_t(j1))
}
