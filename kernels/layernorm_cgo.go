//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include <stdint.h>
#include "isa.h"
#include <string.h>
#include <math.h>

// float32 layer norm rows in C, operation for operation the Go code in layernorm.go
// (moments, layerNormFwd, layerNormBwd): no contraction, fmaF as a double multiply-add
// of float32 operands (exact product, one rounding), reductions in vecSum/vecDot order.
#pragma GCC optimize("fp-contract=off", "no-trapping-math")

#include "vec16.h"

static inline void ln_moments(const float *x, int64_t n, float *mf, float *vf) {
	double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
	int64_t i = 0;
	for (; i + 4 <= n; i += 4) { a0 += x[i]; a1 += x[i + 1]; a2 += x[i + 2]; a3 += x[i + 3]; }
	for (; i < n; i++) a0 += x[i];
	double m = ((a0 + a1) + (a2 + a3)) / (double)n;
	a0 = a1 = a2 = a3 = 0;
	for (i = 0; i + 4 <= n; i += 4) {
		double d0 = x[i] - m, d1 = x[i + 1] - m, d2 = x[i + 2] - m, d3 = x[i + 3] - m;
		a0 += d0 * d0; a1 += d1 * d1; a2 += d2 * d2; a3 += d3 * d3;
	}
	for (; i < n; i++) { double d = x[i] - m; a0 += d * d; }
	*mf = (float)m;
	*vf = (float)(((a0 + a1) + (a2 + a3)) / (double)n);
}

HPUSIM_CLONES_512_2
static void hpusim_ln_fwd_f32(const float *x, int64_t xs, float *out, int64_t os, int64_t rows, int64_t D,
                              const float *g, const float *b, float eps, float *mean, float *rstd, int reduced) {
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * xs;
		float *o = out + r * os;
		float m, v;
		ln_moments(xr, D, &m, &v);
		float rs = 1.0f / (float)sqrt((double)(v + eps));
		if (reduced) {
			// layerNormFwd's reduced-precision opmath: (x*rstd + bias)*gamma + beta
			float bias = -rs * m;
			for (int64_t j = 0; j < D; j++) {
				float t = (float)((double)xr[j] * (double)rs + (double)bias);
				o[j] = (float)((double)t * (double)g[j] + (double)b[j]);
			}
		} else {
			for (int64_t j = 0; j < D; j++) {
				float t = (xr[j] - m) * rs;
				o[j] = (float)((double)t * (double)g[j] + (double)b[j]);
			}
		}
		mean[r] = m;
		rstd[r] = rs;
	}
}

// grad_input rows; g NULL without weight; tmp holds D floats.
HPUSIM_CLONES_512_2
static void hpusim_ln_bwd_f32(const float *dy, int64_t dys, const float *x, int64_t xs, float *gin, int64_t gs,
                              int64_t rows, int64_t D, const float *g, const float *mu, const float *rs, float *tmp) {
	float scale = 1.0f / (float)D;
	for (int64_t r = 0; r < rows; r++) {
		const float *dyr = dy + r * dys, *xr = x + r * xs;
		float *o = gin + r * gs;
		float ds, db;
		if (!g) {
			ds = vecdot16(dyr, xr, D);
			db = vecsum16(dyr, D);
		} else {
			for (int64_t j = 0; j < D; j++) tmp[j] = dyr[j] * xr[j];
			ds = vecdot16(tmp, g, D);
			db = vecdot16(dyr, g, D);
		}
		float a = rs[r], m = mu[r];
		float b = (float)((double)db * (double)m + (double)(-ds));
		b = b * a;
		b = b * a;
		b = b * a;
		b = b * scale;
		float c = (float)((double)(-b) * (double)m + (double)(-((db * a) * scale)));
		if (!g) {
			for (int64_t j = 0; j < D; j++) {
				float p = a * dyr[j];
				o[j] = (float)((double)b * (double)xr[j] + (double)p) + c;
			}
		} else {
			for (int64_t j = 0; j < D; j++) {
				float p = (a * dyr[j]) * g[j];
				o[j] = (float)((double)b * (double)xr[j] + (double)p) + c;
			}
		}
	}
}

// weight and bias gradients of n columns (pointers at the block's first column) over rows.
HPUSIM_CLONES_512_2
static void hpusim_ln_bwd_cols_f32(const float *dy, int64_t dys, const float *x, int64_t xs, int64_t rows, int64_t n,
                                   const float *mu, const float *rs, float *dw, float *db) {
	for (int64_t r = 0; r < rows; r++) {
		const float *dyr = dy + r * dys, *xr = x + r * xs;
		float a = rs[r], bb = -a * mu[r];
		for (int64_t j = 0; j < n; j++) {
			float t = (float)((double)a * (double)xr[j] + (double)bb);
			dw[j] = (float)((double)dyr[j] * (double)t + (double)dw[j]);
			db[j] = db[j] + dyr[j];
		}
	}
}

// Batch norm channels (norm.go's float32 fast path): rows n of S floats at x + n*ns. Each
// statistic keeps 16 float64 partial sums in two 8-lane vectors (lane l takes the
// elements i ≡ l mod 16 of each row's whole 16-blocks; the rest of a row goes to lane 0 in
// order): independent add chains, since one chain is latency-bound. Written with vector types
// since the compiler does not form them itself.

typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

// macros: a function returning a vector would change the ABI of the default clone
#define load8(p) ({ v8f f_; memcpy(&f_, (p), sizeof f_); __builtin_convertvector(f_, v8d); })
// a[0] holds lanes 0-7 and a[1] lanes 8-15: (lanes j + 4+j) + (lanes 8+j + 12+j), then
// the four of those as (0+1)+(2+3)
#define total16(a) ({                                                                         \
	v8d t_ = (a)[0] + 0, u_ = (a)[1] + 0;                                                     \
	double r_[4];                                                                             \
	for (int j_ = 0; j_ < 4; j_++) r_[j_] = (t_[j_] + t_[4 + j_]) + (u_[j_] + u_[4 + j_]);    \
	(r_[0] + r_[1]) + (r_[2] + r_[3]);                                                        \
})

HPUSIM_CLONES_512_2
static double hpusim_bn_sum(const float *x, int64_t ns, int64_t N, int64_t S, double mean, int sq) {
	v8d a[2] = {{0}}, mv = {mean, mean, mean, mean, mean, mean, mean, mean};
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * ns;
		int64_t i = 0;
		if (sq) {
			for (; i + 16 <= S; i += 16)
				for (int j = 0; j < 2; j++) {
					v8d d = load8(xs + i + 8 * j) - mv;
					a[j] += d * d;
				}
			for (; i < S; i++) { double d = xs[i] - mean; a[0][0] += d * d; }
		} else {
			for (; i + 16 <= S; i += 16)
				for (int j = 0; j < 2; j++) a[j] += load8(xs + i + 8 * j);
			for (; i < S; i++) a[0][0] += xs[i];
		}
	}
	return total16(a);
}

HPUSIM_CLONES_512_2
static void hpusim_bn_apply(const float *x, int64_t xns, float *o, int64_t ons, int64_t N, int64_t S, double sd, double hd) {
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * xns;
		float *os = o + n * ons;
		for (int64_t i = 0; i < S; i++) os[i] = (float)((double)xs[i] * sd + hd);
	}
}

HPUSIM_CLONES_512_2
static void hpusim_bn_bwd_sums(const float *x, int64_t xns, const float *g, int64_t gns, int64_t N, int64_t S,
                               double mean, double *sum, double *dotp) {
	v8d s[2] = {{0}}, d[2] = {{0}}, mv = {mean, mean, mean, mean, mean, mean, mean, mean};
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * xns, *gs = g + n * gns;
		int64_t i = 0;
		for (; i + 16 <= S; i += 16)
			for (int j = 0; j < 2; j++) {
				v8d gv = load8(gs + i + 8 * j);
				s[j] += gv;
				d[j] += (load8(xs + i + 8 * j) - mv) * gv;
			}
		for (; i < S; i++) {
			s[0][0] += gs[i];
			d[0][0] += (xs[i] - mean) * (double)gs[i];
		}
	}
	*sum = total16(s);
	*dotp = total16(d);
}

HPUSIM_CLONES_512_2
static void hpusim_bn_bwd_apply(const float *x, int64_t xns, const float *g, int64_t gns, float *o, int64_t ons,
                                int64_t N, int64_t S, double mean, double gm, double k, double invstd, double wc,
                                int training) {
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * xns, *gs = g + n * gns;
		float *os = o + n * ons;
		if (training) {
			for (int64_t i = 0; i < S; i++)
				os[i] = (float)(((double)gs[i] - gm - ((double)xs[i] - mean) * k) * invstd * wc);
		} else {
			for (int64_t i = 0; i < S; i++) os[i] = (float)((double)gs[i] * invstd * wc);
		}
	}
}

// bfloat16 batch norm channels: the float32 fast path above on the exactly widened values,
// results rounded once to float32 and then to bfloat16 (nearest even, NaN 0x7fc0:
// F32ToBF16) as storeFloat does.
static inline double bf16d(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint16_t f32_bf16(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
	return (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)r;
}

// The sums run in the float32 fast path's order (16 lanes, row tails to lane 0): one float64 add chain per statistic was latency-bound (0.9 ms for
// a [64,16,28,28] forward against 0.15 ms on CPU).
#define load8h(p) ((v8d){bf16d((p)[0]), bf16d((p)[1]), bf16d((p)[2]), bf16d((p)[3]), bf16d((p)[4]), bf16d((p)[5]), bf16d((p)[6]), bf16d((p)[7])})

HPUSIM_CLONES_512_2
static double hpusim_bn_sum_bf16(const uint16_t *x, int64_t ns, int64_t N, int64_t S, double mean, int sq) {
	v8d a[2] = {{0}}, mv = {mean, mean, mean, mean, mean, mean, mean, mean};
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * ns;
		int64_t i = 0;
		if (sq) {
			for (; i + 16 <= S; i += 16)
				for (int j = 0; j < 2; j++) {
					v8d d = load8h(xs + i + 8 * j) - mv;
					a[j] += d * d;
				}
			for (; i < S; i++) { double d = bf16d(xs[i]) - mean; a[0][0] += d * d; }
		} else {
			for (; i + 16 <= S; i += 16)
				for (int j = 0; j < 2; j++) a[j] += load8h(xs + i + 8 * j);
			for (; i < S; i++) a[0][0] += bf16d(xs[i]);
		}
	}
	return total16(a);
}

HPUSIM_CLONES_512_2
static void hpusim_bn_apply_bf16(const uint16_t *x, int64_t xns, uint16_t *o, int64_t ons, int64_t N, int64_t S, double sd,
                                 double hd) {
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * xns;
		uint16_t *os = o + n * ons;
		for (int64_t i = 0; i < S; i++) os[i] = f32_bf16((float)(bf16d(xs[i]) * sd + hd));
	}
}

HPUSIM_CLONES_512_2
static void hpusim_bn_bwd_sums_bf16(const uint16_t *x, int64_t xns, const uint16_t *g, int64_t gns, int64_t N, int64_t S,
                                    double mean, double *sum, double *dotp) {
	v8d s[2] = {{0}}, d[2] = {{0}}, mv = {mean, mean, mean, mean, mean, mean, mean, mean};
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * xns, *gs = g + n * gns;
		int64_t i = 0;
		for (; i + 16 <= S; i += 16)
			for (int j = 0; j < 2; j++) {
				v8d gv = load8h(gs + i + 8 * j);
				s[j] += gv;
				d[j] += (load8h(xs + i + 8 * j) - mv) * gv;
			}
		for (; i < S; i++) {
			double gv = bf16d(gs[i]);
			s[0][0] += gv;
			d[0][0] += (bf16d(xs[i]) - mean) * gv;
		}
	}
	*sum = total16(s);
	*dotp = total16(d);
}

HPUSIM_CLONES_512_2
static void hpusim_bn_bwd_apply_bf16(const uint16_t *x, int64_t xns, const uint16_t *g, int64_t gns, uint16_t *o, int64_t ons,
                                     int64_t N, int64_t S, double mean, double gm, double k, double invstd, double wc,
                                     int training) {
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * xns, *gs = g + n * gns;
		uint16_t *os = o + n * ons;
		if (training) {
			for (int64_t i = 0; i < S; i++)
				os[i] = f32_bf16((float)((bf16d(gs[i]) - gm - (bf16d(xs[i]) - mean) * k) * invstd * wc));
		} else {
			for (int64_t i = 0; i < S; i++) os[i] = f32_bf16((float)(bf16d(gs[i]) * invstd * wc));
		}
	}
}
*/
import "C"

import "unsafe"

func cf(p unsafe.Pointer) *C.float { return (*C.float)(p) }

func cfs(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(unsafe.SliceData(s)))
}

const haveCNorm = true

// lnFwdC runs layerNormFwd's rows; reduced selects its bfloat16/float16 formula.
func lnFwdC(x unsafe.Pointer, xs int64, out unsafe.Pointer, os int64, rows, D int64, g, b []float32, eps float32, mean, rstd []float32,
	reduced bool) {
	red := C.int(0)
	if reduced {
		red = 1
	}
	C.hpusim_ln_fwd_f32(cf(x), C.int64_t(xs), cf(out), C.int64_t(os), C.int64_t(rows), C.int64_t(D), cfs(g), cfs(b),
		C.float(eps), cfs(mean), cfs(rstd), red)
}

func lnBwdC(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, gin unsafe.Pointer, gs int64, rows, D int64,
	g, mu, rs, tmp []float32) {
	C.hpusim_ln_bwd_f32(cf(dy), C.int64_t(dys), cf(x), C.int64_t(xs), cf(gin), C.int64_t(gs), C.int64_t(rows), C.int64_t(D),
		cfs(g), cfs(mu), cfs(rs), cfs(tmp))
}

func lnBwdColsC(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, rows, n int64, mu, rs, dw, db []float32) {
	C.hpusim_ln_bwd_cols_f32(cf(dy), C.int64_t(dys), cf(x), C.int64_t(xs), C.int64_t(rows), C.int64_t(n), cfs(mu), cfs(rs),
		cfs(dw), cfs(db))
}

func bnSumC(x unsafe.Pointer, ns, N, S int64, mean float64, sq bool) float64 {
	q := C.int(0)
	if sq {
		q = 1
	}
	return float64(C.hpusim_bn_sum(cf(x), C.int64_t(ns), C.int64_t(N), C.int64_t(S), C.double(mean), q))
}

func bnApplyC(x unsafe.Pointer, xns int64, o unsafe.Pointer, ons, N, S int64, sd, hd float64) {
	C.hpusim_bn_apply(cf(x), C.int64_t(xns), cf(o), C.int64_t(ons), C.int64_t(N), C.int64_t(S), C.double(sd), C.double(hd))
}

func bnBwdSumsC(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns, N, S int64, mean float64) (float64, float64) {
	var sum, dotp C.double
	C.hpusim_bn_bwd_sums(cf(x), C.int64_t(xns), cf(g), C.int64_t(gns), C.int64_t(N), C.int64_t(S), C.double(mean), &sum, &dotp)
	return float64(sum), float64(dotp)
}

func bnBwdApplyC(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns int64, o unsafe.Pointer, ons, N, S int64,
	mean, gm, k, invstd, wc float64, training bool) {
	t := C.int(0)
	if training {
		t = 1
	}
	C.hpusim_bn_bwd_apply(cf(x), C.int64_t(xns), cf(g), C.int64_t(gns), cf(o), C.int64_t(ons), C.int64_t(N), C.int64_t(S),
		C.double(mean), C.double(gm), C.double(k), C.double(invstd), C.double(wc), t)
}

func cu16(p unsafe.Pointer) *C.uint16_t { return (*C.uint16_t)(p) }

func bnSumBF16C(x unsafe.Pointer, ns, N, S int64, mean float64, sq bool) float64 {
	q := C.int(0)
	if sq {
		q = 1
	}
	return float64(C.hpusim_bn_sum_bf16(cu16(x), C.int64_t(ns), C.int64_t(N), C.int64_t(S), C.double(mean), q))
}

func bnApplyBF16C(x unsafe.Pointer, xns int64, o unsafe.Pointer, ons, N, S int64, sd, hd float64) {
	C.hpusim_bn_apply_bf16(cu16(x), C.int64_t(xns), cu16(o), C.int64_t(ons), C.int64_t(N), C.int64_t(S), C.double(sd), C.double(hd))
}

func bnBwdSumsBF16C(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns, N, S int64, mean float64) (float64, float64) {
	var sum, dotp C.double
	C.hpusim_bn_bwd_sums_bf16(cu16(x), C.int64_t(xns), cu16(g), C.int64_t(gns), C.int64_t(N), C.int64_t(S), C.double(mean),
		&sum, &dotp)
	return float64(sum), float64(dotp)
}

func bnBwdApplyBF16C(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns int64, o unsafe.Pointer, ons, N, S int64,
	mean, gm, k, invstd, wc float64, training bool) {
	t := C.int(0)
	if training {
		t = 1
	}
	C.hpusim_bn_bwd_apply_bf16(cu16(x), C.int64_t(xns), cu16(g), C.int64_t(gns), cu16(o), C.int64_t(ons), C.int64_t(N),
		C.int64_t(S), C.double(mean), C.double(gm), C.double(k), C.double(invstd), C.double(wc), t)
}
