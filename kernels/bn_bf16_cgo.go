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

#define BNV_TARGET __attribute__((target("avx512f")))

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

BNV_TARGET static double bnv_sum(const uint16_t *x, int64_t ns, int64_t N, int64_t S, double mean, int sq) {
	__m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), mv = _mm512_set1_pd(mean);
	double t0 = 0; // lane 0 of a0 for the row tails, kept apart and put back in order
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * ns;
		int64_t i = 0;
		if (sq) {
			for (; i + 16 <= S; i += 16) {
				__m512d lo, hi;
				bnv_load16(xs + i, &lo, &hi);
				lo = _mm512_sub_pd(lo, mv);
				hi = _mm512_sub_pd(hi, mv);
				a0 = _mm512_add_pd(a0, _mm512_mul_pd(lo, lo));
				a1 = _mm512_add_pd(a1, _mm512_mul_pd(hi, hi));
			}
			if (i < S) {
				t0 = _mm512_cvtsd_f64(a0);
				for (; i < S; i++) { double d = bnv_d(xs[i]) - mean; t0 += d * d; }
				a0 = _mm512_mask_mov_pd(a0, 1, _mm512_set1_pd(t0));
			}
		} else {
			for (; i + 16 <= S; i += 16) {
				__m512d lo, hi;
				bnv_load16(xs + i, &lo, &hi);
				a0 = _mm512_add_pd(a0, lo);
				a1 = _mm512_add_pd(a1, hi);
			}
			if (i < S) {
				t0 = _mm512_cvtsd_f64(a0);
				for (; i < S; i++) t0 += bnv_d(xs[i]);
				a0 = _mm512_mask_mov_pd(a0, 1, _mm512_set1_pd(t0));
			}
		}
	}
	return bnv_total(a0, a1);
}

BNV_TARGET static void bnv_apply(const uint16_t *x, int64_t xns, uint16_t *o, int64_t ons, int64_t N, int64_t S, double sd,
                                 double hd) {
	__m512d sv = _mm512_set1_pd(sd), hv = _mm512_set1_pd(hd);
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * xns;
		uint16_t *os = o + n * ons;
		int64_t i = 0;
		for (; i + 16 <= S; i += 16) {
			__m512d lo, hi;
			bnv_load16(xs + i, &lo, &hi);
			bnv_store16(os + i, _mm512_add_pd(_mm512_mul_pd(lo, sv), hv), _mm512_add_pd(_mm512_mul_pd(hi, sv), hv));
		}
		for (; i < S; i++) os[i] = bnv_h((float)(bnv_d(xs[i]) * sd + hd));
	}
}

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

BNV_TARGET static void bnv_bwd_apply(const uint16_t *x, int64_t xns, const uint16_t *g, int64_t gns, uint16_t *o, int64_t ons,
                                     int64_t N, int64_t S, double mean, double gm, double k, double invstd, double wc,
                                     int training) {
	__m512d mv = _mm512_set1_pd(mean), gmv = _mm512_set1_pd(gm), kv = _mm512_set1_pd(k), iv = _mm512_set1_pd(invstd),
	        wv = _mm512_set1_pd(wc);
	for (int64_t n = 0; n < N; n++) {
		const uint16_t *xs = x + n * xns, *gs = g + n * gns;
		uint16_t *os = o + n * ons;
		int64_t i = 0;
		for (; i + 16 <= S; i += 16) {
			__m512d gl, gh, xl, xh;
			bnv_load16(gs + i, &gl, &gh);
			if (training) {
				bnv_load16(xs + i, &xl, &xh);
				gl = _mm512_sub_pd(_mm512_sub_pd(gl, gmv), _mm512_mul_pd(_mm512_sub_pd(xl, mv), kv));
				gh = _mm512_sub_pd(_mm512_sub_pd(gh, gmv), _mm512_mul_pd(_mm512_sub_pd(xh, mv), kv));
			}
			bnv_store16(os + i, _mm512_mul_pd(_mm512_mul_pd(gl, iv), wv), _mm512_mul_pd(_mm512_mul_pd(gh, iv), wv));
		}
		for (; i < S; i++) {
			if (training)
				os[i] = bnv_h((float)((bnv_d(gs[i]) - gm - (bnv_d(xs[i]) - mean) * k) * invstd * wc));
			else
				os[i] = bnv_h((float)(bnv_d(gs[i]) * invstd * wc));
		}
	}
}
*/
import "C"

import "unsafe"

// bnBF16Vec selects the AVX-512 bfloat16 batch-norm kernels (the CPU has AVX-512F).
var bnBF16Vec = f32DotCPU

func bnSumBF16V(x unsafe.Pointer, ns, N, S int64, mean float64, sq bool) float64 {
	q := C.int(0)
	if sq {
		q = 1
	}
	return float64(C.bnv_sum((*C.uint16_t)(x), C.int64_t(ns), C.int64_t(N), C.int64_t(S), C.double(mean), q))
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
