//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include <stdint.h>
#include "isa.h"
#include <string.h>
#include <math.h>

// Every floating-point operation below must round exactly like its Go counterpart
// (expFloat32, vecSum, softmaxRowF32): no contraction into fused multiply-adds. Comparisons
// may not trap (no FP exceptions are observed), so selects become vector blends.
#pragma GCC optimize("fp-contract=off", "no-trapping-math")

#include "expf32.h"
#include "vec16.h"

// RoundBF16 in half.go: the nearest bfloat16 (ties to even) as a float; NaN is the caller's.
static inline float round_bf16(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}

#include "softmax_avx2.h"

// softmaxBwdRowF32 over the last dim for rows rows of n floats (row strides gs, ys, os);
// seq: the sums run sequentially (SoftmaxBackward's generic bfloat16 rows) instead of in
// reduce_all order. o may alias g or y.
HPUSIM_CLONES_512_2
static void hpusim_softmax_bwd_f32(const float *g, int64_t gs, const float *y, int64_t ys, float *o, int64_t os,
                                   int64_t rows, int64_t n, int islog, int seq) {
#if defined(__x86_64__)
	if (HPUSIM_AVX2()) {
		smx_softmax_bwd_f32(g, gs, y, ys, o, os, rows, n, islog, seq);
		return;
	}
#endif
	for (int64_t j = 0; j < rows; j++) {
		const float *gr = g + j * gs, *yr = y + j * ys;
		float *orow = o + j * os;
		if (islog) {
			float s;
			if (seq) {
				s = 0;
				for (int64_t i = 0; i < n; i++) s += gr[i];
			} else {
				s = vecsum16(gr, n);
			}
			for (int64_t i = 0; i < n; i++) orow[i] = gr[i] - hp_expf32(yr[i]) * s;
		} else {
			float s;
			if (seq) {
				s = 0;
				for (int64_t i = 0; i < n; i++) s += gr[i] * yr[i];
			} else {
				s = vecdot16(gr, yr, n);
			}
			for (int64_t i = 0; i < n; i++) orow[i] = (gr[i] - s) * yr[i];
		}
	}
}

// softmaxRowF32 of rows rows of n floats (x row stride xs, y row stride ys); bad[j] = 1
// marks a row whose sum of exps is NaN (the caller redoes it). bf16: softmaxRow32's
// bfloat16 last-dim rows instead (sequential sum of exps, log's sum and its log rounded
// to bfloat16).
HPUSIM_CLONES_512_2
static void hpusim_softmax_f32(const float *x, int64_t xs, float *y, int64_t ys, int64_t rows, int64_t n,
                               int islog, int lastdim, uint8_t *bad, int bf16) {
#if defined(__x86_64__)
	if (HPUSIM_AVX2()) {
		smx_softmax_f32(x, xs, y, ys, rows, n, islog, lastdim, bad, bf16);
		return;
	}
#endif
	for (int64_t j = 0; j < rows; j++) {
		const float *xr = x + j * xs;
		float *yr = y + j * ys;
		float m[16];
		for (int l = 0; l < 16; l++) m[l] = -INFINITY;
		int64_t i = 0;
		for (; i + 16 <= n; i += 16)
			for (int l = 0; l < 16; l++) m[l] = xr[i + l] > m[l] ? xr[i + l] : m[l];
		float mx = -INFINITY;
		for (int l = 0; l < 16; l++) mx = m[l] > mx ? m[l] : mx;
		for (; i < n; i++) mx = xr[i] > mx ? xr[i] : mx;
		for (i = 0; i < n; i++) yr[i] = hp_expf32(xr[i] - mx);
		float s;
		if (lastdim && !bf16) {
			s = vecsum16(yr, n);
		} else {
			s = 0;
			for (i = 0; i < n; i++) s += yr[i];
		}
		bad[j] = s != s;
		if (s != s) continue;
		if (islog && bf16) {
			float ls = round_bf16((float)log((double)round_bf16(s)));
			for (i = 0; i < n; i++) yr[i] = (xr[i] - mx) - ls;
		} else if (islog) {
			float ls = (float)log((double)s);
			for (i = 0; i < n; i++) yr[i] = (xr[i] - mx) - ls;
		} else if (lastdim) {
			float inv = 1 / s;
			for (i = 0; i < n; i++) yr[i] = yr[i] * inv;
		} else {
			for (i = 0; i < n; i++) yr[i] = yr[i] / s;
		}
	}
}
*/
import "C"

import "unsafe"

// softmaxRowsC runs softmaxRowF32 over rows in C; bad[j] marks rows to redo.
// bf16 selects softmaxRow32's bfloat16 last-dim arithmetic (lastDim must be set).
func softmaxRowsC(x unsafe.Pointer, xs int64, y unsafe.Pointer, ys int64, rows, n int64, log, lastDim bool, bad []uint8,
	bf16 bool) bool {
	b2i := func(b bool) C.int {
		if b {
			return 1
		}
		return 0
	}
	C.hpusim_softmax_f32((*C.float)(x), C.int64_t(xs), (*C.float)(y), C.int64_t(ys), C.int64_t(rows), C.int64_t(n),
		b2i(log), b2i(lastDim), (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(bad))), b2i(bf16))
	return true
}

// softmaxBwdRowsC runs softmaxBwdRowF32 (last dim) over rows in C; seq: with sequential
// sums (SoftmaxBackward's generic reduced-precision rows).
func softmaxBwdRowsC(g unsafe.Pointer, gs int64, y unsafe.Pointer, ys int64, o unsafe.Pointer, os int64, rows, n int64, log,
	seq bool) bool {
	l, q := C.int(0), C.int(0)
	if log {
		l = 1
	}
	if seq {
		q = 1
	}
	C.hpusim_softmax_bwd_f32((*C.float)(g), C.int64_t(gs), (*C.float)(y), C.int64_t(ys), (*C.float)(o), C.int64_t(os),
		C.int64_t(rows), C.int64_t(n), l, q)
	return true
}

// logC is the C library's log, which the C softmax rows call (tests compare it with
// math.Log over the values the bfloat16 rows take it of).
func logC(v float64) float64 { return float64(C.log(C.double(v))) }
