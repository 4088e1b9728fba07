//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

// The bfloat16 batch-norm channel kernels of layernorm_cgo.go (hpusim_bn_*_bf16) in
// AVX-512: the same float64 operations in the same order (16 lanes as two 8-lane
// accumulators, row tails into lane 0 of the first, the same total), so the results are
// bit for bit those of the portable code; only the widening of bfloat16 and the rounding
// back (float32, then bfloat16 to nearest even, NaN 0x7fc0) run 16 lanes at a time
// instead of element by element, which the compiler left scalar (0.7 ms for a
// [64,16,28,28] forward per core against 0.3 ms on CPU).
#pragma GCC optimize("fp-contract=off", "no-trapping-math")

#define BNV_TARGET __attribute__((target("avx512f,fma")))

// 16 bfloat16 at p widened to float32, then to two float64 vectors (exact).
BNV_TARGET static inline void bnv_load16(const uint16_t *p, __m512d *lo, __m512d *hi) {
	__m512 f = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
	*lo = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
	*hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
}

// Two float64 vectors rounded to float32 (nearest even), then to bfloat16 as f32_bf16 does.
BNV_TARGET static inline void bnv_store16(uint16_t *p, __m512d lo, __m512d hi) {
	__m512 f = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo))),
	                                               _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1));
	__m512i x = _mm512_castps_si512(f);
	__m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
	__m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), odd), 16);
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
	r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
	_mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}

static inline double bnv_d(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint16_t bnv_h(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
	return (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)r;
}

// total16 of layernorm_cgo.go on two accumulators.
BNV_TARGET static double bnv_total(__m512d a0, __m512d a1) {
	double t_[8], u_[8];
	_mm512_storeu_pd(t_, a0);
	_mm512_storeu_pd(u_, a1);
	double r_[4];
	for (int j_ = 0; j_ < 4; j_++) r_[j_] = (t_[j_] + t_[4 + j_]) + (u_[j_] + u_[4 + j_]);
	return (r_[0] + r_[1]) + (r_[2] + r_[3]);
}

// The elementwise math runs in float32 (torch's CPU kernel computes bfloat16 batch norm in
// float32 too): the float64 lanes above moved half as many elements per instruction and
// made these kernels 0.45-0.65x of CPU's. Statistics are summed per row in float32 lanes
// (two accumulators), each row's partial added into float64; a row whose float32 partial
// overflows (values near bfloat16's range limit) is summed again in float64.

// 16 bfloat16 at p widened to float32 (exact).
BNV_TARGET static inline __m512 bnv_w16(const uint16_t *p) {
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

// 16 float32 rounded to bfloat16 as f32_bf16 does (nearest even, NaN 0x7fc0).
BNV_TARGET static inline void bnv_st16(uint16_t *p, __m512 f) {
	__m512i x = _mm512_castps_si512(f);
	__m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
	__m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), odd), 16);
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
	r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
	_mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}

static inline int bnv_finite(float v) { return v - v == 0; }

// *mean and *ss (the sum of squared deviations from it) of a channel's N rows of S, in one
// pass: sums of d = x - K and d*d around the shift K (the channel's first element), then
// mean = K + sum(d)/n and ss = sum(d*d) - sum(d)^2/n, exact algebra for any K; K near the
// mean keeps the subtraction from cancelling.
BNV_TARGET static void bnv_moments(const uint16_t *x, int64_t ns, int64_t N, int64_t S, double *mean, double *ss) {
	const float K = (float)bnv_d(x[0]);
	const __m512 kv = _mm512_set1_ps(K);
	double s = 0, q = 0;
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * ns;
		__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
		int64_t i = 0;
		for (; i + 32 <= S; i += 32) {
			__m512 d0 = _mm512_sub_ps(bnv_w16(xs + i), kv), d1 = _mm512_sub_ps(bnv_w16(xs + i + 16), kv);
			a0 = _mm512_add_ps(a0, d0);
			a1 = _mm512_add_ps(a1, d1);
			b0 = _mm512_fmadd_ps(d0, d0, b0);
			b1 = _mm512_fmadd_ps(d1, d1, b1);
		}
		for (; i + 16 <= S; i += 16) {
			__m512 d0 = _mm512_sub_ps(bnv_w16(xs + i), kv);
			a0 = _mm512_add_ps(a0, d0);
			b0 = _mm512_fmadd_ps(d0, d0, b0);
		}
		float rs = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)), rq = _mm512_reduce_add_ps(_mm512_add_ps(b0, b1));
		double ds = rs, dq = rq;
		if (!bnv_finite(rs) || !bnv_finite(rq)) {
			ds = dq = 0;
			i = 0;
		}
		for (; i < S; i++) {
			double d = bnv_d(xs[i]) - (double)K;
			ds += d;
			dq += d * d;
		}
		s += ds;
		q += dq;
	}
	const double cnt = (double)(N * S), md = s / cnt;
	*mean = (double)K + md;
	double v = q - s * md;
	*ss = v > 0 || v != v ? v : 0;
}

// o = x*sd + hd (one float32 FMA; sd and hd are float32 values), rounded to bfloat16.
BNV_TARGET static void bnv_apply(const uint16_t *x, int64_t xns, uint16_t *o, int64_t ons, int64_t N, int64_t S, double sd,
                                 double hd) {
	const float sf = (float)sd, hf = (float)hd;
	const __m512 sv = _mm512_set1_ps(sf), hv = _mm512_set1_ps(hf);
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * xns;
		uint16_t *os = o + n * ons;
		int64_t i = 0;
		for (; i + 16 <= S; i += 16) bnv_st16(os + i, _mm512_fmadd_ps(bnv_w16(xs + i), sv, hv));
		for (; i < S; i++) os[i] = bnv_h(__builtin_fmaf((float)bnv_d(xs[i]), sf, hf));
	}
}

// The sums of g and of (x - mean)*g: float64 lanes, as before.
BNV_TARGET static void bnv_bwd_sums(const uint16_t *x, int64_t xns, const uint16_t *g, int64_t gns, int64_t N, int64_t S,
                                    double mean, double *sum, double *dotp) {
	__m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd(), d0 = _mm512_setzero_pd(), d1 = _mm512_setzero_pd();
	__m512d mv = _mm512_set1_pd(mean);
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * xns, *gs = g + n * gns;
		int64_t i = 0;
		for (; i + 16 <= S; i += 16) {
			__m512d gl, gh, xl, xh;
			bnv_load16(gs + i, &gl, &gh);
			bnv_load16(xs + i, &xl, &xh);
			s0 = _mm512_add_pd(s0, gl);
			s1 = _mm512_add_pd(s1, gh);
			d0 = _mm512_add_pd(d0, _mm512_mul_pd(_mm512_sub_pd(xl, mv), gl));
			d1 = _mm512_add_pd(d1, _mm512_mul_pd(_mm512_sub_pd(xh, mv), gh));
		}
		if (i < S) {
			double ts = _mm512_cvtsd_f64(s0), td = _mm512_cvtsd_f64(d0);
			for (; i < S; i++) {
				double gv = bnv_d(gs[i]);
				ts += gv;
				td += (bnv_d(xs[i]) - mean) * gv;
			}
			s0 = _mm512_mask_mov_pd(s0, 1, _mm512_set1_pd(ts));
			d0 = _mm512_mask_mov_pd(d0, 1, _mm512_set1_pd(td));
		}
	}
	*sum = bnv_total(s0, s1);
	*dotp = bnv_total(d0, d1);
}

// o = ((g - gm) - (x - mean)*k) * (invstd*wc) in training, g * (invstd*wc) otherwise, in
// float32, rounded to bfloat16.
BNV_TARGET static void bnv_bwd_apply(const uint16_t *x, int64_t xns, const uint16_t *g, int64_t gns, uint16_t *o, int64_t ons,
                                     int64_t N, int64_t S, double mean, double gm, double k, double invstd, double wc,
                                     int training) {
	const float mf = (float)mean, gmf = (float)gm, kf = (float)k, iwf = (float)(invstd * wc);
	const __m512 mv = _mm512_set1_ps(mf), gmv = _mm512_set1_ps(gmf), kv = _mm512_set1_ps(kf), iv = _mm512_set1_ps(iwf);
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * xns, *gs = g + n * gns;
		uint16_t *os = o + n * ons;
		int64_t i = 0;
		if (training) {
			__mmask16 bad = 0; // lanes whose float32 value is not finite: the row again in float64
			for (; i + 16 <= S; i += 16) {
				__m512 t = _mm512_fnmadd_ps(_mm512_sub_ps(bnv_w16(xs + i), mv), kv, _mm512_sub_ps(bnv_w16(gs + i), gmv));
				t = _mm512_mul_ps(t, iv);
				bad |= _mm512_cmp_ps_mask(_mm512_sub_ps(t, t), _mm512_setzero_ps(), _CMP_NEQ_UQ);
				bnv_st16(os + i, t);
			}
			if (bad) i = 0;
			for (; i < S; i++) {
				float t = __builtin_fmaf(-((float)bnv_d(xs[i]) - mf), kf, (float)bnv_d(gs[i]) - gmf) * iwf;
				if (bad || !bnv_finite(t)) t = (float)((bnv_d(gs[i]) - gm - (bnv_d(xs[i]) - mean) * k) * invstd * wc);
				os[i] = bnv_h(t);
			}
		} else {
			for (; i + 16 <= S; i += 16) bnv_st16(os + i, _mm512_mul_ps(bnv_w16(gs + i), iv));
			for (; i < S; i++) os[i] = bnv_h((float)bnv_d(gs[i]) * iwf);
		}
	}
}
*/
import "C"

import "unsafe"

// bnBF16Vec selects the AVX-512 bfloat16 batch-norm kernels (the CPU has AVX-512F).
var bnBF16Vec = f32DotCPU

// bnMomentsBF16V is bnv_moments: a channel's mean and sum of squared deviations.
func bnMomentsBF16V(x unsafe.Pointer, ns, N, S int64) (mean, ss float64) {
	var m, q C.double
	C.bnv_moments((*C.uint16_t)(x), C.int64_t(ns), C.int64_t(N), C.int64_t(S), &m, &q)
	return float64(m), float64(q)
}

func bnApplyBF16V(x unsafe.Pointer, xns int64, o unsafe.Pointer, ons, N, S int64, sd, hd float64) {
	C.bnv_apply((*C.uint16_t)(x), C.int64_t(xns), (*C.uint16_t)(o), C.int64_t(ons), C.int64_t(N), C.int64_t(S), C.double(sd),
		C.double(hd))
}

func bnBwdSumsBF16V(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns, N, S int64, mean float64) (float64, float64) {
	var sum, dotp C.double
	C.bnv_bwd_sums((*C.uint16_t)(x), C.int64_t(xns), (*C.uint16_t)(g), C.int64_t(gns), C.int64_t(N), C.int64_t(S),
		C.double(mean), &sum, &dotp)
	return float64(sum), float64(dotp)
}

func bnBwdApplyBF16V(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns int64, o unsafe.Pointer, ons, N, S int64,
	mean, gm, k, invstd, wc float64, training bool) {
	t := C.int(0)
	if training {
		t = 1
	}
	C.bnv_bwd_apply((*C.uint16_t)(x), C.int64_t(xns), (*C.uint16_t)(g), C.int64_t(gns), (*C.uint16_t)(o), C.int64_t(ons),
		C.int64_t(N), C.int64_t(S), C.double(mean), C.double(gm), C.double(k), C.double(invstd), C.double(wc), t)
}
