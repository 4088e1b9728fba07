// GELU forward and backward in float32 AVX2+FMA lanes (both approximations), included by
// fastmath_cgo.go's preamble, whose gelu kernels call these when the CPU has AVX2 and FMA
// (and HPUSIM_ISA allows them) for the forms hpusim_gelu_avx2_flag selects. Closer to a float64 reference than torch's CPU kernels,
// whose erf (Abramowitz-Stegun 7.1.26, 1.5e-7 absolute) and 1 + tanh lose the negative
// tail to cancellation:
//   - erf form: Phi(x) = 1/2 + phi0 * x * S(x^2) by its Taylor series below |x| = 0.7, else
//     from h = erfc(|x|/sqrt2)/2 = t/2 * exp(-x^2/2 + P(t)) (Numerical Recipes' erfcc,
//     relative error < 1.2e-7 for every argument) with x^2 split exactly into hi + lo and
//     the exponential's argument reduced in two parts, so the tail keeps its relative
//     accuracy down to the subnormals (h carries a factor 2^64 until the last multiply);
//   - tanh form: 0.5 x (1 + tanh u) = x / (1 + exp(-2u)), no cancellation for u < 0.
#ifndef HPUSIM_GELU_AVX2_H
#define HPUSIM_GELU_AVX2_H
#include <immintrin.h>
#include <stddef.h>
#include <string.h>
#include "isa.h"

#define GLT __attribute__((target("avx2,fma")))

// Which forms run in the AVX2 lanes: bit 0 the tanh form, bit 1 the erf form. -1: not
// decided yet. The erf form's lanes are ~1.5x the portable loop's time (both the series and
// the erfc tail for every lane, against one erf of 7.1.26), so by default only the tanh form
// (faster than its portable loop) runs here; tests sweep both.
static int hpusim_gelu_avx2_flag = -1;

static inline int hpusim_gelu_avx2_have(void) { return HPUSIM_AVX2() && HPUSIM_CPU_HAS(HPUSIM_ISA_LEVEL_AVX2, "fma"); }

static int hpusim_gelu_avx2_ok(void) {
	int v = __atomic_load_n(&hpusim_gelu_avx2_flag, __ATOMIC_RELAXED);
	if (v < 0) {
		v = hpusim_gelu_avx2_have() ? 1 : 0;
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

// e^r for |r| <= ln2/2 (+ a little): Cephes expf's polynomial, ~1 ulp.
GLT static inline __m256 gl_expr(__m256 r) {
	__m256 p = GL_S(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, GL_S(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, GL_S(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, GL_S(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, GL_S(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, GL_S(5.0000001201e-1f));
	__m256 r2 = _mm256_mul_ps(r, r);
	return _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), GL_S(1.0f));
}

// 2^64 * e^(a + b) for a + b in [-107, 0] (a large and exact, b small): the reduction
// subtracts n ln2 from a first, exactly, then adds b.
GLT static inline __m256 gl_exp2p(__m256 a, __m256 b) {
	__m256 n = _mm256_round_ps(_mm256_mul_ps(_mm256_add_ps(a, b), GL_S(1.44269504088896341f)),
	                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fmadd_ps(n, GL_S(-0.693145751953125f), a);
	r = _mm256_add_ps(r, b);
	r = _mm256_fmadd_ps(n, GL_S(-1.428606765330187e-06f), r);
	__m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127 + 64)), 23);
	return _mm256_mul_ps(gl_expr(r), _mm256_castsi256_ps(e));
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

// Phi(x) - 1/2 for |x| < 0.7: phi0 x (1 - x^2/6 + x^4/40 - ...), through x^13.
GLT static inline __m256 gl_phi_small(__m256 x, __m256 x2) {
	__m256 s = GL_S(1.0f / 599040);
	s = _mm256_fmadd_ps(s, x2, GL_S(-1.0f / 42240));
	s = _mm256_fmadd_ps(s, x2, GL_S(1.0f / 3456));
	s = _mm256_fmadd_ps(s, x2, GL_S(-1.0f / 336));
	s = _mm256_fmadd_ps(s, x2, GL_S(1.0f / 40));
	s = _mm256_fmadd_ps(s, x2, GL_S(-1.0f / 6));
	s = _mm256_fmadd_ps(s, x2, GL_S(1.0f));
	return _mm256_mul_ps(_mm256_mul_ps(x, GL_S(gl_phi0)), s);
}

// 2^64 * erfc(|x|/sqrt2)/2 (0 above |x| = 14.5, where the results round to 0 or 1), and
// 2^64 * e^(-x^2/2) when ephi is not NULL.
GLT static inline __m256 gl_tail(__m256 x, __m256 ax, __m256 *ephi) {
	__m256 t = _mm256_div_ps(GL_S(1.0f), _mm256_fmadd_ps(ax, GL_S(0.353553390593273762f), GL_S(1.0f)));
	__m256 p = GL_S(0.17087277f);
	p = _mm256_fmadd_ps(p, t, GL_S(-0.82215223f));
	p = _mm256_fmadd_ps(p, t, GL_S(1.48851587f));
	p = _mm256_fmadd_ps(p, t, GL_S(-1.13520398f));
	p = _mm256_fmadd_ps(p, t, GL_S(0.27886807f));
	p = _mm256_fmadd_ps(p, t, GL_S(-0.18628806f));
	p = _mm256_fmadd_ps(p, t, GL_S(0.09678418f));
	p = _mm256_fmadd_ps(p, t, GL_S(0.37409196f));
	p = _mm256_fmadd_ps(p, t, GL_S(1.00002368f));
	p = _mm256_fmadd_ps(p, t, GL_S(-1.26551223f));
	__m256 hi = _mm256_mul_ps(x, x), lo = _mm256_fmsub_ps(x, x, hi);
	__m256 a = _mm256_mul_ps(hi, GL_S(-0.5f)), bl = _mm256_mul_ps(lo, GL_S(-0.5f));
	__m256 far = _mm256_cmp_ps(ax, GL_S(14.5f), _CMP_GT_OQ);
	if (ephi) *ephi = _mm256_andnot_ps(far, gl_exp2p(a, bl));
	__m256 h = _mm256_mul_ps(_mm256_mul_ps(t, GL_S(0.5f)), gl_exp2p(a, _mm256_add_ps(p, bl)));
	return _mm256_andnot_ps(far, h);
}

#define GL_2M64 5.42101086242752217e-20f // 2^-64

GLT static inline __m256 gl_gelu_erf(__m256 x) {
	__m256 ax = _mm256_andnot_ps(GL_S(-0.0f), x), x2 = _mm256_mul_ps(x, x);
	__m256 small = _mm256_mul_ps(x, _mm256_add_ps(GL_S(0.5f), gl_phi_small(x, x2)));
	__m256 h = gl_tail(x, ax, NULL);
	__m256 neg = _mm256_cmp_ps(x, GL_S(0.0f), _CMP_LT_OQ);
	__m256 pos = _mm256_mul_ps(x, _mm256_fnmadd_ps(h, GL_S(GL_2M64), GL_S(1.0f)));
	__m256 ng = _mm256_mul_ps(_mm256_mul_ps(x, h), GL_S(GL_2M64));
	__m256 big = _mm256_blendv_ps(pos, ng, neg);
	__m256 r = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, GL_S(0.7f), _CMP_LT_OQ));
	// -inf: torch's -inf * 0 = NaN; NaN stays NaN through the arithmetic
	return _mm256_blendv_ps(r, GL_S(__builtin_nanf("")), _mm256_cmp_ps(x, GL_S(-__builtin_inff()), _CMP_EQ_OQ));
}

GLT static inline __m256 gl_gelu_erf_bwd(__m256 g, __m256 x) {
	__m256 ax = _mm256_andnot_ps(GL_S(-0.0f), x), x2 = _mm256_mul_ps(x, x);
	__m256 ephi;
	__m256 h = gl_tail(x, ax, &ephi);
	__m256 xphi = _mm256_mul_ps(x, _mm256_mul_ps(ephi, GL_S(gl_phi0))); // 2^64 x phi(x)
	__m256 neg = _mm256_cmp_ps(x, GL_S(0.0f), _CMP_LT_OQ);
	// Phi = 1/2 + small (|x| < 0.7), 1 - h (x > 0), h (x < 0; scaled with x phi)
	__m256 base = _mm256_blendv_ps(_mm256_fnmadd_ps(h, GL_S(GL_2M64), GL_S(1.0f)), GL_S(0.0f), neg);
	__m256 sc = _mm256_add_ps(xphi, _mm256_and_ps(neg, h));
	__m256 isSmall = _mm256_cmp_ps(ax, GL_S(0.7f), _CMP_LT_OQ);
	base = _mm256_blendv_ps(base, _mm256_add_ps(GL_S(0.5f), gl_phi_small(x, x2)), isSmall);
	sc = _mm256_blendv_ps(sc, xphi, isSmall);
	__m256 d = _mm256_fmadd_ps(sc, GL_S(GL_2M64), base);
	d = _mm256_blendv_ps(d, GL_S(__builtin_nanf("")), _mm256_cmp_ps(ax, GL_S(__builtin_inff()), _CMP_EQ_OQ));
	return _mm256_mul_ps(g, d);
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
