//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

// The float32 batch-norm channel kernels in AVX-512 float32 lanes, as torch's CPU kernel
// computes them: each row's sums in float32 vectors, the rows' partials added in float64;
// the normalisation one float32 FMA; the input gradient float32 arithmetic. The float64
// lanes of layernorm_cgo.go (hpusim_bn_*) moved half as many elements per instruction,
// and the forward read each channel three times (sum, squared deviations, output).
// A row whose float32 partial is not finite (values near float32's range limit) is summed
// again in float64, so range limits cost time, never precision.
#pragma GCC optimize("fp-contract=off", "no-trapping-math")

#define BNF_TARGET __attribute__((target("avx512f,fma")))

static inline int bnf_finite(float v) { return v - v == 0; }

// Sums of d = x - K and d*d over one row, float32 lanes (two accumulators each).
BNF_TARGET static inline void bnf_row_moments(const float *xs, int64_t S, float K, double *ds, double *dq) {
	const __m512 kv = _mm512_set1_ps(K);
	__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
	int64_t i = 0;
	for (; i + 32 <= S; i += 32) {
		__m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(xs + i), kv), d1 = _mm512_sub_ps(_mm512_loadu_ps(xs + i + 16), kv);
		a0 = _mm512_add_ps(a0, d0);
		a1 = _mm512_add_ps(a1, d1);
		b0 = _mm512_fmadd_ps(d0, d0, b0);
		b1 = _mm512_fmadd_ps(d1, d1, b1);
	}
	if (i + 16 <= S) {
		__m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(xs + i), kv);
		a0 = _mm512_add_ps(a0, d0);
		b0 = _mm512_fmadd_ps(d0, d0, b0);
		i += 16;
	}
	if (i < S) {
		__mmask16 m = (__mmask16)((1u << (S - i)) - 1);
		__m512 d0 = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, xs + i), kv);
		a1 = _mm512_add_ps(a1, d0);
		b1 = _mm512_fmadd_ps(d0, d0, b1);
	}
	float rs = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)), rq = _mm512_reduce_add_ps(_mm512_add_ps(b0, b1));
	if (bnf_finite(rs) && bnf_finite(rq)) {
		*ds = rs;
		*dq = rq;
		return;
	}
	double s = 0, q = 0;
	for (i = 0; i < S; i++) {
		double d = (double)xs[i] - (double)K;
		s += d;
		q += d * d;
	}
	*ds = s;
	*dq = q;
}

// *mean and *ss (the sum of squared deviations from it) of a channel's N rows of S. One
// pass of sums around a shift K (the channel's first element): mean = K + sum(d)/n and
// ss = sum(d*d) - sum(d)^2/n. The float32 partials' rounding error grows with (K-mean)^2
// relative to the variance, so when K lies far from the mean the squared deviations are
// summed again around the mean itself (torch's second pass).
BNF_TARGET static void bnf_moments(const float *x, int64_t ns, int64_t N, int64_t S, double *mean, double *ss) {
	const float K = x[0];
	double s = 0, q = 0;
	for (int64_t n = 0; n < N; n++) {
		double ds, dq;
		bnf_row_moments(x + n * ns, S, K, &ds, &dq);
		s += ds;
		q += dq;
	}
	const double cnt = (double)(N * S), md = s / cnt;
	double m = (double)K + md, v = q - s * md;
	if (!(md * md * cnt <= 16 * v) && v == v && m - m == 0) {
		// K far from the mean: sum (x - mf)^2 around the float32 mean mf, then correct
		// for mf's rounding (exact algebra: sum (x-m)^2 = sum (x-mf)^2 - n (m-mf)^2)
		const float mf = (float)m;
		double q2 = 0, s2 = 0;
		for (int64_t n = 0; n < N; n++) {
			double ds, dq;
			bnf_row_moments(x + n * ns, S, mf, &ds, &dq);
			s2 += ds;
			q2 += dq;
		}
		v = q2 - s2 * (s2 / cnt);
	}
	*mean = m;
	*ss = v > 0 || v != v ? v : 0;
}

// o = x*sf + hf as one float32 FMA (torch's fmadd).
BNF_TARGET static void bnf_apply(const float *x, int64_t xns, float *o, int64_t ons, int64_t N, int64_t S, float sf, float hf) {
	const __m512 sv = _mm512_set1_ps(sf), hv = _mm512_set1_ps(hf);
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * xns;
		float *os = o + n * ons;
		int64_t i = 0;
		for (; i + 16 <= S; i += 16) _mm512_storeu_ps(os + i, _mm512_fmadd_ps(_mm512_loadu_ps(xs + i), sv, hv));
		if (i < S) {
			__mmask16 m = (__mmask16)((1u << (S - i)) - 1);
			_mm512_mask_storeu_ps(os + i, m, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, xs + i), sv, hv));
		}
	}
}

// The sums of g and of (x - mean)*g (mean as float32, as torch's kernel has it), float32
// lanes per row, the rows added in float64.
BNF_TARGET static void bnf_bwd_sums(const float *x, int64_t xns, const float *g, int64_t gns, int64_t N, int64_t S,
                                    float mf, double *sum, double *dotp) {
	const __m512 mv = _mm512_set1_ps(mf);
	double s = 0, d = 0;
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * xns, *gs = g + n * gns;
		__m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
		int64_t i = 0;
		for (; i + 32 <= S; i += 32) {
			__m512 g0 = _mm512_loadu_ps(gs + i), g1 = _mm512_loadu_ps(gs + i + 16);
			s0 = _mm512_add_ps(s0, g0);
			s1 = _mm512_add_ps(s1, g1);
			d0 = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(xs + i), mv), g0, d0);
			d1 = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(xs + i + 16), mv), g1, d1);
		}
		if (i + 16 <= S) {
			__m512 g0 = _mm512_loadu_ps(gs + i);
			s0 = _mm512_add_ps(s0, g0);
			d0 = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(xs + i), mv), g0, d0);
			i += 16;
		}
		if (i < S) {
			__mmask16 m = (__mmask16)((1u << (S - i)) - 1);
			__m512 g1 = _mm512_maskz_loadu_ps(m, gs + i);
			s1 = _mm512_add_ps(s1, g1);
			d1 = _mm512_fmadd_ps(_mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, xs + i), mv), g1, d1);
		}
		float rs = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)), rd = _mm512_reduce_add_ps(_mm512_add_ps(d0, d1));
		if (bnf_finite(rs) && bnf_finite(rd)) {
			s += rs;
			d += rd;
			continue;
		}
		for (i = 0; i < S; i++) {
			s += gs[i];
			d += ((double)xs[i] - (double)mf) * gs[i];
		}
	}
	*sum = s;
	*dotp = d;
}

// o = ((g - gm) - (x - mean)*k) * (invstd*wc) in training, g * (invstd*wc) otherwise, in
// float32; a row with a non-finite float32 value is recomputed in float64.
BNF_TARGET static void bnf_bwd_apply(const float *x, int64_t xns, const float *g, int64_t gns, float *o, int64_t ons, int64_t N,
                                     int64_t S, double mean, double gm, double k, double invstd, double wc, int training) {
	const float mf = (float)mean, gmf = (float)gm, kf = (float)k, iwf = (float)(invstd * wc);
	const __m512 mv = _mm512_set1_ps(mf), gmv = _mm512_set1_ps(gmf), kv = _mm512_set1_ps(kf), iv = _mm512_set1_ps(iwf);
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * xns, *gs = g + n * gns;
		float *os = o + n * ons;
		int64_t i = 0;
		if (!training) {
			for (; i + 16 <= S; i += 16) _mm512_storeu_ps(os + i, _mm512_mul_ps(_mm512_loadu_ps(gs + i), iv));
			for (; i < S; i++) os[i] = gs[i] * iwf;
			continue;
		}
		__mmask16 bad = 0;
		for (; i + 16 <= S; i += 16) {
			__m512 t = _mm512_fnmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(xs + i), mv), kv, _mm512_sub_ps(_mm512_loadu_ps(gs + i), gmv));
			t = _mm512_mul_ps(t, iv);
			bad |= _mm512_cmp_ps_mask(_mm512_sub_ps(t, t), _mm512_setzero_ps(), _CMP_NEQ_UQ);
			_mm512_storeu_ps(os + i, t);
		}
		if (bad) i = 0;
		for (; i < S; i++) {
			float t = __builtin_fmaf(-(xs[i] - mf), kf, gs[i] - gmf) * iwf;
			if (bad || !bnf_finite(t)) t = (float)(((double)gs[i] - gm - ((double)xs[i] - mean) * k) * invstd * wc);
			os[i] = t;
		}
	}
}
// The same kernels for CPUs without AVX-512: sums in float64 lanes, applies in AVX2/FMA
// float32 lanes (8 wide, as torch's Vectorized<float> on an AVX2 CPU).
#define BNF2_TARGET __attribute__((target("avx2,fma")))

// Sums in float64 lanes (4 wide), as torch's CPU batch norm accumulates float in double:
// float32 partials lose the gradient sums to cancellation (r3d_18's stem: 100x CPU's error).
BNF2_TARGET static inline double bnf2_hsum_pd(__m256d v) {
	__m128d lo = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
	return _mm_cvtsd_f64(_mm_add_sd(lo, _mm_unpackhi_pd(lo, lo)));
}

BNF2_TARGET static inline void bnf2_row_moments(const float *xs, int64_t S, float K, double *ds, double *dq) {
	const __m256d kv = _mm256_set1_pd((double)K);
	__m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), b0 = _mm256_setzero_pd(), b1 = _mm256_setzero_pd();
	int64_t i = 0;
	for (; i + 8 <= S; i += 8) {
		__m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(xs + i)), kv);
		__m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(xs + i + 4)), kv);
		a0 = _mm256_add_pd(a0, d0);
		a1 = _mm256_add_pd(a1, d1);
		b0 = _mm256_fmadd_pd(d0, d0, b0);
		b1 = _mm256_fmadd_pd(d1, d1, b1);
	}
	double s = bnf2_hsum_pd(_mm256_add_pd(a0, a1)), q = bnf2_hsum_pd(_mm256_add_pd(b0, b1));
	for (; i < S; i++) {
		double d = (double)xs[i] - (double)K;
		s += d;
		q += d * d;
	}
	*ds = s;
	*dq = q;
}

BNF2_TARGET static void bnf2_moments(const float *x, int64_t ns, int64_t N, int64_t S, double *mean, double *ss) {
	const float K = x[0];
	double s = 0, q = 0;
	for (int64_t n = 0; n < N; n++) {
		double ds, dq;
		bnf2_row_moments(x + n * ns, S, K, &ds, &dq);
		s += ds;
		q += dq;
	}
	const double cnt = (double)(N * S), md = s / cnt;
	double m = (double)K + md, v = q - s * md;
	if (!(md * md * cnt <= 16 * v) && v == v && m - m == 0) {
		const float mf = (float)m;
		double q2 = 0, s2 = 0;
		for (int64_t n = 0; n < N; n++) {
			double ds, dq;
			bnf2_row_moments(x + n * ns, S, mf, &ds, &dq);
			s2 += ds;
			q2 += dq;
		}
		v = q2 - s2 * (s2 / cnt);
	}
	*mean = m;
	*ss = v > 0 || v != v ? v : 0;
}

BNF2_TARGET static void bnf2_apply(const float *x, int64_t xns, float *o, int64_t ons, int64_t N, int64_t S, float sf, float hf) {
	const __m256 sv = _mm256_set1_ps(sf), hv = _mm256_set1_ps(hf);
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * xns;
		float *os = o + n * ons;
		int64_t i = 0;
		for (; i + 8 <= S; i += 8) _mm256_storeu_ps(os + i, _mm256_fmadd_ps(_mm256_loadu_ps(xs + i), sv, hv));
		for (; i < S; i++) os[i] = __builtin_fmaf(xs[i], sf, hf);
	}
}

BNF2_TARGET static void bnf2_bwd_sums(const float *x, int64_t xns, const float *g, int64_t gns, int64_t N, int64_t S,
                                      float mf, double *sum, double *dotp) {
	const __m256d mv = _mm256_set1_pd((double)mf);
	double s = 0, d = 0;
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * xns, *gs = g + n * gns;
		__m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), d0 = _mm256_setzero_pd(), d1 = _mm256_setzero_pd();
		int64_t i = 0;
		for (; i + 8 <= S; i += 8) {
			__m256d g0 = _mm256_cvtps_pd(_mm_loadu_ps(gs + i)), g1 = _mm256_cvtps_pd(_mm_loadu_ps(gs + i + 4));
			s0 = _mm256_add_pd(s0, g0);
			s1 = _mm256_add_pd(s1, g1);
			d0 = _mm256_fmadd_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(xs + i)), mv), g0, d0);
			d1 = _mm256_fmadd_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(xs + i + 4)), mv), g1, d1);
		}
		s += bnf2_hsum_pd(_mm256_add_pd(s0, s1));
		d += bnf2_hsum_pd(_mm256_add_pd(d0, d1));
		for (; i < S; i++) {
			s += gs[i];
			d += ((double)xs[i] - (double)mf) * gs[i];
		}
	}
	*sum = s;
	*dotp = d;
}

BNF2_TARGET static void bnf2_bwd_apply(const float *x, int64_t xns, const float *g, int64_t gns, float *o, int64_t ons, int64_t N,
                                       int64_t S, double mean, double gm, double k, double invstd, double wc, int training) {
	const float mf = (float)mean, gmf = (float)gm, kf = (float)k, iwf = (float)(invstd * wc);
	const __m256 mv = _mm256_set1_ps(mf), gmv = _mm256_set1_ps(gmf), kv = _mm256_set1_ps(kf), iv = _mm256_set1_ps(iwf);
	for (int64_t n = 0; n < N; n++) {
		const float *xs = x + n * xns, *gs = g + n * gns;
		float *os = o + n * ons;
		int64_t i = 0;
		if (!training) {
			for (; i + 8 <= S; i += 8) _mm256_storeu_ps(os + i, _mm256_mul_ps(_mm256_loadu_ps(gs + i), iv));
			for (; i < S; i++) os[i] = gs[i] * iwf;
			continue;
		}
		int bad = 0;
		for (; i + 8 <= S; i += 8) {
			__m256 t = _mm256_fnmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(xs + i), mv), kv, _mm256_sub_ps(_mm256_loadu_ps(gs + i), gmv));
			t = _mm256_mul_ps(t, iv);
			bad |= _mm256_movemask_ps(_mm256_cmp_ps(_mm256_sub_ps(t, t), _mm256_setzero_ps(), _CMP_NEQ_UQ));
			_mm256_storeu_ps(os + i, t);
		}
		if (bad) i = 0;
		for (; i < S; i++) {
			float t = __builtin_fmaf(-(xs[i] - mf), kf, gs[i] - gmf) * iwf;
			if (bad || !bnf_finite(t)) t = (float)(((double)gs[i] - gm - ((double)xs[i] - mean) * k) * invstd * wc);
			os[i] = t;
		}
	}
}

// Dispatch: wide selects the AVX-512 kernels, else the AVX2 ones.
static void bnf_moments_w(int wide, const float *x, int64_t ns, int64_t N, int64_t S, double *mean, double *ss) {
	if (wide) bnf_moments(x, ns, N, S, mean, ss);
	else bnf2_moments(x, ns, N, S, mean, ss);
}
static void bnf_apply_w(int wide, const float *x, int64_t xns, float *o, int64_t ons, int64_t N, int64_t S, float sf, float hf) {
	if (wide) bnf_apply(x, xns, o, ons, N, S, sf, hf);
	else bnf2_apply(x, xns, o, ons, N, S, sf, hf);
}
static void bnf_bwd_sums_w(int wide, const float *x, int64_t xns, const float *g, int64_t gns, int64_t N, int64_t S,
                           float mf, double *sum, double *dotp) {
	if (wide) bnf_bwd_sums(x, xns, g, gns, N, S, mf, sum, dotp);
	else bnf2_bwd_sums(x, xns, g, gns, N, S, mf, sum, dotp);
}
static void bnf_bwd_apply_w(int wide, const float *x, int64_t xns, const float *g, int64_t gns, float *o, int64_t ons, int64_t N,
                            int64_t S, double mean, double gm, double k, double invstd, double wc, int training) {
	if (wide) bnf_bwd_apply(x, xns, g, gns, o, ons, N, S, mean, gm, k, invstd, wc, training);
	else bnf2_bwd_apply(x, xns, g, gns, o, ons, N, S, mean, gm, k, invstd, wc, training);
}
*/
import "C"

import "unsafe"

// bnF32Vec selects the vector float32 batch-norm kernels: AVX-512 where the CPU has
// AVX-512F (bnF32Wide), else AVX2/FMA (b2CPU).
var (
	bnF32Wide = f32DotCPU
	bnF32Vec  = f32DotCPU || b2CPU
)

func bnWide() C.int {
	if bnF32Wide {
		return 1
	}
	return 0
}

// bnMomentsF32V is bnf_moments: a channel's mean and sum of squared deviations.
func bnMomentsF32V(x unsafe.Pointer, ns, N, S int64) (mean, ss float64) {
	var m, q C.double
	C.bnf_moments_w(bnWide(), cf(x), C.int64_t(ns), C.int64_t(N), C.int64_t(S), &m, &q)
	return float64(m), float64(q)
}

func bnApplyF32V(x unsafe.Pointer, xns int64, o unsafe.Pointer, ons, N, S int64, sd, hd float64) {
	C.bnf_apply_w(bnWide(), cf(x), C.int64_t(xns), cf(o), C.int64_t(ons), C.int64_t(N), C.int64_t(S), C.float(sd), C.float(hd))
}

func bnBwdSumsF32V(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns, N, S int64, mean float64) (float64, float64) {
	var sum, dotp C.double
	C.bnf_bwd_sums_w(bnWide(), cf(x), C.int64_t(xns), cf(g), C.int64_t(gns), C.int64_t(N), C.int64_t(S), C.float(mean), &sum, &dotp)
	return float64(sum), float64(dotp)
}

func bnBwdApplyF32V(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns int64, o unsafe.Pointer, ons, N, S int64,
	mean, gm, k, invstd, wc float64, training bool) {
	t := C.int(0)
	if training {
		t = 1
	}
	C.bnf_bwd_apply_w(bnWide(), cf(x), C.int64_t(xns), cf(g), C.int64_t(gns), cf(o), C.int64_t(ons), C.int64_t(N), C.int64_t(S),
		C.double(mean), C.double(gm), C.double(k), C.double(invstd), C.double(wc), t)
}
