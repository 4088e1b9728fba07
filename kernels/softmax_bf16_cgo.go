//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include <stdint.h>
#include "isa.h"
#include "bf16_rows.h"

// softmax (log: log_softmax) over rows of n bfloat16 values (row strides xs, ys in
// elements) in one pass each: float32 max, exps and their sum in 16 lanes, one rounding
// per result. A row holding NaN or +inf gives NaN throughout (its exps sum to NaN), as does
// a row of -inf only: torch's results.
HPUSIM_CLONES_512_2
static void hpusim_softmax_bf16(const uint16_t *x, int64_t xs, uint16_t *y, int64_t ys, int64_t rows, int64_t n,
                                int islog, float *buf) {
	const int64_t nv = n / 16 * 16;
	for (int64_t j = 0; j < rows; j++) {
		const uint16_t *xr = x + j * xs;
		uint16_t *yr = y + j * ys;
		bf16r_v16f mv = (bf16r_v16f){0} - INFINITY;
		for (int64_t i = 0; i < nv; i += 16) {
			bf16r_v16f v = bf16r_load16(xr + i);
			mv = bf16r_sel(v > mv, v, mv);
		}
		float mx = mv[0];
		for (int l = 1; l < 16; l++) mx = mv[l] > mx ? mv[l] : mx;
		for (int64_t i = nv; i < n; i++) {
			float v = bf16r_load(xr[i]);
			mx = v > mx ? v : mx;
		}
		bf16r_v16f sv = {0};
		for (int64_t i = 0; i < nv; i += 16) {
			bf16r_v16f e = bf16r_exp16(bf16r_load16(xr + i) - mx);
			memcpy(buf + i, &e, sizeof e);
			sv += e;
		}
		float s = 0;
		for (int64_t i = nv; i < n; i++) {
			float e = bf16r_exp(bf16r_load(xr[i]) - mx);
			buf[i] = e;
			s += e;
		}
		for (int l = 0; l < 16; l++) s += sv[l];
		if (islog) {
			// log of the sum from a float64 sum: near 1 (one dominant score) a float32 sum
			// would keep few bits of sum-1, the log's whole value; x - max is exact
			double d[8] = {0};
			int64_t i = 0;
			for (; i + 8 <= n; i += 8)
				for (int l = 0; l < 8; l++) d[l] += buf[i + l];
			for (; i < n; i++) d[0] += buf[i];
			double sd = ((d[0] + d[4]) + (d[2] + d[6])) + ((d[1] + d[5]) + (d[3] + d[7]));
			float ls = (float)log1p(sd - 1.0);
			for (i = 0; i < nv; i += 16) bf16r_store16(yr + i, (bf16r_load16(xr + i) - mx) - ls);
			for (; i < n; i++) yr[i] = bf16r_store((bf16r_load(xr[i]) - mx) - ls);
		} else {
			float inv = 1.0f / s;
			int64_t i = 0;
			for (; i < nv; i += 16) {
				bf16r_v16f e;
				memcpy(&e, buf + i, sizeof e);
				bf16r_store16(yr + i, e * inv);
			}
			for (; i < n; i++) yr[i] = bf16r_store(buf[i] * inv);
		}
	}
}

// the gradient of softmax (log: log_softmax) over rows of n bfloat16 values: grad_input =
// (g - sum(g*y)) * y, or g - exp(y) * sum(g), in float32, rounded once. o may be g or y.
HPUSIM_CLONES_512_2
static void hpusim_softmax_bwd_bf16(const uint16_t *g, int64_t gs, const uint16_t *y, int64_t ys, uint16_t *o,
                                    int64_t os, int64_t rows, int64_t n, int islog) {
	const int64_t nv = n / 16 * 16;
	for (int64_t j = 0; j < rows; j++) {
		const uint16_t *gr = g + j * gs, *yr = y + j * ys;
		uint16_t *orow = o + j * os;
		bf16r_v16f sv = {0};
		float t = 0;
		if (islog) {
			for (int64_t i = 0; i < nv; i += 16) sv += bf16r_load16(gr + i);
			for (int64_t i = nv; i < n; i++) t += bf16r_load(gr[i]);
		} else {
			for (int64_t i = 0; i < nv; i += 16) sv += bf16r_load16(gr + i) * bf16r_load16(yr + i);
			for (int64_t i = nv; i < n; i++) t += bf16r_load(gr[i]) * bf16r_load(yr[i]);
		}
		for (int l = 0; l < 16; l++) t += sv[l];
		int64_t i = 0;
		if (islog) {
			for (; i < nv; i += 16)
				bf16r_store16(orow + i, bf16r_load16(gr + i) - bf16r_exp16(bf16r_load16(yr + i)) * t);
			for (; i < n; i++) orow[i] = bf16r_store(bf16r_load(gr[i]) - bf16r_exp(bf16r_load(yr[i])) * t);
		} else {
			for (; i < nv; i += 16) bf16r_store16(orow + i, (bf16r_load16(gr + i) - t) * bf16r_load16(yr + i));
			for (; i < n; i++) orow[i] = bf16r_store((bf16r_load(gr[i]) - t) * bf16r_load(yr[i]));
		}
	}
}
*/
import "C"

import "unsafe"

const haveBF16Rows = true

// softmaxBF16C runs hpusim_softmax_bf16 over rows; buf holds n floats.
func softmaxBF16C(x unsafe.Pointer, xs int64, y unsafe.Pointer, ys int64, rows, n int64, log bool, buf []float32) {
	l := C.int(0)
	if log {
		l = 1
	}
	C.hpusim_softmax_bf16((*C.uint16_t)(x), C.int64_t(xs), (*C.uint16_t)(y), C.int64_t(ys), C.int64_t(rows), C.int64_t(n),
		l, (*C.float)(unsafe.Pointer(unsafe.SliceData(buf))))
}

// softmaxBwdBF16C runs hpusim_softmax_bwd_bf16 over rows.
func softmaxBwdBF16C(g unsafe.Pointer, gs int64, y unsafe.Pointer, ys int64, o unsafe.Pointer, os int64, rows, n int64,
	log bool) {
	l := C.int(0)
	if log {
		l = 1
	}
	C.hpusim_softmax_bwd_bf16((*C.uint16_t)(g), C.int64_t(gs), (*C.uint16_t)(y), C.int64_t(ys), (*C.uint16_t)(o),
		C.int64_t(os), C.int64_t(rows), C.int64_t(n), l)
}
