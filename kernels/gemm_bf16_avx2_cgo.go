//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <immintrin.h>
#include "isa.h"
#include <stdint.h>
#include <string.h>

// bfloat16 GEMM for CPUs with AVX2 and FMA but no AVX512-BF16 (gemm_bf16_avx2.go): the
// operands are widened to float32 while they are packed into panels (A: [k][B2MR] per
// B2MR rows; B: [k][B2NR] per B2NR columns; zeros past m and n), and a B2MR x B2NR tile
// of float32 sums is kept in 12 registers, summed with fused multiply-adds in k order in
// blocks of B2KC. Every function with vector code carries its own target attribute, and
// none runs unless hpusim_b2_supported says the CPU has AVX2 and FMA.

enum { B2MR = 6, B2NR = 16, B2KC = 256, B2QC = 4 };

int hpusim_b2_supported(void) {
	__builtin_cpu_init();
	return hpusim_isa_cap() >= HPUSIM_ISA_LEVEL_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static inline float b2_f(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

// Eight bfloat16 values at p widened to float32.
__attribute__((target("avx2"), always_inline)) static inline __m256 b2_load8(const uint16_t *p) {
	__m128i h = _mm_loadu_si128((const __m128i *)p);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// r[i] = column i of the 8x8 matrix whose rows are r[0..7].
__attribute__((target("avx2"), always_inline)) static inline void b2_tr8(__m256 r[8]) {
	__m256 t[8], s[8];
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int h = 0; h < 8; h += 4) {
		s[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
		s[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xee);
		s[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
		s[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xee);
	}
	for (int i = 0; i < 4; i++) {
		r[i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x20);
		r[4 + i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x31);
	}
}

// Stores the first w (6 or 16) floats of r at d without writing past d+w (no masked
// stores: VMASKMOVPS stores are microcoded and slow on AMD cores).
__attribute__((target("avx2"), always_inline)) static inline void b2_store6(float *d, __m256 r) {
	_mm_storeu_ps(d, _mm256_castps256_ps128(r));
	_mm_storel_pi((__m64 *)(d + 4), _mm256_extractf128_ps(r, 1));
}

// Six bfloat16 values at p (exactly six read) widened to float32 in lanes 0..5.
__attribute__((target("avx2"), always_inline)) static inline __m256 b2_load6(const uint16_t *p) {
	int32_t t;
	memcpy(&t, p + 4, 4);
	__m128i h = _mm_insert_epi32(_mm_loadl_epi64((const __m128i *)p), t, 2);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Packs lines [l0, l0+nl) (nl <= w) of a matrix whose line l has its kk-th element at
// src[l*ls + kk*ks] into one panel [k][w] at dst, widened; lines past nl are zero. Lines
// with contiguous k (ks == 1) go through 8x8 transposes in registers, 8 lines by 8 k at a
// time; lines with contiguous elements across lines (ls == 1) are copied a k at a time.
// Only the nl lines' own elements are read.
__attribute__((target("avx2"))) static void b2_pack_panel(float *dst, const uint16_t *src, int64_t ls, int64_t ks,
                                                          int64_t k, int64_t l0, int nl, int w) {
	int64_t kk0 = 0;
	if (ks == 1) {
		for (; kk0 + 8 <= k; kk0 += 8)
			for (int x0 = 0; x0 < w; x0 += 8) {
				__m256 r[8];
				int rows = nl - x0;
#pragma GCC unroll 8
				for (int x = 0; x < 8; x++)
					r[x] = x < rows ? b2_load8(src + (l0 + x0 + x) * ls + kk0) : _mm256_setzero_ps();
				b2_tr8(r);
				if (w == 6) {
					// Row j of the transpose holds k = kk0+j's six lines (and two zeros):
					// each store overlaps the next one's first two floats.
#pragma GCC unroll 7
					for (int j = 0; j < 7; j++) _mm256_storeu_ps(dst + (kk0 + j) * 6, r[j]);
					b2_store6(dst + (kk0 + 7) * 6, r[7]);
				} else
#pragma GCC unroll 8
					for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + (kk0 + j) * w + x0, r[j]);
			}
	} else if (ls == 1 && nl == w) {
		if (w == 6)
			for (; kk0 < k; kk0++) b2_store6(dst + kk0 * 6, b2_load6(src + l0 + kk0 * ks));
		else if ((w & 7) == 0)
			for (; kk0 < k; kk0++)
				for (int x0 = 0; x0 < w; x0 += 8) _mm256_storeu_ps(dst + kk0 * w + x0, b2_load8(src + l0 + x0 + kk0 * ks));
	}
	for (int64_t kk = kk0; kk < k; kk++) {
		float *d = dst + kk * w;
		for (int x = 0; x < nl; x++) d[x] = b2_f(src[(l0 + x) * ls + kk * ks]);
		for (int x = nl; x < w; x++) d[x] = 0;
	}
}

// A (element (i, kk) at a[i*rs + kk*cs]) rows [r0, r1) into panels [k][B2MR] at dst
// (panel of row r0 first; r0 a multiple of B2MR, r1 <= m).
void hpusim_b2_pack_a(float *dst, const uint16_t *a, int64_t rs, int64_t cs, int64_t k, int64_t r0, int64_t r1) {
	for (int64_t l0 = r0; l0 < r1; l0 += B2MR, dst += k * B2MR) {
		int nl = r1 - l0 < B2MR ? (int)(r1 - l0) : B2MR;
		b2_pack_panel(dst, a, rs, cs, k, l0, nl, B2MR);
	}
}

// B (element (kk, j) at b[kk*rs + j*cs]) columns [c0, c1) into panels [k][B2NR] at dst.
void hpusim_b2_pack_b(float *dst, const uint16_t *b, int64_t rs, int64_t cs, int64_t k, int64_t c0, int64_t c1) {
	for (int64_t l0 = c0; l0 < c1; l0 += B2NR, dst += k * B2NR) {
		int nl = c1 - l0 < B2NR ? (int)(c1 - l0) : B2NR;
		b2_pack_panel(dst, b, cs, rs, k, l0, nl, B2NR);
	}
}

// One tile over kc values of k: c[r*ldc + j] (r < mr, j < nr) = sum, or c + sum with add.
__attribute__((target("avx2,fma"))) static void b2_tile(const float *pa, const float *pb, int64_t kc, float *c,
                                                        int64_t ldc, int mr, int nr, int add) {
	__m256 acc[B2MR][2];
#pragma GCC unroll 6
	for (int r = 0; r < B2MR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
	for (int64_t kk = 0; kk < kc; kk++) {
		__m256 b0 = _mm256_loadu_ps(pb + kk * B2NR), b1 = _mm256_loadu_ps(pb + kk * B2NR + 8);
#pragma GCC unroll 6
		for (int r = 0; r < B2MR; r++) {
			__m256 av = _mm256_broadcast_ss(pa + kk * B2MR + r);
			acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
			acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
		}
	}
	if (mr == B2MR && nr == B2NR) {
#pragma GCC unroll 6
		for (int r = 0; r < B2MR; r++) {
			float *cr = c + r * ldc;
			__m256 v0 = acc[r][0], v1 = acc[r][1];
			if (add) v0 = _mm256_add_ps(_mm256_loadu_ps(cr), v0), v1 = _mm256_add_ps(_mm256_loadu_ps(cr + 8), v1);
			_mm256_storeu_ps(cr, v0);
			_mm256_storeu_ps(cr + 8, v1);
		}
		return;
	}
	float t[B2MR][B2NR];
	for (int r = 0; r < B2MR; r++) _mm256_storeu_ps(t[r], acc[r][0]), _mm256_storeu_ps(t[r] + 8, acc[r][1]);
	for (int r = 0; r < mr; r++)
		for (int j = 0; j < nr; j++) c[r * ldc + j] = add ? c[r * ldc + j] + t[r][j] : t[r][j];
}

// C (m x n, row stride ldc) = the product of the packed panels of A (m rows) and of B (n
// columns) over k; for each k block, B2QC column panels (in L2) meet every row panel.
void hpusim_b2_gemm(const float *pa, const float *pb, int64_t m, int64_t n, int64_t k, float *c, int64_t ldc) {
	int64_t mp = (m + B2MR - 1) / B2MR, np = (n + B2NR - 1) / B2NR;
	for (int64_t k0 = 0; k0 < k; k0 += B2KC) {
		int64_t kb = k - k0 < B2KC ? k - k0 : B2KC;
		for (int64_t q0 = 0; q0 < np; q0 += B2QC) {
			int64_t q1 = q0 + B2QC < np ? q0 + B2QC : np;
			for (int64_t p = 0; p < mp; p++) {
				int mr = m - p * B2MR < B2MR ? (int)(m - p * B2MR) : B2MR;
				for (int64_t q = q0; q < q1; q++) {
					int nr = n - q * B2NR < B2NR ? (int)(n - q * B2NR) : B2NR;
					b2_tile(pa + p * k * B2MR + k0 * B2MR, pb + q * k * B2NR + k0 * B2NR, kb,
					        c + p * B2MR * ldc + q * B2NR, ldc, mr, nr, k0 > 0);
				}
			}
		}
	}
}
*/
import "C"

import "unsafe"

const (
	b2MR = C.B2MR
	b2NR = C.B2NR
)

// b2CPU reports whether this CPU runs the AVX2/FMA bfloat16 kernel.
var b2CPU = C.hpusim_b2_supported() != 0

// b2PackA widens rows [r0, r1) of a (element (i, kk) at a + 2*(i*rs + kk*cs)) into panels.
func b2PackA(dst []float32, a unsafe.Pointer, rs, cs int64, k, r0, r1 int) {
	C.hpusim_b2_pack_a(b2f32p(dst), (*C.uint16_t)(a), C.int64_t(rs), C.int64_t(cs), C.int64_t(k), C.int64_t(r0), C.int64_t(r1))
}

// b2PackB widens columns [c0, c1) of b (element (kk, j) at b + 2*(kk*rs + j*cs)) into panels.
func b2PackB(dst []float32, b unsafe.Pointer, rs, cs int64, k, c0, c1 int) {
	C.hpusim_b2_pack_b(b2f32p(dst), (*C.uint16_t)(b), C.int64_t(rs), C.int64_t(cs), C.int64_t(k), C.int64_t(c0), C.int64_t(c1))
}

// b2Gemm: c (m x n, row stride ldc) = pa @ pb over k.
func b2Gemm(pa, pb []float32, m, n, k int, c []float32, ldc int) {
	C.hpusim_b2_gemm(b2f32p(pa), b2f32p(pb), C.int64_t(m), C.int64_t(n), C.int64_t(k), b2f32p(c), C.int64_t(ldc))
}

func b2f32p(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
