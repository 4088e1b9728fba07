//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include "isa.h"
#include <string.h>

// cascadeSum (reduce_sum_fast.go) for contiguous series (ks == 1): nrows columns, term i
// of column k at p[i*is + k], with the same cascade of 4 accumulator levels. Elementwise
// over the columns, so the compiler vectorizes it without reordering any column's adds
// (no fast-math; only adds, nothing to contract). acc holds 4*nrows; the sums are left in acc[0:nrows].
#define CASCADE(NAME, T)                                                                  \
static inline void NAME(const T *p, int64_t is, int64_t size, int64_t nrows, int64_t power, T *acc) { \
	memset(acc, 0, sizeof(T) * 4 * nrows);                                                \
	int64_t step = (int64_t)1 << power, mask = step - 1, i = 0;                          \
	T *a0 = acc;                                                                          \
	while (i + step <= size) {                                                            \
		for (int64_t j = 0; j < step; j++, i++) {                                         \
			const T *r = p + i * is;                                                      \
			for (int64_t k = 0; k < nrows; k++) a0[k] += r[k];                            \
		}                                                                                 \
		for (int64_t j = 1; j < 4; j++) {                                                 \
			T *lo = acc + (j - 1) * nrows, *hi = acc + j * nrows;                         \
			for (int64_t k = 0; k < nrows; k++) { hi[k] += lo[k]; lo[k] = 0; }            \
			if (i & (mask << (j * power))) break;                                         \
		}                                                                                 \
	}                                                                                     \
	for (; i < size; i++) {                                                               \
		const T *r = p + i * is;                                                          \
		for (int64_t k = 0; k < nrows; k++) a0[k] += r[k];                                \
	}                                                                                     \
	for (int64_t j = 1; j < 4; j++) {                                                     \
		const T *hi = acc + j * nrows;                                                    \
		for (int64_t k = 0; k < nrows; k++) a0[k] += hi[k];                               \
	}                                                                                     \
}

// The contiguous inner reduction of loop2dFast for rows rows of size0 elements, row j at
// base + j*rs, L lanes: out[j] is the row's sum.
#define INNER(NAME, CASC, T)                                                              \
static inline void NAME(const T *base, int64_t rs, int64_t rows, int64_t size0, int64_t L, \
                        int64_t power, T *acc, T *out) {                                  \
	int64_t nser = 4 * L, vecSize = size0 / L, sizeIlp = vecSize / 4;                    \
	for (int64_t j = 0; j < rows; j++) {                                                  \
		const T *x = base + j * rs;                                                       \
		T final = 0;                                                                      \
		for (int64_t k = vecSize * L; k < size0; k++) final += x[k];                     \
		CASC(x, nser, sizeIlp, nser, power, acc);                                         \
		for (int64_t l = 0; l < L; l++) {                                                 \
			T r = acc[l];                                                                 \
			for (int64_t v = sizeIlp * 4; v < vecSize; v++) r += x[v * L + l];           \
			final += r + acc[L + l] + acc[2 * L + l] + acc[3 * L + l];                    \
		}                                                                                 \
		out[j] = final;                                                                   \
	}                                                                                     \
}

// CASCADE_BLK is CASCADE for W columns (p[i*is + k], k < W) with the accumulators in
// local arrays of constant size: each column's adds are CASCADE's, in CASCADE's order,
// but the compiler keeps the W lane sums in registers across the rows instead of
// loading and storing acc every row (which bound CASCADE by store forwarding). LOAD
// widens a stored element (S) to the accumulation type T exactly. The sums go to out.
#define CASCADE_BLK(NAME, T, S, LOAD, W)                                                  \
static inline __attribute__((always_inline)) void NAME(const S *p, int64_t is, int64_t size, int64_t power, T *out) {   \
	T a0[W], a1[W], a2[W], a3[W];                                                         \
	for (int k = 0; k < W; k++) a0[k] = a1[k] = a2[k] = a3[k] = 0;                       \
	int64_t step = (int64_t)1 << power, mask = step - 1, i = 0;                          \
	while (i + step <= size) {                                                            \
		for (int64_t j = 0; j < step; j++, i++) {                                         \
			const S *r = p + i * is;                                                      \
			for (int k = 0; k < W; k++) a0[k] += LOAD(r[k]);                              \
		}                                                                                 \
		for (int k = 0; k < W; k++) { a1[k] += a0[k]; a0[k] = 0; }                       \
		if (i & (mask << power)) continue;                                                \
		for (int k = 0; k < W; k++) { a2[k] += a1[k]; a1[k] = 0; }                       \
		if (i & (mask << (2 * power))) continue;                                          \
		for (int k = 0; k < W; k++) { a3[k] += a2[k]; a2[k] = 0; }                       \
	}                                                                                     \
	for (; i < size; i++) {                                                               \
		const S *r = p + i * is;                                                          \
		for (int k = 0; k < W; k++) a0[k] += LOAD(r[k]);                                  \
	}                                                                                     \
	for (int k = 0; k < W; k++) out[k] = ((a0[k] + a1[k]) + a2[k]) + a3[k];              \
}

#define LOAD_SAME(x) (x)
static inline float bf16_widen(uint16_t x) {
	uint32_t u = (uint32_t)x << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
#define LOAD_BF16(x) bf16_widen(x)

CASCADE(cascade_f32_any, float)
CASCADE(cascade_f64_any, double)
CASCADE_BLK(cascade_f32_64, float, float, LOAD_SAME, 64)
CASCADE_BLK(cascade_f32_32, float, float, LOAD_SAME, 32)
CASCADE_BLK(cascade_f64_32, double, double, LOAD_SAME, 32)
CASCADE_BLK(cascade_f64_16, double, double, LOAD_SAME, 16)
CASCADE_BLK(cascade_bf16_64, float, uint16_t, LOAD_BF16, 64)
CASCADE_BLK(cascade_bf16_32, float, uint16_t, LOAD_BF16, 32)

// The cascade of nrows columns in blocks of B1 then B2 columns where nrows allows, the
// rest (and short series, where blocking gains nothing) by CASCADE. Sums in acc[0:nrows].
#define CASCADE_SPLIT(NAME, T, ANY, BLK1, B1, BLK2, B2)                                   \
static inline __attribute__((always_inline)) void NAME(const T *p, int64_t is, int64_t size, int64_t nrows, int64_t power, T *acc) { \
	if (size < 16 || nrows % B2 != 0) {                                                   \
		ANY(p, is, size, nrows, power, acc);                                              \
		return;                                                                           \
	}                                                                                     \
	int64_t k = 0;                                                                        \
	for (; k + B1 <= nrows; k += B1) BLK1(p + k, is, size, power, acc + k);               \
	for (; k < nrows; k += B2) BLK2(p + k, is, size, power, acc + k);                     \
}
CASCADE_SPLIT(cascade_f32, float, cascade_f32_any, cascade_f32_64, 64, cascade_f32_32, 32)
CASCADE_SPLIT(cascade_f64, double, cascade_f64_any, cascade_f64_32, 32, cascade_f64_16, 16)
INNER(inner_f32, cascade_f32, float)
INNER(inner_f64, cascade_f64, double)

HPUSIM_CLONES_512_2
static void hpusim_cascade_f32(const float *p, int64_t is, int64_t size, int64_t nrows, int64_t power, float *acc) {
	cascade_f32(p, is, size, nrows, power, acc);
}
HPUSIM_CLONES_512_2
static void hpusim_cascade_f64(const double *p, int64_t is, int64_t size, int64_t nrows, int64_t power, double *acc) {
	cascade_f64(p, is, size, nrows, power, acc);
}
// Column sums of bfloat16 data in float32: nrows (a multiple of 32) columns, term i of
// column k at p[i*is + k], each widened exactly and summed in CASCADE's order, so the
// sums equal the float32 cascade over a widened copy. Sums in out[0:nrows].
HPUSIM_CLONES_512_2
static void hpusim_cascade_bf16(const uint16_t *p, int64_t is, int64_t size, int64_t nrows, int64_t power, float *out) {
	int64_t k = 0;
	for (; k + 64 <= nrows; k += 64) cascade_bf16_64(p + k, is, size, power, out + k);
	for (; k + 32 <= nrows; k += 32) cascade_bf16_32(p + k, is, size, power, out + k);
}
HPUSIM_CLONES_512_2
static void hpusim_inner_f32(const float *base, int64_t rs, int64_t rows, int64_t size0, int64_t L, int64_t power,
                             float *acc, float *out) {
	inner_f32(base, rs, rows, size0, L, power, acc, out);
}
HPUSIM_CLONES_512_2
static void hpusim_inner_f64(const double *base, int64_t rs, int64_t rows, int64_t size0, int64_t L, int64_t power,
                             double *acc, double *out) {
	inner_f64(base, rs, rows, size0, L, power, acc, out);
}
*/
import "C"

import "unsafe"

// cgoCascadeMin is the number of terms from which the C cascade beats the Go loop.
const cgoCascadeMin = 256

// cascadeC runs cascadeSum's contiguous case in C.
func cascadeC[A sumFloat](p unsafe.Pointer, is, size, nrows, power int64, acc []A) {
	if unsafe.Sizeof(acc[0]) == 4 {
		C.hpusim_cascade_f32((*C.float)(p), C.int64_t(is), C.int64_t(size), C.int64_t(nrows), C.int64_t(power),
			(*C.float)(unsafe.Pointer(unsafe.SliceData(acc))))
		return
	}
	C.hpusim_cascade_f64((*C.double)(p), C.int64_t(is), C.int64_t(size), C.int64_t(nrows), C.int64_t(power),
		(*C.double)(unsafe.Pointer(unsafe.SliceData(acc))))
}

// innerC is loop2dFast's contiguous inner reduction of rows rows (row stride rs) in C.
func innerC[A sumFloat](base unsafe.Pointer, rs, rows, size0, L, power int64, acc, out []A) {
	if unsafe.Sizeof(acc[0]) == 4 {
		C.hpusim_inner_f32((*C.float)(base), C.int64_t(rs), C.int64_t(rows), C.int64_t(size0), C.int64_t(L),
			C.int64_t(power), (*C.float)(unsafe.Pointer(unsafe.SliceData(acc))), (*C.float)(unsafe.Pointer(unsafe.SliceData(out))))
		return
	}
	C.hpusim_inner_f64((*C.double)(base), C.int64_t(rs), C.int64_t(rows), C.int64_t(size0), C.int64_t(L),
		C.int64_t(power), (*C.double)(unsafe.Pointer(unsafe.SliceData(acc))), (*C.double)(unsafe.Pointer(unsafe.SliceData(out))))
}

// cascadeBF16C sums nrows (a multiple of 32) bfloat16 columns in float32 (see
// hpusim_cascade_bf16) into out[:nrows].
func cascadeBF16C(p unsafe.Pointer, is, size, nrows, power int64, out []float32) {
	C.hpusim_cascade_bf16((*C.uint16_t)(p), C.int64_t(is), C.int64_t(size), C.int64_t(nrows), C.int64_t(power),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(out))))
}
