// The attention tiles' products on AVX-512 (see attention_gemm.go), included by
// attention_cgo.go: one C unit, so that its fused block loops call them without crossing
// back into Go. Row-major C (m x n) = alpha * A B (set) or C + alpha * A B (accumulate),
// or rs[r] * C + alpha * A B with a row scale. A's element (r, kk) is a[r*ars + kk*acs], so a tile is used as it lies, as A or
// as its transpose, with no packing; B is row-major with leading dimension ldb. A 12 x 32
// block of C is summed in 24 registers: per kk, two vectors of B's row and a broadcast of
// each row's A value into fused multiply-adds, kk in order. The causal kinds skip what
// the causal limit zeroes: whole 12 x 32 blocks (kind 1, written as zeros) or, per 12-row
// panel, the leading or trailing part of the k range whose products are all zero (kinds 2
// and 3).

#include <stdint.h>
#include <immintrin.h>

enum { AMR = 12, ANR = 32 };

__attribute__((target("avx512f"), always_inline)) static inline void
att_block(const float *a, int64_t ars, int64_t acs, int mr, int clamp, const float *b, int64_t ldb, int64_t k0, int64_t k1,
          __mmask16 m0, __mmask16 m1, float *c, int64_t ldc, float alpha, int accum, const float *rs) {
	__m512 acc[AMR][2];
#pragma GCC unroll 12
	for (int r = 0; r < AMR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
	const float *ar[AMR];
#pragma GCC unroll 12
	for (int r = 0; r < AMR; r++) ar[r] = a + (clamp && r >= mr ? 0 : r) * ars;
	for (int64_t kk = k0; kk < k1; kk++) {
		const float *bk = b + kk * ldb;
		__m512 b0 = _mm512_maskz_loadu_ps(m0, bk), b1 = _mm512_maskz_loadu_ps(m1, bk + 16);
#pragma GCC unroll 12
		for (int r = 0; r < AMR; r++) {
			__m512 av = _mm512_set1_ps(ar[r][kk * acs]);
			acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
			acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
		}
	}
	__m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 12
	for (int r = 0; r < AMR; r++) {
		if (r >= mr) break;
		float *cr = c + r * ldc;
		__m512 v0 = _mm512_mul_ps(acc[r][0], va), v1 = _mm512_mul_ps(acc[r][1], va);
		if (accum) {
			__m512 c0 = _mm512_maskz_loadu_ps(m0, cr), c1 = _mm512_maskz_loadu_ps(m1, cr + 16);
			if (rs) {
				__m512 s = _mm512_set1_ps(rs[r]);
				c0 = _mm512_mul_ps(c0, s);
				c1 = _mm512_mul_ps(c1, s);
			}
			v0 = _mm512_add_ps(c0, v0);
			v1 = _mm512_add_ps(c1, v1);
		}
		_mm512_mask_storeu_ps(cr, m0, v0);
		_mm512_mask_storeu_ps(cr + 16, m1, v1);
	}
}

// Two copies of the loops, for A read along its rows (acs 1) and down its columns (ars 1),
// so that the compiler knows the unit stride. Rows past m of a partial 12-row block read
// row 0 along rows; down columns they read up to 11 floats past the block (the caller's
// buffers keep room, attSlack) and are never stored.
#define ATT_GEMM_BODY(ARS, ACS, CLAMP)                                                                        \
	for (int64_t j = 0; j < n; j += ANR) {                                                             \
		int64_t nr = n - j < ANR ? n - j : ANR;                                                        \
		__mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);                               \
		__mmask16 m1 = nr >= 32 ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;          \
		for (int64_t i = 0; i < m; i += AMR) {                                                         \
			int mr = m - i < AMR ? (int)(m - i) : AMR;                                                 \
			int64_t k0 = 0, k1 = k;                                                                    \
			if (kind == 1 && j > i + mr - 1 + off) k1 = 0;                                             \
			if (kind == 2 && i + mr + off < k1) k1 = i + mr + off;                                     \
			if (kind == 3 && i - off > 0) k0 = i - off;                                                \
			if (k1 < k0) k1 = k0;                                                                      \
			if (nr == ANR)                                                                             \
				att_block(a + i * (ARS), ARS, ACS, mr, CLAMP, b + j, ldb, k0, k1, 0xffff, 0xffff, c + i * ldc + j, \
				          ldc, alpha, accum, rs ? rs + i : 0);                                             \
			else                                                                                       \
				att_block(a + i * (ARS), ARS, ACS, mr, CLAMP, b + j, ldb, k0, k1, m0, m1, c + i * ldc + j, ldc,  \
				          alpha, accum, rs ? rs + i : 0);                                                  \
		}                                                                                              \
	}

__attribute__((target("avx512f")))
static void att_gemm_rows(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, const float *b, int64_t ldb,
                          float *c, int64_t ldc, float alpha, int accum, const float *rs, int kind, int64_t off) {
	ATT_GEMM_BODY(ars, 1, 1)
}

__attribute__((target("avx512f")))
static void att_gemm_cols(int64_t m, int64_t n, int64_t k, const float *a, int64_t acs, const float *b, int64_t ldb,
                          float *c, int64_t ldc, float alpha, int accum, const float *rs, int kind, int64_t off) {
	ATT_GEMM_BODY(1, acs, 0)
}

static void att_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t acs, const float *b,
                     int64_t ldb, float *c, int64_t ldc, float alpha, int accum, const float *rs, int kind, int64_t off) {
	if (acs == 1)
		att_gemm_rows(m, n, k, a, ars, b, ldb, c, ldc, alpha, accum, rs, kind, off);
	else
		att_gemm_cols(m, n, k, a, acs, b, ldb, c, ldc, alpha, accum, rs, kind, off);
}
