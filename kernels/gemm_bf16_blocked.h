// Blocked bfloat16 GEMM on AVX512-BF16 (VDPBF16PS), included by gemm_bf16_blocked_cgo.go.
//
// C[i, j] = sum_k A[i, k] B[k, j]: each product of two bfloat16 values is exact in float32
// and the sum runs in float32 registers over the whole of k (in k-pair order, one chain per
// element), so a result does not depend on how the work is split.
//
// Operands are packed once per call into k-pair ("VNNI") panels, by every worker:
//   A: panels of GB_MR rows,    [k2][GB_MR][2]      (panel p at p*k2*GB_MR*2)
//   B: panels of GB_NR columns, [k2][w][2]          (panel q at q*k2*GB_NR*2; w = GB_NR
//      except for the last panel, whose width is its columns rounded up to 16)
// with zeros past m, n and k. The micro-kernel keeps a GB_MR x w float32 tile in registers
// (6 x 4 vectors at full width), per k pair loading w/16 vectors of B and broadcasting
// each row's pair of A. Its epilogue either stores float32 (optionally adding what is
// there: a k-blocked product) or computes alpha*sum + beta*self and rounds it to bfloat16
// (nearest-even, NaN to 0x7fc0: the F32ToBF16 rounding of half.go) straight into out.
#ifndef HPUSIM_GEMM_BF16_BLOCKED_H
#define HPUSIM_GEMM_BF16_BLOCKED_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "gemm_bf16_pack.h"

enum { GB_MR = 6, GB_NR = 64 };

// The most k pairs one pass sums in registers (gbKC2 of gemm_bf16_blocked.go).
enum { GB_KC2 = 1024 };

// What a tile does with its sums.
typedef struct {
	float *c;          // float32 result (o == NULL): c[i*ldc + j]
	int64_t ldc;
	int add;           // add the sums to c (later k blocks)
	uint16_t *o;       // bfloat16 result: o[i*ldo + j]
	int64_t ldo;
	const uint16_t *s; // bfloat16 self (beta*self is added): s[i*lds + j], or NULL
	int64_t lds;
	float alpha, beta;
	int scale;         // alpha != 1
	int trans;         // the tiles compute the transposed product: tile (r, c) is C[c, r]
} gb_epi;

static inline int64_t gb_min(int64_t a, int64_t b) { return a < b ? a : b; }

// Width of B panel q of n columns: GB_NR, or the last panel's columns rounded up to 16.
static inline int64_t gb_panel_width(int64_t n, int64_t q) {
	int64_t rest = n - q * GB_NR;
	return rest >= GB_NR ? GB_NR : (rest + 15) / 16 * 16;
}

static inline uint32_t gb_pair(const uint16_t *lo, const uint16_t *hi) {
	return (uint32_t)*lo | (uint32_t)(hi ? *hi : 0) << 16;
}

// Packs lines [l0, l0+w) of a matrix whose line l has its k-th element at src[l*ls + k*ks]
// into one panel [k2][w][2] at dst; lines at or past nl and the pair half past k are zero.
__attribute__((target("avx512f,avx512bw,avx512vl")))
static void gb_pack_panel(uint16_t *dst, const uint16_t *src, int64_t ls, int64_t ks, int64_t nl, int64_t k,
                          int64_t l0, int64_t w) {
	int64_t k2 = (k + 1) / 2, full = k / 2; // pairs with both halves inside k
	int64_t wn = gb_min(w, nl - l0);        // real lines in this panel
	uint32_t *d = (uint32_t *)dst;
	if (ls == 1 && wn == w && w % 32 == 0) {
		// Adjacent lines (a row-major B, a transposed A): pair kk interleaves two runs
		// of w contiguous values, 32 at a time.
		const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
		                                    37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
		const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
		for (int64_t kk = 0; kk < k2; kk++) {
			const uint16_t *r0 = src + l0 + 2 * kk * ks;
			for (int64_t x = 0; x < w; x += 32) {
				__m512i v0 = _mm512_loadu_si512(r0 + x);
				__m512i v1 = kk < full ? _mm512_loadu_si512(r0 + ks + x) : _mm512_setzero_si512();
				_mm512_storeu_si512(d + kk * w + x, _mm512_permutex2var_epi16(v0, lo, v1));
				_mm512_storeu_si512(d + kk * w + x + 16, _mm512_permutex2var_epi16(v0, hi, v1));
			}
		}
		return;
	}
	if (ks == 1) {
		// Pairs adjacent in memory (a row-major A, a transposed B such as F.linear's
		// weight): a 32-bit transpose, 16 pairs of a line at a time.
		int64_t kk0 = 0;
		if (w % 16 == 0) { // B panels: whole 16 x 16 blocks transposed in registers
			kk0 = full / 16 * 16;
			gbp_pack_adjacent_pairs(d, src, ls, l0, w, wn, kk0);
		}
		for (; kk0 + 16 <= full; kk0 += 16) {
			for (int64_t x = 0; x < wn; x++) {
				const uint16_t *line = src + (l0 + x) * ls + 2 * kk0;
				uint32_t t[16];
				memcpy(t, line, sizeof t);
				for (int j = 0; j < 16; j++) d[(kk0 + j) * w + x] = t[j];
			}
			for (int64_t x = wn; x < w; x++)
				for (int j = 0; j < 16; j++) d[(kk0 + j) * w + x] = 0;
		}
		for (int64_t kk = kk0; kk < k2; kk++) {
			for (int64_t x = 0; x < wn; x++) {
				const uint16_t *e = src + (l0 + x) * ls + 2 * kk;
				d[kk * w + x] = gb_pair(e, kk < full ? e + 1 : NULL);
			}
			for (int64_t x = wn; x < w; x++) d[kk * w + x] = 0;
		}
		return;
	}
	for (int64_t kk = 0; kk < k2; kk++) {
		for (int64_t x = 0; x < wn; x++) {
			const uint16_t *e = src + (l0 + x) * ls + 2 * kk * ks;
			d[kk * w + x] = gb_pair(e, kk < full ? e + ks : NULL);
		}
		for (int64_t x = wn; x < w; x++) d[kk * w + x] = 0;
	}
}

// Packs A panels [p0, p1) of the m x k matrix a (element (i, k) at a[i*rs + k*cs]).
void hpusim_gb_pack_a(uint16_t *dst, const uint16_t *a, int64_t rs, int64_t cs, int64_t m, int64_t k, int64_t p0,
                      int64_t p1) {
	int64_t k2 = (k + 1) / 2;
	for (int64_t p = p0; p < p1; p++) gb_pack_panel(dst + p * k2 * GB_MR * 2, a, rs, cs, m, k, p * GB_MR, GB_MR);
}

// Packs B panels [q0, q1) of the k x n matrix b (element (k, j) at b[k*rs + j*cs]).
void hpusim_gb_pack_b(uint16_t *dst, const uint16_t *b, int64_t rs, int64_t cs, int64_t k, int64_t n, int64_t q0,
                      int64_t q1) {
	int64_t k2 = (k + 1) / 2;
	for (int64_t q = q0; q < q1; q++)
		gb_pack_panel(dst + q * k2 * GB_NR * 2, b, cs, rs, n, k, q * GB_NR, gb_panel_width(n, q));
}

// F32ToBF16 of half.go.
static inline uint16_t gb_round1(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Stores a transposed tile's sums t[r][x] (r < mr, x < nr) as C[j0+x, i0+r]: the same
// arithmetic as gb_store, one element at a time.
static void gb_store_trans(const gb_epi *e, int64_t i0, int mr, int64_t j0, int nr, const float *t) {
	for (int x = 0; x < nr; x++) {
		int64_t i = j0 + x;
		for (int r = 0; r < mr; r++) {
			int64_t j = i0 + r;
			float v = t[r * GB_NR + x];
			if (!e->o) {
				float *c = e->c + i * e->ldc + j;
				*c = e->add ? *c + v : v;
				continue;
			}
			if (e->scale) v = v * e->alpha;
			if (e->s) {
				uint32_t u = (uint32_t)e->s[i * e->lds + j] << 16;
				float sv;
				memcpy(&sv, &u, 4);
				v = v + sv * e->beta;
			}
			e->o[i * e->ldo + j] = gb_round1(v);
		}
	}
}

// Rounds 16 float32 lanes to bfloat16 as F32ToBF16 does.
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m256i gb_round16(__m512 x) {
	__m512i u = _mm512_castps_si512(x);
	__m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
	__m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
	                                        _mm512_set1_epi32(0x7f800000));
	r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
	return _mm512_cvtepi32_epi16(r);
}

// Stores row r's sums (mask m) by the epilogue e at column j.
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void gb_store(const gb_epi *e, int64_t i, int64_t j,
                                                                         __m512 x, __mmask16 m) {
	if (!e->o) {
		float *c = e->c + i * e->ldc + j;
		if (e->add) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, c));
		_mm512_mask_storeu_ps(c, m, x);
		return;
	}
	if (e->scale) x = _mm512_mul_ps(x, _mm512_set1_ps(e->alpha));
	if (e->s) {
		__m256i s16 = _mm256_maskz_loadu_epi16(m, e->s + i * e->lds + j);
		__m512 sv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(s16), 16));
		x = _mm512_add_ps(x, _mm512_mul_ps(sv, _mm512_set1_ps(e->beta)));
	}
	_mm256_mask_storeu_epi16(e->o + i * e->ldo + j, m, gb_round16(x));
}

// Stores 16 columns of a transposed tile: x[r] lane l is C[j0+l, i0+r] (r < mr, l < nr <=
// 16), by gb_store's arithmetic, as bfloat16 into out (self, if any, a broadcast row: lds
// 0, so row r adds s[i0+r]). The rounded 6 x 16 block is transposed in registers (as an
// 8 x 16 one, rows 6 and 7 zero), and each result row gets its mr values in one masked
// store instead of mr scalar stores.
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void gb_store_trans16(const gb_epi *e, int64_t i0,
                                                                                 int mr, int64_t j0, int nr,
                                                                                 const __m512 *x) {
	__m256i q[8];
	_Pragma("GCC unroll 6") for (int r = 0; r < GB_MR; r++) {
		__m512 v = x[r];
		if (e->scale) v = _mm512_mul_ps(v, _mm512_set1_ps(e->alpha));
		if (e->s && r < mr) {
			uint32_t u = (uint32_t)e->s[i0 + r] << 16;
			float sv;
			memcpy(&sv, &u, 4);
			v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(sv), _mm512_set1_ps(e->beta)));
		}
		q[r] = gb_round16(v);
	}
	q[6] = q[7] = _mm256_setzero_si256();
	// Within each 128-bit half: 16-bit, 32-bit, then 64-bit interleaves turn rows into
	// columns; w[c] holds result row j0+c in its low half and j0+8+c in its high half.
	__m256i t[8], u[8], w[8];
	for (int p = 0; p < 4; p++) {
		t[2 * p] = _mm256_unpacklo_epi16(q[2 * p], q[2 * p + 1]);
		t[2 * p + 1] = _mm256_unpackhi_epi16(q[2 * p], q[2 * p + 1]);
	}
	for (int h = 0; h < 2; h++) { // rows 0-3 (h 0) and 4-7 (h 1)
		__m256i *a = t + 4 * h, *d = u + 4 * h;
		d[0] = _mm256_unpacklo_epi32(a[0], a[2]); // columns 0, 1
		d[1] = _mm256_unpackhi_epi32(a[0], a[2]); // 2, 3
		d[2] = _mm256_unpacklo_epi32(a[1], a[3]); // 4, 5
		d[3] = _mm256_unpackhi_epi32(a[1], a[3]); // 6, 7
	}
	for (int c = 0; c < 4; c++) {
		w[2 * c] = _mm256_unpacklo_epi64(u[c], u[4 + c]);
		w[2 * c + 1] = _mm256_unpackhi_epi64(u[c], u[4 + c]);
	}
	__mmask8 m = (__mmask8)((1u << mr) - 1);
	uint16_t *o = e->o + j0 * e->ldo + i0;
	for (int c = 0; c < 8 && c < nr; c++) {
		_mm_mask_storeu_epi16(o + c * e->ldo, m, _mm256_castsi256_si128(w[c]));
		if (c + 8 < nr) _mm_mask_storeu_epi16(o + (c + 8) * e->ldo, m, _mm256_extracti128_si256(w[c], 1));
	}
}

// One GB_MR x 16*NV tile over k pairs [0, k2): rows i0..i0+mr and columns j0..j0+nr
// (nr <= 16*NV) of the result. Row r's k pair kk is the 32-bit word at a + r*ar + kk*ak
// (bytes: a packed panel or, in place, a row-major A with even k; rows past mr repeat
// the last), B's pair kk the 16*NV words at pb + kk*NV*64 bytes.
#define GB_TILE(NV)                                                                                          \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void gb_tile##NV(                \
	    const uint8_t *a, int64_t ar, int64_t ak, const uint16_t *pb, int64_t k2, const gb_epi *e, int64_t i0, \
	    int mr, int64_t j0, int nr) {                                                                        \
		__m512 acc[GB_MR][NV];                                                                               \
		const uint8_t *row[GB_MR];                                                                           \
		_Pragma("GCC unroll 6") for (int r = 0; r < GB_MR; r++) {                                            \
			row[r] = a + (r < mr ? r : mr - 1) * ar;                                                         \
			_Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();            \
		}                                                                                                    \
		for (int64_t kk = 0; kk < k2; kk++) {                                                                \
			__m512bh bv[NV];                                                                                 \
			_Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] =                                     \
			    (__m512bh)_mm512_loadu_si512(pb + (kk * NV + v) * 32);                                       \
			_Pragma("GCC unroll 6") for (int r = 0; r < GB_MR; r++) {                                        \
				int32_t w;                                                                                   \
				memcpy(&w, row[r] + kk * ak, 4);                                                             \
				__m512bh av = (__m512bh)_mm512_set1_epi32(w);                                                \
				_Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[r][v] =                             \
				    _mm512_dpbf16_ps(acc[r][v], av, bv[v]);                                                  \
			}                                                                                                \
		}                                                                                                    \
		if (e->trans && e->o && (!e->s || e->lds == 0)) {                                                   \
			_Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                           \
				int left = nr - 16 * v;                                                                      \
				if (left <= 0) break;                                                                        \
				__m512 col[GB_MR];                                                                           \
				_Pragma("GCC unroll 6") for (int r = 0; r < GB_MR; r++) col[r] = acc[r][v];                  \
				gb_store_trans16(e, i0, mr, j0 + 16 * v, left < 16 ? left : 16, col);                        \
			}                                                                                                \
			return;                                                                                          \
		}                                                                                                    \
		if (e->trans) {                                                                                      \
			float t[GB_MR * GB_NR];                                                                          \
			_Pragma("GCC unroll 6") for (int r = 0; r < GB_MR; r++) _Pragma("GCC unroll 4") for (int v = 0; \
			                                                                                     v < NV;    \
			                                                                                     v++)       \
			    _mm512_storeu_ps(t + r * GB_NR + 16 * v, acc[r][v]);                                         \
			gb_store_trans(e, i0, mr, j0, nr, t);                                                            \
			return;                                                                                          \
		}                                                                                                    \
		for (int r = 0; r < mr; r++)                                                                         \
			_Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                           \
				int left = nr - 16 * v;                                                                      \
				if (left <= 0) break;                                                                        \
				__mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);               \
				gb_store(e, i0 + r, j0 + 16 * v, acc[r][v], m);                                              \
			}                                                                                                \
	}
GB_TILE(1)
GB_TILE(2)
GB_TILE(3)
GB_TILE(4)

// Computes the tiles of A panels [p0, p1) x B panels [q0, q1) over k pairs [kk0, kk1) of
// the m x k and k x n operands: A packed at pa (lda 0) or read in place, row-major with
// row stride lda (even k); B packed at pb. Rows run in blocks whose A panels (about
// 192 KB) stay in L2 while every B panel of the range passes them.
void hpusim_gb_tiles(const uint16_t *pa, int64_t lda, const uint16_t *pb, int64_t m, int64_t n, int64_t k,
                     int64_t p0, int64_t p1, int64_t q0, int64_t q1, int64_t kk0, int64_t kk1, const gb_epi *e) {
	int64_t k2 = (k + 1) / 2, kb = kk1 - kk0;
	if (kb <= 0) return;
	int64_t block = (192 * 1024) / (kb * GB_MR * 4);
	if (block < 1) block = 1;
	int64_t ar = lda ? lda * 2 : 4, ak = lda ? 4 : GB_MR * 4;
	for (int64_t b0 = p0; b0 < p1; b0 += block) {
		int64_t b1 = gb_min(b0 + block, p1);
		for (int64_t q = q0; q < q1; q++) {
			int64_t w = gb_panel_width(n, q);
			const uint16_t *b = pb + q * k2 * GB_NR * 2 + kk0 * w * 2;
			int nr = (int)gb_min(GB_NR, n - q * GB_NR);
			for (int64_t p = b0; p < b1; p++) {
				const uint8_t *a = lda ? (const uint8_t *)(pa + p * GB_MR * lda + 2 * kk0)
				                       : (const uint8_t *)(pa + (p * k2 + kk0) * GB_MR * 2);
				int mr = (int)gb_min(GB_MR, m - p * GB_MR);
				switch (w / 16) {
				case 4: gb_tile4(a, ar, ak, b, kb, e, p * GB_MR, mr, q * GB_NR, nr); break;
				case 3: gb_tile3(a, ar, ak, b, kb, e, p * GB_MR, mr, q * GB_NR, nr); break;
				case 2: gb_tile2(a, ar, ak, b, kb, e, p * GB_MR, mr, q * GB_NR, nr); break;
				default: gb_tile1(a, ar, ak, b, kb, e, p * GB_MR, mr, q * GB_NR, nr); break;
				}
			}
		}
	}
}
#endif
