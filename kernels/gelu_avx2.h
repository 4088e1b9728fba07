// GELU forward and backward in float32 AVX2+FMA lanes (both approximations), included by
// fastmath_cgo.go's preamble, whose gelu kernels call these when the CPU has AVX2 and FMA
// (and HPUSIM_ISA allows them) for the forms hpusim_gelu_avx2_flag selects. Closer to a float64 reference than torch's CPU kernels,
// whose erf (Abramowitz-Stegun 7.1.26, 1.5e-7 absolute) and 1 + tanh lose the negative
// tail to cancellation:
//   - erf form: Phi(-|x|) = e^(-x^2/2) N(|x|)/D(|x|), a rational fit with positive
//     coefficients (see gl_erfq), x^2 split exactly and the exponential scaled by 2^64, so
//     the tail keeps its relative accuracy down to the subnormals; Phi(x) = 1 - Phi(-x)
//     for x >= 0;
//   - tanh form: 0.5 x (1 + tanh u) = x / (1 + exp(-2u)), no cancellation for u < 0.
#ifndef HPUSIM_GELU_AVX2_H
#define HPUSIM_GELU_AVX2_H
#include <immintrin.h>
#include <stddef.h>
#include <string.h>
#include "isa.h"

#define GLT __attribute__((target("avx2,fma")))

// Which forms run in the AVX2 lanes: bit 0 the tanh form, bit 1 the erf form (both by
// default; 0 keeps the portable loops, torch's formulas). -1: not decided yet.
static int hpusim_gelu_avx2_flag = -1;

static inline int hpusim_gelu_avx2_have(void) { return HPUSIM_AVX2() && HPUSIM_CPU_HAS(HPUSIM_ISA_LEVEL_AVX2, "fma"); }

static int hpusim_gelu_avx2_ok(void) {
	int v = __atomic_load_n(&hpusim_gelu_avx2_flag, __ATOMIC_RELAXED);
	if (v < 0) {
		v = hpusim_gelu_avx2_have() ? 3 : 0;
		__atomic_store_n(&hpusim_gelu_avx2_flag, v, __ATOMIC_RELAXED);
	}
	return v;
}

// hpusim_gelu_avx2_use sets the forms (bits as above; none without AVX2+FMA) and returns the
// previous setting.
static int hpusim_gelu_avx2_use(int forms) {
	int prev = hpusim_gelu_avx2_ok();
	__atomic_store_n(&hpusim_gelu_avx2_flag, hpusim_gelu_avx2_have() ? forms & 3 : 0, __ATOMIC_RELAXED);
	return prev;
}

#define GL_S(c) _mm256_set1_ps(c)

// Cephes expf's polynomial P (Horner): e^r ~ 1 + r + r^2 P(r) for |r| <= ln2/2 (+ a little).
GLT static inline __m256 gl_expP(__m256 r) {
	__m256 p = GL_S(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, GL_S(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, GL_S(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, GL_S(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, GL_S(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, GL_S(5.0000001201e-1f));
	return p;
}

// e^r for |r| <= ln2/2 (+ a little): Cephes expf's polynomial, ~1 ulp.
GLT static inline __m256 gl_expr(__m256 r) {
	__m256 p = gl_expP(r);
	__m256 r2 = _mm256_mul_ps(r, r);
	return _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), GL_S(1.0f));
}

// e^v * 2^sh for v <= 0 (sh 0 or 64; underflow through the subnormals to 0, NaN kept).
GLT static inline __m256 gl_expneg(__m256 v, int sh) {
	v = _mm256_max_ps(GL_S(-190.0f), v); // NaN stays (second operand)
	__m256 n = _mm256_round_ps(_mm256_mul_ps(v, GL_S(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fmadd_ps(n, GL_S(-0.693145751953125f), v);
	r = _mm256_fmadd_ps(n, GL_S(-1.428606765330187e-06f), r);
	__m256i ni = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(sh));
	__m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
	__m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
	__m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
	return _mm256_mul_ps(_mm256_mul_ps(gl_expr(r), s1), s2);
}

static const float gl_phi0 = 0.398942280401432678f; // 1/sqrt(2 pi)

// The erf form's Phi(-a) = erfc(a/sqrt2)/2 for a = |x| in [0, 14.5] is e^(-a^2/2) N(a)/D(a):
// N/D (degrees 4 and 5, D(0) = 1, every coefficient positive so the Horner sums do not
// cancel) is a minimax fit of erfcx(a/sqrt2)/2 with relative error 6e-9 in float64 (about
// 4 ulps evaluated in float32); e^(-a^2/2) has a^2 split exactly into hi + lo and carries a
// factor 2^64 until the last multiply, so the tail keeps its relative accuracy down into the
// subnormals. One division and one exponential serve the forward (x Phi) and the backward
// (Phi + x phi, phi = e^(-x^2/2)/sqrt(2 pi)). Above 14.5 every result rounds to 0, x or 1.
#define GL_ERF_A 14.5f
GLT static inline __m256 gl_erfq(__m256 a) {
	__m256 n = GL_S(4.116312601e-03f);
	n = _mm256_fmadd_ps(n, a, GL_S(4.063324630e-02f));
	n = _mm256_fmadd_ps(n, a, GL_S(1.832351834e-01f));
	n = _mm256_fmadd_ps(n, a, GL_S(4.382950068e-01f));
	n = _mm256_fmadd_ps(n, a, GL_S(0.5f));
	__m256 d = GL_S(1.031794585e-02f);
	d = _mm256_fmadd_ps(d, a, GL_S(1.018588841e-01f));
	d = _mm256_fmadd_ps(d, a, GL_S(4.694707394e-01f));
	d = _mm256_fmadd_ps(d, a, GL_S(1.202503324e+00f));
	d = _mm256_fmadd_ps(d, a, GL_S(1.674474955e+00f));
	d = _mm256_fmadd_ps(d, a, GL_S(1.0f));
	return _mm256_div_ps(n, d);
}

// 2^64 e^(-a^2/2) for a in [0, 14.5]: -a^2/2 = v + lo/2 (v exact), n = rint(v / ln2) from the
// bits of v log2e + 1.5 2^23, e^r (|r| <= ln2/2 + tiny) as 1 + r (1 + r P(r)) with Cephes
// expf's P.
GLT static inline __m256 gl_egauss(__m256 a) {
	__m256 hi = _mm256_mul_ps(a, a), lo = _mm256_fmsub_ps(a, a, hi);
	__m256 v = _mm256_mul_ps(hi, GL_S(-0.5f));
	__m256 s = _mm256_fmadd_ps(v, GL_S(1.44269504088896341f), GL_S(12582912.0f));
	__m256 n = _mm256_sub_ps(s, GL_S(12582912.0f));
	__m256 r = _mm256_fmadd_ps(n, GL_S(-0.693145751953125f), v);
	r = _mm256_fmadd_ps(lo, GL_S(-0.5f), r);
	r = _mm256_fmadd_ps(n, GL_S(-1.428606765330187e-06f), r);
	__m256 p = gl_expP(r);
	p = _mm256_fmadd_ps(r, p, GL_S(1.0f));
	p = _mm256_fmadd_ps(r, p, GL_S(1.0f));
	// s's low bits hold n (two's complement, |n| < 2^22): 2^(n + 64) from them
	__m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(s), _mm256_set1_epi32(127 + 64)), 23);
	return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#define GL_2M64 5.42101086242752217e-20f // 2^-64

// a = min(|x|, 14.5) (NaN: 14.5; x keeps the NaN), q = N(a)/D(a), 2^64 e^(-a^2/2) (0 above
// 14.5, where |x| phi and the tail round to 0).
GLT static inline __m256 gl_erf_parts(__m256 x, __m256 *q) {
	__m256 ax = _mm256_andnot_ps(GL_S(-0.0f), x);
	__m256 a = _mm256_min_ps(ax, GL_S(GL_ERF_A));
	*q = gl_erfq(a);
	return _mm256_andnot_ps(_mm256_cmp_ps(ax, GL_S(GL_ERF_A), _CMP_GT_OQ), gl_egauss(a));
}

// x Phi(x): x h for x < 0 (h = Phi(-|x|) = e q), x (1 - h) for x >= 0 (x's sign bit picks;
// -inf: -inf * 0 = NaN, as torch's; +inf: inf).
GLT static inline __m256 gl_gelu_erf(__m256 x) {
	__m256 q, e = gl_erf_parts(x, &q);
	__m256 hs = _mm256_mul_ps(q, e);
	__m256 neg = _mm256_mul_ps(_mm256_mul_ps(x, hs), GL_S(GL_2M64));
	__m256 pos = _mm256_mul_ps(x, _mm256_fnmadd_ps(hs, GL_S(GL_2M64), GL_S(1.0f)));
	return _mm256_blendv_ps(pos, neg, x);
}

// g (Phi(x) + x phi(x)) = g e (q + x phi0) for x < 0, g (1 + e (x phi0 - q)) for x >= 0
// (+-inf: inf * 0 = NaN, as torch's).
GLT static inline __m256 gl_gelu_erf_bwd(__m256 g, __m256 x) {
	__m256 q, e = gl_erf_parts(x, &q);
	__m256 neg = _mm256_mul_ps(_mm256_mul_ps(_mm256_fmadd_ps(x, GL_S(gl_phi0), q), e), GL_S(GL_2M64));
	__m256 pos = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_fmsub_ps(x, GL_S(gl_phi0), q), e), GL_S(GL_2M64), GL_S(1.0f));
	return _mm256_mul_ps(g, _mm256_blendv_ps(pos, neg, x));
}

static const float gl_beta_tanh = 0.797884560802865356f; // sqrt(2/pi)
static const float gl_kappa = 0.044715f;

// u = sqrt(2/pi) (x + kappa x^3) and 2^64 e^(-2|u|).
GLT static inline __m256 gl_tanh_u(__m256 x, __m256 x2, __m256 *es) {
	__m256 u = _mm256_mul_ps(_mm256_mul_ps(x, GL_S(gl_beta_tanh)), _mm256_fmadd_ps(x2, GL_S(gl_kappa), GL_S(1.0f)));
	__m256 au = _mm256_andnot_ps(GL_S(-0.0f), u);
	*es = gl_expneg(_mm256_mul_ps(au, GL_S(-2.0f)), 64);
	return u;
}

// x (1 + tanh u)/2 = x / (1 + E) for u >= 0, x E / (1 + E) for u < 0, E = e^(-2|u|).
GLT static inline __m256 gl_gelu_tanh(__m256 x) {
	__m256 es;
	__m256 u = gl_tanh_u(x, _mm256_mul_ps(x, x), &es);
	__m256 q = _mm256_div_ps(GL_S(1.0f), _mm256_fmadd_ps(es, GL_S(GL_2M64), GL_S(1.0f)));
	__m256 pos = _mm256_mul_ps(x, q);
	__m256 neg = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(x, es), q), GL_S(GL_2M64));
	return _mm256_blendv_ps(pos, neg, _mm256_cmp_ps(u, GL_S(0.0f), _CMP_LT_OQ));
}

// d = s (1 + 2 beta x (1 - s) (1 + 3 kappa x^2)) with s = (1 + tanh u)/2: s = q, 1 - s = E q
// for u >= 0; s = E q, 1 - s = q for u < 0 (q = 1/(1 + E)).
GLT static inline __m256 gl_gelu_tanh_bwd(__m256 g, __m256 x) {
	__m256 x2 = _mm256_mul_ps(x, x), es;
	__m256 u = gl_tanh_u(x, x2, &es);
	__m256 ep = _mm256_mul_ps(es, GL_S(GL_2M64));
	__m256 q = _mm256_div_ps(GL_S(1.0f), _mm256_add_ps(GL_S(1.0f), ep));
	__m256 neg = _mm256_cmp_ps(u, GL_S(0.0f), _CMP_LT_OQ);
	__m256 s = _mm256_blendv_ps(q, _mm256_mul_ps(es, q), neg);     // u < 0: scaled by 2^64
	__m256 oms = _mm256_blendv_ps(_mm256_mul_ps(ep, q), q, neg);  // 1 - s
	__m256 term = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(x, GL_S(2.0f * gl_beta_tanh)), oms),
	                            _mm256_fmadd_ps(x2, GL_S(3.0f * gl_kappa), GL_S(1.0f)));
	// where 1 - s or s is 0 the product is 0 (not 0 * inf)
	__m256 zero = _mm256_or_ps(_mm256_cmp_ps(oms, GL_S(0.0f), _CMP_EQ_OQ), _mm256_cmp_ps(s, GL_S(0.0f), _CMP_EQ_OQ));
	term = _mm256_andnot_ps(zero, term);
	__m256 d = _mm256_fmadd_ps(s, term, s);
	d = _mm256_blendv_ps(d, _mm256_mul_ps(d, GL_S(GL_2M64)), neg);
	__m256 ax = _mm256_andnot_ps(GL_S(-0.0f), x);
	d = _mm256_blendv_ps(d, GL_S(__builtin_nanf("")), _mm256_cmp_ps(ax, GL_S(__builtin_inff()), _CMP_EQ_OQ));
	return _mm256_mul_ps(g, d);
}

// o may be a (in place).
GLT static void hpusim_gelu_avx2(float *o, const float *a, size_t n, int tanh_form) {
	size_t i = 0;
	if (tanh_form)
		for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, gl_gelu_tanh(_mm256_loadu_ps(a + i)));
	else
		for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, gl_gelu_erf(_mm256_loadu_ps(a + i)));
	if (i < n) {
		float buf[8] = {0};
		memcpy(buf, a + i, (n - i) * sizeof(float));
		__m256 v = _mm256_loadu_ps(buf);
		_mm256_storeu_ps(buf, tanh_form ? gl_gelu_tanh(v) : gl_gelu_erf(v));
		memcpy(o + i, buf, (n - i) * sizeof(float));
	}
}

GLT static void hpusim_gelu_bwd_avx2(float *o, const float *g, const float *a, size_t n, int tanh_form) {
	size_t i = 0;
	if (tanh_form)
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(o + i, gl_gelu_tanh_bwd(_mm256_loadu_ps(g + i), _mm256_loadu_ps(a + i)));
	else
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(o + i, gl_gelu_erf_bwd(_mm256_loadu_ps(g + i), _mm256_loadu_ps(a + i)));
	if (i < n) {
		float bg[8] = {0}, ba[8] = {0};
		memcpy(bg, g + i, (n - i) * sizeof(float));
		memcpy(ba, a + i, (n - i) * sizeof(float));
		__m256 gv = _mm256_loadu_ps(bg), av = _mm256_loadu_ps(ba);
		_mm256_storeu_ps(bg, tanh_form ? gl_gelu_tanh_bwd(gv, av) : gl_gelu_erf_bwd(gv, av));
		memcpy(o + i, bg, (n - i) * sizeof(float));
	}
}

#endif
