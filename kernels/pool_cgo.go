//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
// One plane of 2x2/2 max pooling in C so that the compiler vectorizes the window selects
// (Go does not). Same comparisons as pool2x2PlaneGo, hence the same maxima and indices.
#pragma GCC optimize ("no-trapping-math")
#include <stdint.h>

#define CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))

CLONES static void pool2x2_row(const float *r0, const float *r1, float *y, int64_t *ix, int64_t base,
                               int64_t W, int64_t OW) {
	for (int64_t ow = 0; ow < OW; ow++) {
		int64_t k = 2 * ow;
		float mv = r0[k], v;
		int64_t mi = base + k;
		int t;
		v = r0[k + 1]; t = (v > mv) | (v != v); mv = t ? v : mv; mi = t ? base + k + 1 : mi;
		v = r1[k];     t = (v > mv) | (v != v); mv = t ? v : mv; mi = t ? base + W + k : mi;
		v = r1[k + 1]; t = (v > mv) | (v != v); mv = t ? v : mv; mi = t ? base + W + k + 1 : mi;
		y[ow] = mv;
		ix[ow] = mi;
	}
}

// Planes [lo, hi) of an [N, C, H, W] tensor with dense planes; strides in elements.
static void hpusim_pool2x2_planes(const float *x, float *y, int64_t *ix, int64_t lo, int64_t hi, int64_t C,
                                  int64_t xn, int64_t xc, int64_t yn, int64_t yc, int64_t in_, int64_t ic,
                                  int64_t W, int64_t OH, int64_t OW) {
	for (int64_t pc = lo; pc < hi; pc++) {
		int64_t n = pc / C, c = pc % C;
		const float *xp = x + n * xn + c * xc;
		float *yp = y + n * yn + c * yc;
		int64_t *ip = ix + n * in_ + c * ic;
		for (int64_t oh = 0; oh < OH; oh++) {
			int64_t base = 2 * oh * W;
			pool2x2_row(xp + base, xp + base + W, yp + oh * OW, ip + oh * OW, base, W, OW);
		}
	}
}
*/
import "C"

func pool2x2Planes(in, out, idx Tensor, lo, hi int64) {
	C.hpusim_pool2x2_planes((*C.float)(in.Ptr), (*C.float)(out.Ptr), (*C.int64_t)(idx.Ptr), C.int64_t(lo), C.int64_t(hi),
		C.int64_t(in.Sizes[1]), C.int64_t(in.Strides[0]), C.int64_t(in.Strides[1]), C.int64_t(out.Strides[0]),
		C.int64_t(out.Strides[1]), C.int64_t(idx.Strides[0]), C.int64_t(idx.Strides[1]), C.int64_t(in.Sizes[3]),
		C.int64_t(out.Sizes[2]), C.int64_t(out.Sizes[3]))
}
