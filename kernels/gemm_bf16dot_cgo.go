//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include "isa.h"
#include <string.h>
#include <immintrin.h>

#include "gemm_bf16_pack.h"

// bfloat16 GEMM on CPUs with AVX512-BF16: VDPBF16PS multiplies pairs of bf16 values
// exactly and adds them into float32 accumulators, so neither operand is widened in
// memory. Operands are packed into k-pair interleaved panels:
//   A: row panels of MR rows, [ceil(k/2)][MR][2]; B: column panels of NR columns,
//   [ceil(k/2)][NR][2]; zero padding past m, n and k.
// The micro-kernel keeps an MR x NR float32 tile in 16 registers and, per k pair, loads
// the B panel's two vectors and broadcasts each row's pair of A.

enum { MR = 8, NR = 32, KC2 = 128 }; // KC2 k pairs per cache block (16 KB of a B panel)

int hpusim_bf16dot_supported(void) {
	__builtin_cpu_init();
	return hpusim_isa_cap() >= HPUSIM_ISA_LEVEL_AVX512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512bf16");
}

// pack_pairs' adjacent-lines case for NR-wide panels: each pair of source rows is
// interleaved 32 values at a time by two 16-bit permutes (masked loads for the last,
// partial panel leave its padding zero), instead of one element at a time.
__attribute__((target("avx512f,avx512bw,avx512vl")))
static void pack_rows_nr(uint16_t *dst, const uint16_t *src, int64_t ks, int64_t lines, int64_t k) {
	const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
	                                    37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
	const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
	int64_t k2 = (k + 1) / 2, panels = (lines + NR - 1) / NR;
	for (int64_t p = 0; p < panels; p++) {
		int64_t l0 = p * NR, wn = lines - l0 < NR ? lines - l0 : NR;
		__mmask32 m = wn == NR ? (__mmask32)0xffffffffu : (__mmask32)((1u << wn) - 1);
		for (int64_t kk = 0; kk < k2; kk++) {
			uint16_t *e = dst + (p * k2 + kk) * NR * 2;
			const uint16_t *r0 = src + l0 + 2 * kk * ks;
			__m512i v0 = _mm512_maskz_loadu_epi16(m, r0);
			__m512i v1 = 2 * kk + 1 < k ? _mm512_maskz_loadu_epi16(m, r0 + ks) : _mm512_setzero_si512();
			_mm512_storeu_si512(e, _mm512_permutex2var_epi16(v0, lo, v1));
			_mm512_storeu_si512(e + 32, _mm512_permutex2var_epi16(v0, hi, v1));
		}
	}
}

// pack_pairs' case of pairs adjacent in memory (ks 1: convolution's column matrix as
// the weight gradient's B) for NR-wide panels: 16 x 16 blocks of pairs transposed in
// registers (gemm_bf16_pack.h), the pairs past the last whole block one at a time.
__attribute__((target("avx512f")))
static void pack_adjacent_nr(uint16_t *dst, const uint16_t *src, int64_t ls, int64_t lines, int64_t k) {
	int64_t k2 = (k + 1) / 2, full = k / 2, full16 = full / 16 * 16, panels = (lines + NR - 1) / NR;
	for (int64_t p = 0; p < panels; p++) {
		int64_t l0 = p * NR, wn = lines - l0 < NR ? lines - l0 : NR;
		uint32_t *d = (uint32_t *)(dst + p * k2 * NR * 2);
		gbp_pack_adjacent_pairs(d, src, ls, l0, NR, wn, full16);
		for (int64_t x = 0; x < NR; x++) {
			const uint16_t *line = src + (l0 + x) * ls;
			for (int64_t kk = full16; kk < k2; kk++) {
				uint32_t v = 0;
				if (x < wn) v = (uint32_t)line[2 * kk] | (2 * kk + 1 < k ? (uint32_t)line[2 * kk + 1] << 16 : 0);
				d[kk * NR + x] = v;
			}
		}
	}
}

// Packs lines [0, lines) (line l's k-th element at src[l*ls + k*ks]) into panels of
// width lines, [ceil(k/2)][width][2] each, zero past the last line and past k.
static void pack_pairs(uint16_t *dst, const uint16_t *src, int64_t ls, int64_t ks, int64_t lines, int64_t k, int width) {
	int64_t k2 = (k + 1) / 2, panels = (lines + width - 1) / width;
	if (ks == 1 && ls != 1 && width == NR) {
		pack_adjacent_nr(dst, src, ls, lines, k);
		return;
	}
	if (ls == 1 && ks != 1 && width == NR) {
		pack_rows_nr(dst, src, ks, lines, k);
		return;
	}
	if (ls == 1 && ks != 1) {
		// Adjacent lines (a row-major B, an im2col matrix): each pair interleaves two
		// contiguous source rows, read and written in order.
		for (int64_t p = 0; p < panels; p++) {
			int64_t l0 = p * width;
			int wn = lines - l0 < width ? (int)(lines - l0) : width;
			for (int64_t kk = 0; kk < k2; kk++) {
				uint16_t *e = dst + (p * k2 + kk) * width * 2;
				const uint16_t *r0 = src + l0 + 2 * kk * ks, *r1 = r0 + ks;
				if (2 * kk + 1 < k)
					for (int w = 0; w < wn; w++) { e[2 * w] = r0[w]; e[2 * w + 1] = r1[w]; }
				else
					for (int w = 0; w < wn; w++) { e[2 * w] = r0[w]; e[2 * w + 1] = 0; }
				for (int w = wn; w < width; w++) e[2 * w] = e[2 * w + 1] = 0;
			}
		}
		return;
	}
	for (int64_t p = 0; p < panels; p++) {
		uint16_t *d = dst + p * k2 * width * 2;
		for (int w = 0; w < width; w++) {
			int64_t l = p * width + w;
			uint16_t *e = d + w * 2; // pair kk of this line is at e[kk*width*2]
			if (l >= lines) {
				for (int64_t kk = 0; kk < k2; kk++) e[kk * width * 2] = e[kk * width * 2 + 1] = 0;
				continue;
			}
			const uint16_t *line = src + l * ls;
			int64_t kk = 0;
			if (ks == 1) // pairs are adjacent: one 32-bit move each
				for (; 2 * kk + 1 < k; kk++) memcpy(&e[kk * width * 2], &line[2 * kk], 4);
			for (; kk < k2; kk++) {
				e[kk * width * 2] = line[2 * kk * ks];
				e[kk * width * 2 + 1] = 2 * kk + 1 < k ? line[(2 * kk + 1) * ks] : 0;
			}
		}
	}
}

// Packs rows [0, m) of A (element (i, k) at a[i*rs + k*cs]) into ceil(m/MR) panels.
void hpusim_bf16dot_pack_a(uint16_t *dst, const uint16_t *a, int64_t rs, int64_t cs, int64_t m, int64_t k) {
	pack_pairs(dst, a, rs, cs, m, k, MR);
}

// Packs columns [n0, n1) of B (element (k, j) at b[k*rs + j*cs]) into panels.
void hpusim_bf16dot_pack_b(uint16_t *dst, const uint16_t *b, int64_t rs, int64_t cs, int64_t k, int64_t n0, int64_t n1) {
	pack_pairs(dst, b + n0 * cs, cs, rs, n1 - n0, k, NR);
}

// One MR x NR tile over k pairs [0, k2) of panels pa and pb: c[r*ldc + j] (r < mr, j < nr)
// is set to (add == 0) or incremented by the tile's sums.
__attribute__((target("avx512f,avx512bw,avx512bf16")))
static void tile(const uint16_t *pa, const uint16_t *pb, int64_t k2, float *c, int64_t ldc, int mr, int nr, int add) {
	__m512 acc[MR][2];
#pragma GCC unroll 8
	for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
	const int32_t *ap = (const int32_t *)pa;
	for (int64_t kk = 0; kk < k2; kk++) {
		__m512bh b0 = (__m512bh)_mm512_loadu_si512(pb + kk * NR * 2);
		__m512bh b1 = (__m512bh)_mm512_loadu_si512(pb + kk * NR * 2 + 32);
#pragma GCC unroll 8
		for (int r = 0; r < MR; r++) {
			__m512bh av = (__m512bh)_mm512_set1_epi32(ap[kk * MR + r]);
			acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
			acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
		}
	}
	__mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
	__mmask16 m1 = nr >= 32 ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
#pragma GCC unroll 8
	for (int r = 0; r < MR; r++) {
		if (r >= mr) break;
		float *cr = c + r * ldc;
		__m512 v0 = acc[r][0], v1 = acc[r][1];
		if (add) {
			v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cr));
			v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cr + 16));
		}
		_mm512_mask_storeu_ps(cr, m0, v0);
		_mm512_mask_storeu_ps(cr + 16, m1, v1);
	}
}

// c[i*ldc + j] = sum_k A[i, k] B[k, j] for i < m, j < n (add: c += that sum), from A's
// panels (all of its rows) and the panels of B's n columns. The k pairs are taken in
// blocks of KC2, each added in k order into c, so each element's sum runs in the same
// order whatever m and n are.
void hpusim_bf16dot_gemm(const uint16_t *pa, const uint16_t *pb, int64_t m, int64_t n, int64_t k, float *c, int64_t ldc,
                         int add) {
	int64_t k2 = (k + 1) / 2, mp = (m + MR - 1) / MR, np = (n + NR - 1) / NR;
	if (k2 == 0) {
		if (!add)
			for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, n * sizeof(float));
		return;
	}
	for (int64_t k0 = 0; k0 < k2; k0 += KC2) {
		int64_t kb = k2 - k0 < KC2 ? k2 - k0 : KC2;
		for (int64_t q = 0; q < np; q++) {
			const uint16_t *b = pb + (q * k2 + k0) * NR * 2;
			int nr = n - q * NR < NR ? (int)(n - q * NR) : NR;
			for (int64_t p = 0; p < mp; p++) {
				int mr = m - p * MR < MR ? (int)(m - p * MR) : MR;
				tile(pa + (p * k2 + k0) * MR * 2, b, kb, c + p * MR * ldc + q * NR, ldc, mr, nr, add || k0 > 0);
			}
		}
	}
}
*/
import "C"

import "unsafe"

// bf16DotMR and bf16DotNR are the C micro-kernel's tile (panel heights of A and widths of B).
const (
	bf16DotMR = 8
	bf16DotNR = 32
)

// bf16DotCPU reports whether this CPU runs VDPBF16PS (AVX512-BF16: Zen 4, Cooper Lake,
// Sapphire Rapids and later).
var bf16DotCPU = C.hpusim_bf16dot_supported() != 0

// bf16DotPackA packs the m×k bfloat16 matrix at a (element strides rs, cs) into dst.
func bf16DotPackA(dst []uint16, a unsafe.Pointer, rs, cs int64, m, k int) {
	C.hpusim_bf16dot_pack_a((*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(dst))), (*C.uint16_t)(a),
		C.int64_t(rs), C.int64_t(cs), C.int64_t(m), C.int64_t(k))
}

// bf16DotPackB packs columns [n0, n1) of the k×n bfloat16 matrix at b into dst.
func bf16DotPackB(dst []uint16, b unsafe.Pointer, rs, cs int64, k, n0, n1 int) {
	C.hpusim_bf16dot_pack_b((*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(dst))), (*C.uint16_t)(b),
		C.int64_t(rs), C.int64_t(cs), C.int64_t(k), C.int64_t(n0), C.int64_t(n1))
}

// bf16DotGemm sets the m×n float32 block at c (row stride ldc) to the product of the
// packed panels, or adds the product to it (add).
func bf16DotGemm(pa, pb []uint16, m, n, k int, c unsafe.Pointer, ldc int, add bool) {
	a := C.int(0)
	if add {
		a = 1
	}
	C.hpusim_bf16dot_gemm((*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(pa))), (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(pb))),
		C.int64_t(m), C.int64_t(n), C.int64_t(k), (*C.float)(c), C.int64_t(ldc), a)
}
