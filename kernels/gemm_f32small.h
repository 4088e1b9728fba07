#ifndef HPUSIM_GEMM_F32SMALL_H
#define HPUSIM_GEMM_F32SMALL_H
#include <stdint.h>
#include <immintrin.h>
#include "isa.h"

// Small and mid-sized float32 products C = alpha*op(A) op(B) + beta*C on AVX2+FMA (see
// gemm_f32small.go). Every element of op(A) op(B) is summed as fused multiply-add chains
// over k in increasing order: one chain from zero per block of F32S_KB values of k, the
// blocks' sums added in k order (one chain for k <= F32S_KB). The epilogue rounds
// fma(beta, c, alpha*sum) (beta == 0: alpha*sum, C not read; with a bias row, c is the
// bias). None of this depends on how C is tiled or split, so any worker count gives the
// same bits. The tile is 6 rows by 16 columns (12 accumulators, two B vectors, one A
// broadcast); op(B) is read one 16-column strip at a time, packed (f32small_pack) or in
// place.

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

// R rows (1..6) by 16 columns of B (row kk at b + kk*ldb, 16 readable floats), k in
// [k0, k1): the chain sums into acc (2*R vectors), zeroed first. TA (a compile-time
// constant after inlining) says how A is laid out: 0, row r's element kk at a[r*lda + kk];
// 1, at a[kk*lda + r]; either way every load is a register or register+index address
// from three pointers stepped once a k. (Unrolling the loop by 2 or 4 measured 0-10%
// slower at the MLP's shapes.)
__attribute__((target("avx2,fma"), always_inline)) static inline void f32small_chain(
    int R, int TA, int64_t k0, int64_t k1, const float *a, int64_t lda, const float *b, int64_t ldb, __m256 *acc) {
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
	       c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	const float *br = b + k0 * ldb;
	// TA: rows are adjacent floats of one k row; else rows 0-2 from p0, 3-5 from p3.
	const float *p0 = TA ? a + k0 * lda : a + k0;
	const float *p3 = TA ? p0 + 3 : (R > 3 ? a + 3 * lda + k0 : p0);
	const int64_t ars = TA ? 1 : lda, acs = TA ? lda : 1;
	for (int64_t kk = k0; kk < k1; kk++) {
		__m256 b0 = _mm256_loadu_ps(br), b1 = _mm256_loadu_ps(br + 8);
		__m256 x = _mm256_broadcast_ss(p0);
		c00 = _mm256_fmadd_ps(x, b0, c00);
		c01 = _mm256_fmadd_ps(x, b1, c01);
		if (R > 1) {
			x = _mm256_broadcast_ss(p0 + ars);
			c10 = _mm256_fmadd_ps(x, b0, c10);
			c11 = _mm256_fmadd_ps(x, b1, c11);
		}
		if (R > 2) {
			x = _mm256_broadcast_ss(p0 + 2 * ars);
			c20 = _mm256_fmadd_ps(x, b0, c20);
			c21 = _mm256_fmadd_ps(x, b1, c21);
		}
		if (R > 3) {
			x = _mm256_broadcast_ss(p3);
			c30 = _mm256_fmadd_ps(x, b0, c30);
			c31 = _mm256_fmadd_ps(x, b1, c31);
		}
		if (R > 4) {
			x = _mm256_broadcast_ss(p3 + ars);
			c40 = _mm256_fmadd_ps(x, b0, c40);
			c41 = _mm256_fmadd_ps(x, b1, c41);
		}
		if (R > 5) {
			x = _mm256_broadcast_ss(p3 + 2 * ars);
			c50 = _mm256_fmadd_ps(x, b0, c50);
			c51 = _mm256_fmadd_ps(x, b1, c51);
		}
		br += ldb;
		p0 += acs;
		p3 += acs;
	}
	acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11, acc[4] = c20, acc[5] = c21;
	acc[6] = c30, acc[7] = c31, acc[8] = c40, acc[9] = c41, acc[10] = c50, acc[11] = c51;
}

// One R x w tile of C (w <= 16; B has 16 readable columns, those past w ignored). With a
// bias (w floats, one per column), beta applies to it instead of C's rows (C not read).
__attribute__((target("avx2,fma"), always_inline)) static inline void f32small_block(
    int R, int TA, int64_t w, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
    int64_t ldc, float alpha, float beta, const float *bias) {
	__m256 sum[2 * F32S_MR], part[2 * F32S_MR];
	f32small_chain(R, TA, 0, k < F32S_KB ? k : F32S_KB, a, lda, b, ldb, sum);
	for (int64_t k0 = F32S_KB; k0 < k; k0 += F32S_KB) {
		f32small_chain(R, TA, k0, k - k0 < F32S_KB ? k : k0 + F32S_KB, a, lda, b, ldb, part);
		for (int r = 0; r < 2 * R; r++) sum[r] = _mm256_add_ps(sum[r], part[r]);
	}
	__m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
	if (w == 16) {
		__m256 z0, z1;
		if (bias) z0 = _mm256_loadu_ps(bias), z1 = _mm256_loadu_ps(bias + 8);
		for (int r = 0; r < R; r++) {
			float *cr = c + r * ldc;
			__m256 v0 = sum[2 * r], v1 = sum[2 * r + 1];
			if (alpha != 1) {
				v0 = _mm256_mul_ps(va, v0);
				v1 = _mm256_mul_ps(va, v1);
			}
			if (bias) {
				v0 = _mm256_fmadd_ps(vb, z0, v0);
				v1 = _mm256_fmadd_ps(vb, z1, v1);
			} else if (beta != 0) {
				v0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr), v0);
				v1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr + 8), v1);
			}
			_mm256_storeu_ps(cr, v0);
			_mm256_storeu_ps(cr + 8, v1);
		}
		return;
	}
	__m256i m0 = f32small_mask(w >= 8 ? 8 : w), m1 = f32small_mask(w > 8 ? w - 8 : 0);
	__m256 z0, z1;
	if (bias) z0 = _mm256_maskload_ps(bias, m0), z1 = _mm256_maskload_ps(bias + 8, m1);
	for (int r = 0; r < R; r++) {
		float *cr = c + r * ldc;
		__m256 v0 = sum[2 * r], v1 = sum[2 * r + 1];
		if (alpha != 1) {
			v0 = _mm256_mul_ps(va, v0);
			v1 = _mm256_mul_ps(va, v1);
		}
		if (bias) {
			v0 = _mm256_fmadd_ps(vb, z0, v0);
			v1 = _mm256_fmadd_ps(vb, z1, v1);
		} else if (beta != 0) {
			v0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr, m0), v0);
			v1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr + 8, m1), v1);
		}
		_mm256_maskstore_ps(cr, m0, v0);
		if (w > 8) _mm256_maskstore_ps(cr + 8, m1, v1);
	}
}

// Rows [i0, i1) of one strip of C (w columns at c), B's strip at b (16 readable columns).
__attribute__((target("avx2,fma"), always_inline)) static inline void f32small_rows(
    int TA, int64_t i0, int64_t i1, int64_t w, int64_t k, const float *a, int64_t lda, const float *b,
    int64_t ldb, float *c, int64_t ldc, float alpha, float beta, const float *bias) {
	int64_t ars = TA ? 1 : lda;
	int64_t i = i0;
	for (; i + F32S_MR <= i1; i += F32S_MR)
		f32small_block(F32S_MR, TA, w, k, a + i * ars, lda, b, ldb, c + i * ldc, ldc, alpha, beta, bias);
	const float *ai = a + i * ars;
	float *ci = c + i * ldc;
	switch (i1 - i) {
	case 5: f32small_block(5, TA, w, k, ai, lda, b, ldb, ci, ldc, alpha, beta, bias); break;
	case 4: f32small_block(4, TA, w, k, ai, lda, b, ldb, ci, ldc, alpha, beta, bias); break;
	case 3: f32small_block(3, TA, w, k, ai, lda, b, ldb, ci, ldc, alpha, beta, bias); break;
	case 2: f32small_block(2, TA, w, k, ai, lda, b, ldb, ci, ldc, alpha, beta, bias); break;
	case 1: f32small_block(1, TA, w, k, ai, lda, b, ldb, ci, ldc, alpha, beta, bias); break;
	}
}

// dst[kk*16 + jj] = op(B)(kk, j + jj) for kk < k and jj < w, zero for w <= jj < 16: one
// 16-column strip of op(B) packed contiguous (64 bytes a k), B's element (kk, j) at
// b[kk*ldb + j], or at b[j*ldb + kk] when tb (transposed by 8x8 blocks through registers).
__attribute__((target("avx2,fma"))) static void f32small_pack(float *dst, const float *b, int64_t ldb, int tb,
                                                             int64_t k, int64_t w) {
	if (!tb) {
		if (w == 16) {
			for (int64_t kk = 0; kk < k; kk++) {
				_mm256_storeu_ps(dst + kk * 16, _mm256_loadu_ps(b + kk * ldb));
				_mm256_storeu_ps(dst + kk * 16 + 8, _mm256_loadu_ps(b + kk * ldb + 8));
			}
			return;
		}
		__m256i m0 = f32small_mask(w >= 8 ? 8 : w), m1 = f32small_mask(w > 8 ? w - 8 : 0);
		for (int64_t kk = 0; kk < k; kk++) {
			_mm256_storeu_ps(dst + kk * 16, _mm256_maskload_ps(b + kk * ldb, m0));
			_mm256_storeu_ps(dst + kk * 16 + 8, _mm256_maskload_ps(b + kk * ldb + 8, m1));
		}
		return;
	}
	for (int64_t h = 0; h < 16; h += 8) {
		int64_t wh = w - h < 0 ? 0 : (w - h > 8 ? 8 : w - h); // valid columns of this half
		float *d = dst + h;
		const float *s0 = b + h * ldb;
		int64_t kk = 0;
		if (wh == 8) {
			for (; kk + 8 <= k; kk += 8) {
				const float *s = s0 + kk;
				__m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ldb), r2 = _mm256_loadu_ps(s + 2 * ldb),
				       r3 = _mm256_loadu_ps(s + 3 * ldb), r4 = _mm256_loadu_ps(s + 4 * ldb),
				       r5 = _mm256_loadu_ps(s + 5 * ldb), r6 = _mm256_loadu_ps(s + 6 * ldb),
				       r7 = _mm256_loadu_ps(s + 7 * ldb);
				__m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
				       t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
				       t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
				       t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
				r0 = _mm256_shuffle_ps(t0, t2, 0x44), r1 = _mm256_shuffle_ps(t0, t2, 0xee);
				r2 = _mm256_shuffle_ps(t1, t3, 0x44), r3 = _mm256_shuffle_ps(t1, t3, 0xee);
				r4 = _mm256_shuffle_ps(t4, t6, 0x44), r5 = _mm256_shuffle_ps(t4, t6, 0xee);
				r6 = _mm256_shuffle_ps(t5, t7, 0x44), r7 = _mm256_shuffle_ps(t5, t7, 0xee);
				float *dk = d + kk * 16;
				_mm256_storeu_ps(dk, _mm256_permute2f128_ps(r0, r4, 0x20));
				_mm256_storeu_ps(dk + 16, _mm256_permute2f128_ps(r1, r5, 0x20));
				_mm256_storeu_ps(dk + 32, _mm256_permute2f128_ps(r2, r6, 0x20));
				_mm256_storeu_ps(dk + 48, _mm256_permute2f128_ps(r3, r7, 0x20));
				_mm256_storeu_ps(dk + 64, _mm256_permute2f128_ps(r0, r4, 0x31));
				_mm256_storeu_ps(dk + 80, _mm256_permute2f128_ps(r1, r5, 0x31));
				_mm256_storeu_ps(dk + 96, _mm256_permute2f128_ps(r2, r6, 0x31));
				_mm256_storeu_ps(dk + 112, _mm256_permute2f128_ps(r3, r7, 0x31));
			}
		}
		if (wh == 0) {
			for (; kk < k; kk++) _mm256_storeu_ps(d + kk * 16, _mm256_setzero_ps());
			continue;
		}
		for (; kk < k; kk++) {
			int64_t jj = 0;
			for (; jj < wh; jj++) d[kk * 16 + jj] = s0[jj * ldb + kk];
			for (; jj < 8; jj++) d[kk * 16 + jj] = 0;
		}
	}
}

// Rows [i0, i1) and columns [j0, j1) of C = alpha*op(A) op(B) + beta*C (j0 a multiple of
// 16, or 0). op(A)'s element (i, kk) at a[i*lda + kk], or a[kk*lda + i] when ta; op(B)'s
// (kk, j) at b[kk*ldb + j], or b[j*ldb + kk] when tb. Each 16-column strip of op(B) is
// packed into bs (16*k floats, the caller's own) unless it is read in place: B not
// transposed, a whole strip, and k <= 128 or one row tile to read it. (Packing B's long
// strips pays: contiguous rows instead of k lines ldb apart, which share a few L1 sets;
// 64x64x1024 with A transposed 25% faster, 256x64x256 10%; at k = 64 it cost 1-3%.) bias, when not
// NULL, is a row of n floats beta scales in place of C (addmm's broadcast self).
__attribute__((target("avx2,fma"))) void hpusim_f32small(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t k,
                                                          const float *a, int64_t lda, int ta, const float *b,
                                                          int64_t ldb, int tb, float *bs, float *c, int64_t ldc,
                                                          float alpha, float beta, const float *bias) {
	for (int64_t j = j0; j < j1; j += 16) {
		int64_t w = j1 - j < 16 ? j1 - j : 16;
		const float *bp = b + j;
		int64_t lb = ldb;
		if (tb || w < 16 || (i1 - i0 > F32S_MR && k > 128)) {
			f32small_pack(bs, tb ? b + j * ldb : b + j, ldb, tb, k, w);
			bp = bs, lb = 16;
		}
		const float *bz = bias ? bias + j : 0;
		if (ta)
			f32small_rows(1, i0, i1, w, k, a, lda, bp, lb, c + j, ldc, alpha, beta, bz);
		else
			f32small_rows(0, i0, i1, w, k, a, lda, bp, lb, c + j, ldc, alpha, beta, bz);
	}
}
#endif
