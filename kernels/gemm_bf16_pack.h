// Packing helper shared by the bfloat16 VDPBF16PS GEMMs (gemm_bf16dot_cgo.go and
// gemm_bf16_blocked.h): the k-pair panels are [k2][w] 32-bit words, and an operand whose
// pairs are adjacent in memory (a row-major A, F.linear's weight, convolution's column
// matrix read transposed) needs a 32-bit transpose to get there.
#ifndef HPUSIM_GEMM_BF16_PACK_H
#define HPUSIM_GEMM_BF16_PACK_H
#include <immintrin.h>
#include <stdint.h>

// Writes pairs [kk0, kk0+16) of lines [x0, x0+16) into panel d ([k2][w] words): line
// x0+x's pair kk0+j (the 32-bit word at line[x] + 4*j bytes, line[x] pointing at pair
// kk0) lands at d[(kk0+j)*w + x0 + x]. Lines x >= nl are written as zeros (not read).
// A 16 x 16 transpose in registers: 32-bit, then 64-bit interleaves within each
// 128-bit lane, then two rounds of 128-bit lane shuffles.
__attribute__((target("avx512f"))) static inline void gbp_transpose16(uint32_t *d, int64_t w, int64_t kk0,
                                                                     int64_t x0, const uint16_t *const *line,
                                                                     int nl) {
	__m512i r[16], t[16];
	for (int x = 0; x < 16; x++) r[x] = x < nl ? _mm512_loadu_si512(line[x]) : _mm512_setzero_si512();
	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
	}
	// r[4i+c]'s 128-bit lane L: lines 4i..4i+3 of pair 4L+c.
	for (int i = 0; i < 4; i++) {
		r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
	uint32_t *o = d + kk0 * w + x0;
	for (int c = 0; c < 4; c++) {
		__m512i a = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44), b = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xEE);
		__m512i e = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44), f = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xEE);
		_mm512_storeu_si512(o + c * w, _mm512_shuffle_i32x4(a, e, 0x88));
		_mm512_storeu_si512(o + (4 + c) * w, _mm512_shuffle_i32x4(a, e, 0xDD));
		_mm512_storeu_si512(o + (8 + c) * w, _mm512_shuffle_i32x4(b, f, 0x88));
		_mm512_storeu_si512(o + (12 + c) * w, _mm512_shuffle_i32x4(b, f, 0xDD));
	}
}

// Packs the pairs [0, full16) (a multiple of 16) of lines [l0, l0+w) into panel d ([k2][w]
// words, w a multiple of 16): line l's pair kk is the word at src + l*ls + 2*kk; lines at
// or past l0+wn are zero.
__attribute__((target("avx512f"))) static inline void gbp_pack_adjacent_pairs(uint32_t *d, const uint16_t *src,
                                                                             int64_t ls, int64_t l0, int64_t w,
                                                                             int64_t wn, int64_t full16) {
	const uint16_t *line[16];
	for (int64_t x0 = 0; x0 < w; x0 += 16) {
		int nl = wn - x0 >= 16 ? 16 : wn - x0 > 0 ? (int)(wn - x0) : 0;
		for (int64_t kk0 = 0; kk0 < full16; kk0 += 16) {
			for (int x = 0; x < nl; x++) line[x] = src + (l0 + x0 + x) * ls + 2 * kk0;
			gbp_transpose16(d, w, kk0, x0, line, nl);
		}
	}
}
#endif
