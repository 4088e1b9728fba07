//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
// Float32 elementwise kernels in C so that the compiler vectorizes them (Go does not):
// one clone per ISA, picked at load time. -ffp-contract=off keeps every multiply and add
// rounded as written (fmaf where torch's vectorized kernels fuse); no-trapping-math only
// lets the compiler turn selects into blends.
#pragma GCC optimize ("fp-contract=off", "no-trapping-math")
#include <stdint.h>
#include <stddef.h>
#include <math.h>

#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

static inline float bits2f(uint32_t u) { union { uint32_t u; float f; } v; v.u = u; return v.f; }

// exp(x) in float32 to ~1 ULP: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-7
// Taylor polynomial (truncation < 1e-8 relative), 2^n applied as two normal power-of-two
// factors so subnormal results round once and large ones overflow to inf. Branch-free so
// that loops calling it vectorize.
static inline float fm_exp(float x) {
	float xc = x < -110.0f ? -110.0f : x;
	xc = xc > 89.0f ? 89.0f : xc;
	float n = fmaf(xc, 1.44269502f, 12582912.0f) - 12582912.0f; // rint(x / ln2)
	float r = fmaf(n, -0.693145751953125f, xc);                   // ln2 high part: n*hi is exact
	r = fmaf(n, -1.428606765330187e-06f, r);
	float p = 1.0f / 5040;
	p = fmaf(p, r, 1.0f / 720);
	p = fmaf(p, r, 1.0f / 120);
	p = fmaf(p, r, 1.0f / 24);
	p = fmaf(p, r, 1.0f / 6);
	p = fmaf(p, r, 0.5f);
	p = fmaf(p, r, 1.0f);
	p = fmaf(p, r, 1.0f);
	int32_t ni = (int32_t)n;
	int32_t n1 = ni >> 1, n2 = ni - n1;
	float y = p * bits2f((uint32_t)(n1 + 127) << 23) * bits2f((uint32_t)(n2 + 127) << 23);
	return x != x ? x : y;
}

// tanh(x) in float32 to ~2 ULP: the odd Taylor series through x^13 below |x| = 0.5 (the
// first omitted term is < 1e-7 relative), (1-e)/(1+e) with e = exp(-2|x|) above, where
// 1-e >= 0.63 loses nothing to cancellation.
static inline float fm_tanh(float x) {
	float ax = x < 0 ? -x : x;
	float z = x * x;
	float q = 21844.0f / 6081075;
	q = fmaf(q, z, -1382.0f / 155925);
	q = fmaf(q, z, 62.0f / 2835);
	q = fmaf(q, z, -17.0f / 315);
	q = fmaf(q, z, 2.0f / 15);
	q = fmaf(q, z, -1.0f / 3);
	float small = fmaf(q * z, x, x);
	float e = fm_exp(-2.0f * ax);
	float big = (1.0f - e) / (1.0f + e);
	big = x < 0 ? -big : big;
	return ax < 0.5f ? small : (x != x ? x : big);
}

// erf as torch's vectorized CPU kernels (GeluKernel) compute it: Abramowitz-Stegun 7.1.26,
// |error| < 1.5e-7.
static inline float fm_erf_as(float x) {
	float ax = x < 0 ? -x : x;
	float t = 1.0f / fmaf(0.3275911f, ax, 1.0f);
	float r = fmaf(1.061405429f, t, -1.453152027f);
	r = fmaf(r, t, 1.421413741f);
	r = fmaf(r, t, -0.284496736f);
	r = fmaf(r, t, 0.254829592f);
	float e = -fm_exp(-(x * x));
	float y = fmaf(e * t, r, 1.0f);
	return x < 0 ? -y : y;
}

enum {
	FM_EXP, FM_SIGMOID, FM_SILU, FM_SILU_BWD, FM_TANH, FM_GELU, FM_GELU_BWD, FM_GELU_TANH,
	FM_GELU_TANH_BWD, FM_ADD, FM_ADD_ALPHA, FM_MUL, FM_DIV, FM_WHERE, FM_RELU, FM_THRESHOLD_BWD,
	FM_LERP, FM_ADDCDIV, FM_ADDCMUL, FM_SIGMOID_BWD, FM_TANH_BWD,
};

#define LOOP _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++)

// One function per op so each vectorizes on its own; o may be any one of the inputs
// (exactly, in-place ops) but no other overlap.
static void CLONES fm_exp_loop(float *o, const float *a, size_t n) { LOOP o[i] = fm_exp(a[i]); }
static void CLONES fm_sigmoid(float *o, const float *a, size_t n) { LOOP o[i] = 1.0f / (1.0f + fm_exp(-a[i])); }
static void CLONES fm_silu(float *o, const float *a, size_t n) { LOOP o[i] = a[i] / (1.0f + fm_exp(-a[i])); }
static void CLONES fm_silu_bwd(float *o, const float *g, const float *a, size_t n) {
	LOOP {
		float x = a[i], s = 1.0f / (1.0f + fm_exp(-x));
		o[i] = g[i] * s * (1.0f + x * (1.0f - s));
	}
}
static void CLONES fm_tanh_loop(float *o, const float *a, size_t n) { LOOP o[i] = fm_tanh(a[i]); }

static const float kAlpha = 0.70710678118654752440f;              // 1/sqrt(2)
static const float kBetaErf = 1.12837916709551257390f * 0.70710678118654752440f * 0.5f;
static const float kBetaTanh = 1.41421356237309504880f * 1.12837916709551257390f * 0.5f;
static const float kKappa = 0.044715f;

static void CLONES fm_gelu(float *o, const float *a, size_t n) {
	LOOP {
		float x = a[i];
		o[i] = x * 0.5f * (1.0f + fm_erf_as(x * kAlpha));
	}
}
static void CLONES fm_gelu_bwd(float *o, const float *g, const float *a, size_t n) {
	LOOP {
		float x = a[i];
		float cdf = 0.5f * (1.0f + fm_erf_as(x * kAlpha));
		float pdf = kBetaErf * fm_exp(-0.5f * x * x);
		o[i] = g[i] * (cdf + x * pdf);
	}
}
static void CLONES fm_gelu_tanh(float *o, const float *a, size_t n) {
	LOOP {
		float x = a[i];
		float inner = kBetaTanh * (x + kKappa * x * x * x);
		o[i] = 0.5f * x * (1.0f + fm_tanh(inner));
	}
}
static void CLONES fm_gelu_tanh_bwd(float *o, const float *g, const float *a, size_t n) {
	LOOP {
		float x = a[i], xsq = x * x, xcube = xsq * x;
		float th = fm_tanh(kBetaTanh * (x + kKappa * xcube));
		float left = 0.5f * x, right = 1.0f + th;
		float leftd = 0.5f * right;
		float rightd = left * (1.0f - th * th) * kBetaTanh * (1.0f + 3.0f * kKappa * xsq);
		o[i] = g[i] * (leftd + rightd);
	}
}
static void CLONES fm_add(float *o, const float *a, const float *b, size_t n) { LOOP o[i] = a[i] + b[i]; }
static void CLONES fm_add_alpha(float *o, const float *a, const float *b, float al, size_t n) {
	LOOP o[i] = fmaf(al, b[i], a[i]);
}
static void CLONES fm_mul(float *o, const float *a, const float *b, size_t n) { LOOP o[i] = a[i] * b[i]; }
static void CLONES fm_div(float *o, const float *a, const float *b, size_t n) { LOOP o[i] = a[i] / b[i]; }
static void CLONES fm_where(float *o, const float *c, const float *a, const float *b, size_t n) {
	LOOP o[i] = c[i] != 0 ? a[i] : b[i];
}
static void CLONES fm_relu(float *o, const float *a, size_t n) {
	LOOP {
		float x = a[i];
		o[i] = x > 0 ? x : (x != x ? x : 0.0f);
	}
}
static void CLONES fm_threshold_bwd(float *o, const float *g, const float *a, float th, size_t n) {
	LOOP o[i] = a[i] <= th ? 0.0f : g[i];
}
// lerp as torch's vectorized kernel: fused multiply-adds, the form chosen by |w| < 0.5.
static void CLONES fm_lerp(float *o, const float *s, const float *e, const float *w, size_t n) {
	LOOP {
		float d = e[i] - s[i], wi = w[i];
		float aw = wi < 0 ? -wi : wi;
		o[i] = aw < 0.5f ? fmaf(wi, d, s[i]) : fmaf(-d, 1.0f - wi, e[i]);
	}
}
static void CLONES fm_addcdiv(float *o, const float *s, const float *a, const float *b, float v, size_t n) {
	LOOP o[i] = s[i] + v * a[i] / b[i];
}
static void CLONES fm_addcmul(float *o, const float *s, const float *a, const float *b, float v, size_t n) {
	LOOP o[i] = s[i] + v * a[i] * b[i];
}
static void CLONES fm_sigmoid_bwd(float *o, const float *g, const float *y, size_t n) {
	LOOP o[i] = g[i] * (1.0f - y[i]) * y[i];
}
static void CLONES fm_tanh_bwd(float *o, const float *g, const float *y, size_t n) {
	LOOP o[i] = g[i] * (1.0f - y[i] * y[i]);
}

// hpusim_f32 runs op over n contiguous float32 elements; one C entry point for all ops.
static void hpusim_f32(int op, float *o, const float *a, const float *b, const float *c, float p0, size_t n) {
	switch (op) {
	case FM_EXP: fm_exp_loop(o, a, n); break;
	case FM_SIGMOID: fm_sigmoid(o, a, n); break;
	case FM_SILU: fm_silu(o, a, n); break;
	case FM_SILU_BWD: fm_silu_bwd(o, a, b, n); break;
	case FM_TANH: fm_tanh_loop(o, a, n); break;
	case FM_GELU: fm_gelu(o, a, n); break;
	case FM_GELU_BWD: fm_gelu_bwd(o, a, b, n); break;
	case FM_GELU_TANH: fm_gelu_tanh(o, a, n); break;
	case FM_GELU_TANH_BWD: fm_gelu_tanh_bwd(o, a, b, n); break;
	case FM_ADD: fm_add(o, a, b, n); break;
	case FM_ADD_ALPHA: fm_add_alpha(o, a, b, p0, n); break;
	case FM_MUL: fm_mul(o, a, b, n); break;
	case FM_DIV: fm_div(o, a, b, n); break;
	case FM_WHERE: fm_where(o, a, b, c, n); break;
	case FM_RELU: fm_relu(o, a, n); break;
	case FM_THRESHOLD_BWD: fm_threshold_bwd(o, a, b, p0, n); break;
	case FM_LERP: fm_lerp(o, a, b, c, n); break;
	case FM_ADDCDIV: fm_addcdiv(o, a, b, c, p0, n); break;
	case FM_ADDCMUL: fm_addcmul(o, a, b, c, p0, n); break;
	case FM_SIGMOID_BWD: fm_sigmoid_bwd(o, a, b, n); break;
	case FM_TANH_BWD: fm_tanh_bwd(o, a, b, n); break;
	}
}
*/
import "C"

import "unsafe"

// fmOp is the Go side of one C op: the float32 EWFunc that hands the whole chunk to C.
// The pure Go versions (elementwise_ops.go) remain the nocgo build's implementation.
func fmOp(op C.int, nin int, param func(p []float64) float32) EWFunc[float32] {
	return func(o []float32, in [][]float32, p []float64) {
		n := len(o)
		if n == 0 {
			return
		}
		var ptr [3]*C.float
		for j := 0; j < nin; j++ {
			ptr[j] = (*C.float)(unsafe.Pointer(unsafe.SliceData(in[j][:n])))
		}
		var p0 float32
		if param != nil {
			p0 = param(p)
		}
		C.hpusim_f32(op, (*C.float)(unsafe.Pointer(unsafe.SliceData(o))), ptr[0], ptr[1], ptr[2], C.float(p0), C.size_t(n))
	}
}

func fmP0(p []float64) float32 { return float32(p[0]) }

// installFast replaces the float32 implementations of the ops the C code covers. Ops
// with a mode parameter keep the Go version for the modes C does not handle.
func installFast() {
	set := func(name string, f EWFunc[float32]) { EWOps[name].F32 = f }
	set("exp", fmOp(C.FM_EXP, 1, nil))
	set("sigmoid", fmOp(C.FM_SIGMOID, 1, nil))
	set("silu", fmOp(C.FM_SILU, 1, nil))
	set("silu_backward", fmOp(C.FM_SILU_BWD, 2, nil))
	set("tanh", fmOp(C.FM_TANH, 1, nil))
	gelu, geluTanh := fmOp(C.FM_GELU, 1, nil), fmOp(C.FM_GELU_TANH, 1, nil)
	set("gelu", func(o []float32, in [][]float32, p []float64) {
		if p[0] != 0 {
			geluTanh(o, in, p)
		} else {
			gelu(o, in, p)
		}
	})
	geluBwd, geluTanhBwd := fmOp(C.FM_GELU_BWD, 2, nil), fmOp(C.FM_GELU_TANH_BWD, 2, nil)
	set("gelu_backward", func(o []float32, in [][]float32, p []float64) {
		if p[0] != 0 {
			geluTanhBwd(o, in, p)
		} else {
			geluBwd(o, in, p)
		}
	})
	add, addAlpha := fmOp(C.FM_ADD, 2, nil), fmOp(C.FM_ADD_ALPHA, 2, fmP0)
	set("add", func(o []float32, in [][]float32, p []float64) {
		if float32(p[0]) == 1 {
			add(o, in, p)
		} else {
			addAlpha(o, in, p)
		}
	})
	set("mul", fmOp(C.FM_MUL, 2, nil))
	set("div", fmOp(C.FM_DIV, 2, nil))
	set("where", fmOp(C.FM_WHERE, 3, nil))
	set("relu", fmOp(C.FM_RELU, 1, nil))
	set("threshold_backward", fmOp(C.FM_THRESHOLD_BWD, 2, fmP0))
	set("lerp", fmOp(C.FM_LERP, 3, nil))
	set("addcdiv", fmOp(C.FM_ADDCDIV, 3, fmP0))
	set("addcmul", fmOp(C.FM_ADDCMUL, 3, fmP0))
	set("sigmoid_backward", fmOp(C.FM_SIGMOID_BWD, 2, nil))
	set("tanh_backward", fmOp(C.FM_TANH_BWD, 2, nil))
}
