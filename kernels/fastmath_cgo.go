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
#include "isa.h"
#include <stddef.h>
#include <math.h>
#include <string.h>
#include <immintrin.h>
#include "gelu_avx2.h"

#define CLONES HPUSIM_CLONES_V4_V3

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

// log(x) in float32 for normal positive x to ~1 ULP: x = 2^k m with m in [sqrt(1/2),
// sqrt(2)), log m = 2 atanh(s) with s = (m-1)/(m+1), |s| < 0.172, by its series through
// s^9 (truncation < 3e-9 relative).
static inline float fm_log_pos(float x) {
	union { float f; uint32_t u; } v = { x };
	int32_t k = (int32_t)(v.u >> 23) - 127;
	v.u = (v.u & 0x007fffff) | 0x3f800000; // m in [1, 2)
	float m = v.f;
	int big = m > 1.41421356f;
	m = big ? m * 0.5f : m;
	k = big ? k + 1 : k;
	float s = (m - 1.0f) / (m + 1.0f), z = s * s;
	float q = 1.0f / 9;
	q = fmaf(q, z, 1.0f / 7);
	q = fmaf(q, z, 1.0f / 5);
	q = fmaf(q, z, 1.0f / 3);
	float lm = fmaf(2.0f * s * z, q, 2.0f * s);
	float kf = (float)k;
	return fmaf(kf, 0.693145751953125f, fmaf(kf, 1.428606765330187e-06f, lm));
}

// log1p(u) for u >= 0 (and inf): log(1+u) corrected for the rounding of 1+u.
static inline float fm_log1p_pos(float u) {
	float y = 1.0f + u;
	float c = (u - (y - 1.0f)) / y;
	float r = fm_log_pos(y) + c;
	r = u < 1e-4f ? u * fmaf(-0.5f, u, 1.0f) : r; // series where 1+u keeps few of u's bits
	return u == u && y != (float)INFINITY ? r : u;
}

// expm1(x) in float32: its Taylor series through x^9 below |x| = 0.5 (truncation < 3e-10
// relative), exp(x) - 1 above, where the subtraction loses at most one bit.
static inline float fm_expm1(float x) {
	float p = 1.0f / 362880;
	p = fmaf(p, x, 1.0f / 40320);
	p = fmaf(p, x, 1.0f / 5040);
	p = fmaf(p, x, 1.0f / 720);
	p = fmaf(p, x, 1.0f / 120);
	p = fmaf(p, x, 1.0f / 24);
	p = fmaf(p, x, 1.0f / 6);
	p = fmaf(p, x, 0.5f);
	float small = fmaf(p * x, x, x);
	float big = fm_exp(x) - 1.0f;
	float ax = x < 0 ? -x : x;
	return ax < 0.5f ? small : big;
}

// erf to ~3e-13 absolute in double (then rounded to float32), from the table erfTab that
// elementwise_ops.go builds (piecewise degree-5 Taylor expansions in steps of 1/32): the
// same values as its erfF32.
#define ERF_STEP 32
#define ERF_N (ERF_STEP * 6)
static double erf_tab[ERF_N][6];
static void hpusim_set_erf_tab(const double *t) {
	for (int i = 0; i < ERF_N * 6; i++) erf_tab[i / 6][i % 6] = t[i];
}
static inline float fm_erf(float xf) {
	double x = xf, y = x < 0 ? -x : x;
	double y2 = y * y;
	double small = y * (1.1283791670955126 + y2 * (-0.37612638903183754 + y2 * (0.11283791670955126 +
		y2 * (-0.026866170645131252 + y2 * 0.005223977625442188))));
	int i = (int)(y < 6 ? y * ERF_STEP : 0);
	double t = y - ((double)i + 0.5) / ERF_STEP;
	const double *k = erf_tab[i];
	double mid = k[0] + t * (k[1] + t * (k[2] + t * (k[3] + t * (k[4] + t * k[5]))));
	double r = y < 1.0 / 16 ? small : (y < 6 ? mid : 1.0);
	r = x < 0 ? -r : r;
	return xf != xf ? xf : (float)r;
}

enum {
	FM_EXP, FM_SIGMOID, FM_SILU, FM_SILU_BWD, FM_TANH, FM_GELU, FM_GELU_BWD, FM_GELU_TANH,
	FM_GELU_TANH_BWD, FM_ADD, FM_ADD_ALPHA, FM_MUL, FM_DIV, FM_WHERE, FM_RELU, FM_THRESHOLD_BWD,
	FM_LERP, FM_ADDCDIV, FM_ADDCMUL, FM_SIGMOID_BWD, FM_TANH_BWD, FM_ERF, FM_SOFTPLUS,
	FM_SOFTPLUS_BWD, FM_ELU, FM_ELU_BWD, FM_SQRT,
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

// sqrt with the AVX instruction: sqrtf loops do not vectorize while sqrtf may set errno
// (and cgo does not allow -fno-math-errno). Both round correctly.
__attribute__((target("avx"))) static void fm_sqrt_avx(float *o, const float *a, size_t n) {
	size_t i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_sqrt_ps(_mm256_loadu_ps(a + i)));
	for (; i < n; i++) o[i] = sqrtf(a[i]);
}
static void fm_sqrt(float *o, const float *a, size_t n) {
	if (HPUSIM_AVX()) {
		fm_sqrt_avx(o, a, n);
		return;
	}
	for (size_t i = 0; i < n; i++) o[i] = sqrtf(a[i]);
}
static void CLONES fm_erf_loop(float *o, const float *a, size_t n) { LOOP o[i] = fm_erf(a[i]); }
// softplus and elu: p holds the op's parameters (see ewSoftplus, ewElu).
static void CLONES fm_softplus(float *o, const float *a, const float *p, size_t n) {
	float beta = p[0], th = p[1];
	LOOP {
		float x = a[i], z = x * beta;
		o[i] = z > th ? x : fm_log1p_pos(fm_exp(z)) / beta;
	}
}
static void CLONES fm_softplus_bwd(float *o, const float *g, const float *a, const float *p, size_t n) {
	float beta = p[0], th = p[1];
	LOOP {
		float x = a[i], z = fm_exp(x * beta);
		o[i] = x * beta > th ? g[i] : g[i] * z / (z + 1.0f);
	}
}
static void CLONES fm_elu(float *o, const float *a, const float *p, size_t n) {
	float negcoef = p[0], poscoef = p[1], negipt = p[2];
	LOOP {
		float x = a[i];
		o[i] = x <= 0 ? fm_expm1(x * negipt) * negcoef : x * poscoef;
	}
}
static void CLONES fm_elu_bwd(float *o, const float *g, const float *a, const float *p, size_t n) {
	float negcoef = p[0], poscoef = p[1], negipt = p[2];
	int is_result = p[3] != 0;
	LOOP {
		float x = a[i];
		float neg = is_result ? g[i] * negipt * (x + negcoef) : g[i] * negipt * negcoef * fm_exp(x * negipt);
		o[i] = x > 0 ? g[i] * poscoef : neg;
	}
}

// Philox4x32-10 blocks b0 .. b0+nb-1 of a Stream (see philox.go), 4 words each, one block
// per vector lane.
static void CLONES hpusim_philox(uint32_t *restrict out, uint64_t b0, size_t nb, uint32_t k0, uint32_t k1,
		uint32_t o0, uint32_t o1) {
	for (size_t i = 0; i < nb; i++) {
		uint64_t b = b0 + i;
		uint32_t c0 = (uint32_t)b, c1 = (uint32_t)(b >> 32), c2 = o0, c3 = o1;
		uint32_t a0 = k0, a1 = k1;
		for (int r = 0; r < 10; r++) {
			uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
			uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ a0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ a1;
			c0 = n0;
			c1 = (uint32_t)p1;
			c2 = n2;
			c3 = (uint32_t)p0;
			a0 += 0x9E3779B9u;
			a1 += 0xBB67AE85u;
		}
		out[4 * i] = c0;
		out[4 * i + 1] = c1;
		out[4 * i + 2] = c2;
		out[4 * i + 3] = c3;
	}
}

// The same blocks in AVX2 lanes, 16 at a time (two independent sets of 8 for the
// multipliers' latency): _mm256_mul_epu32 takes the even 32-bit lanes, so each 32x32->64
// product is formed for the even and the odd lanes apart and its halves blended back. The
// words are then transposed to block order. Same bits as the scalar loop (exact integer
// arithmetic); TestPhiloxBlocksAndFastPaths compares them with Stream.Block.
#define PHX_T __attribute__((target("avx2")))
PHX_T static inline void phx_mul(__m256i c, __m256i m, __m256i *hi, __m256i *lo) {
	__m256i pe = _mm256_mul_epu32(c, m), po = _mm256_mul_epu32(_mm256_srli_epi64(c, 32), m);
	*lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
	*hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
}
PHX_T static inline void phx_store(uint32_t *out, __m256i c0, __m256i c1, __m256i c2, __m256i c3) {
	__m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
	__m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
	__m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
	__m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
	_mm256_storeu_si256((__m256i *)out, _mm256_permute2x128_si256(u0, u1, 0x20));
	_mm256_storeu_si256((__m256i *)(out + 8), _mm256_permute2x128_si256(u2, u3, 0x20));
	_mm256_storeu_si256((__m256i *)(out + 16), _mm256_permute2x128_si256(u0, u1, 0x31));
	_mm256_storeu_si256((__m256i *)(out + 24), _mm256_permute2x128_si256(u2, u3, 0x31));
}
// Blocks b0 .. b0+16*ng-1.
PHX_T static void hpusim_philox_avx2(uint32_t *restrict out, uint64_t b0, size_t ng, uint32_t k0, uint32_t k1,
		uint32_t o0, uint32_t o1) {
	const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
	__m256i ka[10], kb[10];
	for (int r = 0; r < 10; r++) {
		ka[r] = _mm256_set1_epi32((int)(k0 + (uint32_t)r * 0x9E3779B9u));
		kb[r] = _mm256_set1_epi32((int)(k1 + (uint32_t)r * 0xBB67AE85u));
	}
	const __m256i vo0 = _mm256_set1_epi32((int)o0), vo1 = _mm256_set1_epi32((int)o1);
	for (size_t g = 0; g < ng; g++) {
		uint32_t lo[16], hi[16];
		for (int i = 0; i < 16; i++) {
			uint64_t b = b0 + 16 * g + (uint64_t)i;
			lo[i] = (uint32_t)b;
			hi[i] = (uint32_t)(b >> 32);
		}
		__m256i a0 = _mm256_loadu_si256((const __m256i *)lo), a1 = _mm256_loadu_si256((const __m256i *)hi);
		__m256i b0v = _mm256_loadu_si256((const __m256i *)(lo + 8)), b1 = _mm256_loadu_si256((const __m256i *)(hi + 8));
		__m256i a2 = vo0, a3 = vo1, b2 = vo0, b3 = vo1;
		for (int r = 0; r < 10; r++) {
			__m256i ah0, al0, ah1, al1, bh0, bl0, bh1, bl1;
			phx_mul(a0, m0, &ah0, &al0);
			phx_mul(b0v, m0, &bh0, &bl0);
			phx_mul(a2, m1, &ah1, &al1);
			phx_mul(b2, m1, &bh1, &bl1);
			a0 = _mm256_xor_si256(_mm256_xor_si256(ah1, a1), ka[r]);
			b0v = _mm256_xor_si256(_mm256_xor_si256(bh1, b1), ka[r]);
			a2 = _mm256_xor_si256(_mm256_xor_si256(ah0, a3), kb[r]);
			b2 = _mm256_xor_si256(_mm256_xor_si256(bh0, b3), kb[r]);
			a1 = al1;
			b1 = bl1;
			a3 = al0;
			b3 = bl0;
		}
		phx_store(out + 64 * g, a0, a1, a2, a3);
		phx_store(out + 64 * g + 32, b0v, b1, b2, b3);
	}
}
static inline int hpusim_philox_vec(void) {
	static int v = -1;
	int x = __atomic_load_n(&v, __ATOMIC_RELAXED);
	if (x < 0) {
		x = HPUSIM_AVX2();
		__atomic_store_n(&v, x, __ATOMIC_RELAXED);
	}
	return x;
}
static void hpusim_philox_blocks(uint32_t *restrict out, uint64_t b0, size_t nb, uint32_t k0, uint32_t k1,
		uint32_t o0, uint32_t o1) {
	size_t ng = hpusim_philox_vec() ? nb / 16 : 0;
	if (ng) hpusim_philox_avx2(out, b0, ng, k0, k1, o0, o1);
	if (16 * ng < nb) hpusim_philox(out + 64 * ng, b0 + 16 * ng, nb - 16 * ng, k0, k1, o0, o1);
}

// Bernoulli and dropout from stream words: u keeps element i when w[i] < thr (thr = q*2^32,
// the exact form of w/2^32 < q); dropout scales in double as the Go definition does.
static void CLONES hpusim_bern_f32(float *restrict o, const uint32_t *restrict w, size_t n, double thr) {
	for (size_t i = 0; i < n; i++) o[i] = (double)w[i] < thr ? 1.0f : 0.0f;
}
static void CLONES hpusim_dropout_f32_ref(float *o, uint8_t *restrict m, const float *x, const uint32_t *restrict w,
		size_t n, double thr, double scale) {
#pragma GCC ivdep
	for (size_t i = 0; i < n; i++) {
		double k = (double)w[i] < thr ? 1.0 : 0.0;
		m[i] = (uint8_t)k;
		o[i] = (float)((double)x[i] * k * scale);
	}
}
// The same in float32 AVX2 lanes. For an integer w, w < thr exactly when w < ceil(thr), one
// unsigned 32-bit compare (kt = ceil(thr) in [1, 2^32-1]; 0 and 2^32 keep none or all).
// x*k*scale in double, rounded once to float, equals (x*k)*scale in float: k is 0 or 1
// and scale a float (rounded so in Dropout), so the double product of two floats is exact
// and both forms round that exact product once (inf*0 NaN and the sign of zero alike).
PHX_T static void hpusim_dropout_f32_avx2(float *o, uint8_t *restrict m, const float *x, const uint32_t *restrict w,
		size_t n, uint32_t kt, float scale) {
	const __m256i sign = _mm256_set1_epi32((int)0x80000000u), kv = _mm256_set1_epi32((int)(kt ^ 0x80000000u));
	const __m256 one = _mm256_set1_ps(1.0f), sc = _mm256_set1_ps(scale);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i wv = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + i)), sign);
		__m256i keep = _mm256_cmpgt_epi32(kv, wv); // w < kt, unsigned
		__m256 k = _mm256_and_ps(_mm256_castsi256_ps(keep), one);
		_mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), k), sc));
		__m256i k32 = _mm256_srli_epi32(keep, 31);                    // 8 x 0/1 in 32 bits
		__m128i k16 = _mm_packus_epi32(_mm256_castsi256_si128(k32), _mm256_extracti128_si256(k32, 1));
		_mm_storel_epi64((__m128i *)(m + i), _mm_packus_epi16(k16, k16));
	}
	for (; i < n; i++) {
		float k = w[i] < kt ? 1.0f : 0.0f;
		m[i] = (uint8_t)k;
		o[i] = x[i] * k * scale; // (x*k)*scale, each rounded (fp-contract=off)
	}
}
static void hpusim_dropout_f32(float *o, uint8_t *restrict m, const float *x, const uint32_t *restrict w,
		size_t n, double thr, double scale) {
	if (hpusim_philox_vec() && thr > 0 && thr < 0x1p32 && (double)(float)scale == scale) {
		hpusim_dropout_f32_avx2(o, m, x, w, n, (uint32_t)ceil(thr), (float)scale);
		return;
	}
	hpusim_dropout_f32_ref(o, m, x, w, n, thr, scale);
}

// bool/uint8 (mask = 1 or 0xff) to float32, for where and masked_fill conditions.
static void CLONES hpusim_u8_to_f32(float *restrict o, const uint8_t *restrict a, size_t n, uint8_t mask) {
	for (size_t i = 0; i < n; i++) o[i] = (float)(a[i] & mask);
}

// hpusim_f32 runs op over n contiguous float32 elements; one C entry point for all ops.
static void hpusim_f32(int op, float *o, const float *a, const float *b, const float *c, float p0,
		const float *p, size_t n) {
	switch (op) {
	case FM_ERF: fm_erf_loop(o, a, n); break;
	case FM_SQRT: fm_sqrt(o, a, n); break;
	case FM_SOFTPLUS: fm_softplus(o, a, p, n); break;
	case FM_SOFTPLUS_BWD: fm_softplus_bwd(o, a, b, p, n); break;
	case FM_ELU: fm_elu(o, a, p, n); break;
	case FM_ELU_BWD: fm_elu_bwd(o, a, b, p, n); break;
	case FM_EXP: fm_exp_loop(o, a, n); break;
	case FM_SIGMOID: fm_sigmoid(o, a, n); break;
	case FM_SILU: fm_silu(o, a, n); break;
	case FM_SILU_BWD: fm_silu_bwd(o, a, b, n); break;
	case FM_TANH: fm_tanh_loop(o, a, n); break;
	// gelu: the AVX2 lanes of gelu_avx2.h for the forms they are on for
	case FM_GELU: if (hpusim_gelu_avx2_ok() & 2) hpusim_gelu_avx2(o, a, n, 0); else fm_gelu(o, a, n); break;
	case FM_GELU_BWD: if (hpusim_gelu_avx2_ok() & 2) hpusim_gelu_bwd_avx2(o, a, b, n, 0); else fm_gelu_bwd(o, a, b, n); break;
	case FM_GELU_TANH: if (hpusim_gelu_avx2_ok() & 1) hpusim_gelu_avx2(o, a, n, 1); else fm_gelu_tanh(o, a, n); break;
	case FM_GELU_TANH_BWD: if (hpusim_gelu_avx2_ok() & 1) hpusim_gelu_bwd_avx2(o, a, b, n, 1); else fm_gelu_tanh_bwd(o, a, b, n); break;
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
// hpusim_f32_rows runs op over rows blocks of n elements; st holds each operand's row
// stride in bytes (output, a, b, c).
static void hpusim_f32_rows(int op, float *o, const float *a, const float *b, const float *c, float p0,
		const float *p, size_t n, size_t rows, const int64_t *st) {
	for (size_t r = 0; r < rows; r++) {
		hpusim_f32(op, (float *)((char *)o + (int64_t)r * st[0]), a ? (const float *)((const char *)a + (int64_t)r * st[1]) : 0,
			b ? (const float *)((const char *)b + (int64_t)r * st[2]) : 0, c ? (const float *)((const char *)c + (int64_t)r * st[3]) : 0,
			p0, p, n);
	}
}

// hpusim_mixed runs op over n elements whose operands are float32 or bfloat16 runs,
// broadcast float32 scalars or bool/uint8 masks (kind: 0 float32, 1 bfloat16, 2 scalar,
// 3 bool, 4 uint8; the output 0 or 1), through float32 chunks: bfloat16 widened exactly,
// masks as u8_to_f32 makes them, the float32 result rounded to bfloat16 as
// hpusim_f32_to_bf16 does (nearest even, NaN 0x7fc0). One call per run instead of a
// conversion call per operand and chunk.
#define MIX_CH 512
static inline const float *mix_in(const void *p, int kind, size_t lo, size_t m, float *buf) {
	if (!p) return 0;
	switch (kind) {
	case 0: return (const float *)p + lo;
	case 1: {
		const uint16_t *h = (const uint16_t *)p + lo;
		for (size_t i = 0; i < m; i++) { uint32_t u = (uint32_t)h[i] << 16; memcpy(&buf[i], &u, 4); }
		return buf;
	}
	case 2: {
		float v = *(const float *)p;
		for (size_t i = 0; i < m; i++) buf[i] = v;
		return buf;
	}
	default: {
		const uint8_t *b = (const uint8_t *)p + lo;
		uint8_t mask = kind == 3 ? 1 : 0xff;
		for (size_t i = 0; i < m; i++) buf[i] = (float)(b[i] & mask);
		return buf;
	}
	}
}

static void CLONES hpusim_mixed(int op, void *o, int ok, const void *a, int ak, const void *b, int bk, const void *c, int ck,
		float p0, const float *p, size_t n) {
	float ab[MIX_CH], bb[MIX_CH], cb[MIX_CH], ob[MIX_CH];
	for (size_t lo = 0; lo < n; lo += MIX_CH) {
		size_t m = n - lo < MIX_CH ? n - lo : MIX_CH;
		const float *pa = mix_in(a, ak, lo, m, ab), *pb = mix_in(b, bk, lo, m, bb), *pc = mix_in(c, ck, lo, m, cb);
		float *po = ok == 0 ? (float *)o + lo : ob;
		hpusim_f32(op, po, pa, pb, pc, p0, p, m);
		if (ok == 1) {
			uint16_t *h = (uint16_t *)o + lo;
			for (size_t i = 0; i < m; i++) {
				uint32_t x;
				memcpy(&x, &po[i], 4);
				uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
				h[i] = (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)r;
			}
		}
	}
}
// hpusim_f32_v is hpusim_f32 with the parameters by value: a Go array whose address
// goes to C escapes to the heap, an allocation per call.
static void hpusim_f32_v(int op, float *o, const float *a, const float *b, const float *c, float p0,
		float q0, float q1, float q2, float q3, size_t n) {
	const float p[4] = {q0, q1, q2, q3};
	hpusim_f32(op, o, a, b, c, p0, p, n);
}
*/
import "C"

import (
	"sync"
	"unsafe"
)

// fmPick chooses an op's C kernel and its scalar parameters for a call's p: most ops have
// one kernel, gelu and add two (by mode / alpha), elu derives its coefficients.
type fmPick func(p []float64) (op C.int, p0 float32, pf [4]C.float)

func fmFixed(op C.int) fmPick {
	return func(p []float64) (C.int, float32, [4]C.float) { return op, 0, [4]C.float{} }
}

// fmP0 passes p[0] (alpha, threshold, value) as the kernel's scalar.
func fmP0(op C.int) fmPick {
	return func(p []float64) (C.int, float32, [4]C.float) { return op, float32(p[0]), [4]C.float{} }
}

// fmParams passes p[0..3] as the kernel's parameter array.
func fmParams(op C.int) fmPick {
	return func(p []float64) (C.int, float32, [4]C.float) {
		var pf [4]C.float
		for i := range min(len(p), 4) {
			pf[i] = C.float(p[i])
		}
		return op, 0, pf
	}
}

func fmPtr(p unsafe.Pointer) *C.float { return (*C.float)(p) }

// fmInstall makes op's float32 implementations the C kernel chosen by pick: F32 for one
// run of elements, F32Rows for a block of rows in one call. The pure Go versions
// (elementwise_ops.go) remain the nocgo build's implementation.
func fmInstall(name string, pick fmPick) {
	op := EWOps[name]
	nin := op.NIn
	op.F32 = func(o []float32, in [][]float32, p []float64) {
		n := len(o)
		if n == 0 {
			return
		}
		var ptr [3]*C.float
		for j := 0; j < nin; j++ {
			ptr[j] = fmPtr(unsafe.Pointer(unsafe.SliceData(in[j][:n])))
		}
		id, p0, pf := pick(p)
		C.hpusim_f32_v(id, fmPtr(unsafe.Pointer(unsafe.SliceData(o))), ptr[0], ptr[1], ptr[2], C.float(p0),
			pf[0], pf[1], pf[2], pf[3], C.size_t(n))
	}
	op.F32Mixed = func(ptrs []unsafe.Pointer, kinds []int32, n int64, p []float64) {
		var ptr [3]unsafe.Pointer
		var k [3]C.int
		for j := 0; j < nin; j++ {
			ptr[j], k[j] = ptrs[j+1], C.int(kinds[j+1])
		}
		id, p0, pf := pick(p)
		C.hpusim_mixed(id, ptrs[0], C.int(kinds[0]), ptr[0], k[0], ptr[1], k[1], ptr[2], k[2], C.float(p0), &pf[0], C.size_t(n))
	}
	op.F32Rows = func(ptrs []unsafe.Pointer, rs []int64, rows, n int64, p []float64) {
		var ptr [3]*C.float
		var st [4]C.int64_t
		st[0] = C.int64_t(rs[0])
		for j := 0; j < nin; j++ {
			ptr[j] = fmPtr(ptrs[j+1])
			st[j+1] = C.int64_t(rs[j+1])
		}
		id, p0, pf := pick(p)
		C.hpusim_f32_rows(id, fmPtr(ptrs[0]), ptr[0], ptr[1], ptr[2], C.float(p0), &pf[0], C.size_t(n),
			C.size_t(rows), &st[0])
	}
}

// installFast replaces the float32 implementations of the ops the C code covers.
func installFast() {
	for name, op := range map[string]C.int{
		"exp": C.FM_EXP, "sigmoid": C.FM_SIGMOID, "silu": C.FM_SILU, "silu_backward": C.FM_SILU_BWD,
		"tanh": C.FM_TANH, "mul": C.FM_MUL, "div": C.FM_DIV, "where": C.FM_WHERE, "relu": C.FM_RELU,
		"lerp": C.FM_LERP, "sigmoid_backward": C.FM_SIGMOID_BWD, "tanh_backward": C.FM_TANH_BWD,
		"sqrt": C.FM_SQRT,
	} {
		fmInstall(name, fmFixed(op))
	}
	for name, op := range map[string]C.int{
		"threshold_backward": C.FM_THRESHOLD_BWD, "addcdiv": C.FM_ADDCDIV, "addcmul": C.FM_ADDCMUL,
	} {
		fmInstall(name, fmP0(op))
	}
	for name, op := range map[string]C.int{"softplus": C.FM_SOFTPLUS, "softplus_backward": C.FM_SOFTPLUS_BWD} {
		fmInstall(name, fmParams(op))
	}
	fmInstall("gelu", func(p []float64) (C.int, float32, [4]C.float) {
		if p[0] != 0 {
			return C.FM_GELU_TANH, 0, [4]C.float{}
		}
		return C.FM_GELU, 0, [4]C.float{}
	})
	fmInstall("gelu_backward", func(p []float64) (C.int, float32, [4]C.float) {
		if p[0] != 0 {
			return C.FM_GELU_TANH_BWD, 0, [4]C.float{}
		}
		return C.FM_GELU_BWD, 0, [4]C.float{}
	})
	fmInstall("add", func(p []float64) (C.int, float32, [4]C.float) {
		if float32(p[0]) == 1 {
			return C.FM_ADD, 0, [4]C.float{}
		}
		return C.FM_ADD_ALPHA, float32(p[0]), [4]C.float{}
	})
	// elu's coefficients as ewElu derives them: (alpha*scale, scale, input_scale, is_result)
	elu := func(op C.int) fmPick {
		return func(p []float64) (C.int, float32, [4]C.float) {
			return op, 0, [4]C.float{C.float(float32(p[0] * p[1])), C.float(p[1]), C.float(p[2]), C.float(p[3])}
		}
	}
	fmInstall("elu", elu(C.FM_ELU))
	fmInstall("elu_backward", elu(C.FM_ELU_BWD))
	// erfTab is built by a later init: copy it to C on first use
	var erfOnce sync.Once
	fmInstall("erf", func(p []float64) (C.int, float32, [4]C.float) {
		erfOnce.Do(func() { C.hpusim_set_erf_tab((*C.double)(unsafe.Pointer(&erfTab[0][0]))) })
		return C.FM_ERF, 0, [4]C.float{}
	})
}

// philoxBlocks writes the words of blocks b0, b0+1, ... of s into out (4 per block).
func philoxBlocks(out []uint32, s Stream, b0 uint64) {
	if len(out) < 4 {
		return
	}
	C.hpusim_philox_blocks((*C.uint32_t)(unsafe.Pointer(unsafe.SliceData(out))), C.uint64_t(b0), C.size_t(len(out)/4),
		C.uint32_t(uint32(s.Seed)), C.uint32_t(uint32(s.Seed>>32)), C.uint32_t(uint32(s.Offset)),
		C.uint32_t(uint32(s.Offset>>32)))
}

func bernWords(o []float32, w []uint32, thr float64) {
	if len(o) > 0 {
		C.hpusim_bern_f32((*C.float)(unsafe.Pointer(&o[0])), (*C.uint32_t)(unsafe.Pointer(&w[0])), C.size_t(len(o)),
			C.double(thr))
	}
}

func dropoutWords(o []float32, m []uint8, x []float32, w []uint32, thr, scale float64) {
	if len(o) > 0 {
		C.hpusim_dropout_f32((*C.float)(unsafe.Pointer(&o[0])), (*C.uint8_t)(unsafe.Pointer(&m[0])),
			(*C.float)(unsafe.Pointer(&x[0])), (*C.uint32_t)(unsafe.Pointer(&w[0])), C.size_t(len(o)),
			C.double(thr), C.double(scale))
	}
}

// u8ToF32 converts bools (bm = 1) or uint8s (bm = 0xff) to float32.
func u8ToF32(o []float32, a []uint8, bm uint8) {
	if len(o) < 64 {
		for i, v := range a[:len(o)] {
			o[i] = float32(v & bm)
		}
		return
	}
	C.hpusim_u8_to_f32((*C.float)(unsafe.Pointer(&o[0])), (*C.uint8_t)(unsafe.Pointer(&a[0])), C.size_t(len(o)),
		C.uint8_t(bm))
}

// geluAVX2 sets the GELU forms computed in gelu_avx2.h's AVX2 lanes (bit 0 tanh, bit 1 erf;
// none without AVX2+FMA or under HPUSIM_ISA=generic) and returns the previous setting.
func geluAVX2(forms int) int { return int(C.hpusim_gelu_avx2_use(C.int(forms))) }
