//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <immintrin.h>
#include "isa.h"

// float32 layer norm rows with AVX2 and FMA (explicit intrinsics, picked at run time; the
// portable rows in layernorm_cgo.go otherwise). Accuracy, not torch's bits, is the aim:
//   - moments in float64, one pass over the row shifted by its first element (the
//     cancellation in sum(d^2) - sum(d)^2/D is then that of the row's own spread), rstd
//     from the float64 variance rounded once;
//   - the input gradient from sum(dy*w) and sum(dy*w*(x - mean)) (no cancellation against
//     mean * sum(dy*w) as in torch's formulation);
//   - the weight and bias gradients per block of rows in float32 lanes, the blocks summed in
//     float64 in block order: the same bits for any number of workers.

#define LNT __attribute__((target("avx2,fma")))

static int hpusim_ln_avx2_ok(void) {
	return HPUSIM_AVX2() && HPUSIM_CPU_HAS(HPUSIM_ISA_LEVEL_AVX2, "fma");
}

LNT static inline __m256i ln_mask(int64_t r) {
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

LNT static inline double ln_hsum_pd(__m256d v) {
	__m128d lo = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
	return _mm_cvtsd_f64(_mm_add_sd(lo, _mm_unpackhi_pd(lo, lo)));
}

LNT static inline float ln_hsum_ps(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// mean and biased variance of one row in float64.
LNT static inline void ln_row_moments(const float *x, int64_t D, double *mean, double *var) {
	const double k = x[0];
	const __m256d kv = _mm256_set1_pd(k);
	__m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
	int64_t j = 0;
	for (; j + 16 <= D; j += 16) {
		__m256d a0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + j)), kv);
		__m256d a1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + j + 4)), kv);
		__m256d a2 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + j + 8)), kv);
		__m256d a3 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + j + 12)), kv);
		s0 = _mm256_add_pd(s0, a0);
		s1 = _mm256_add_pd(s1, a1);
		s2 = _mm256_add_pd(s2, a2);
		s3 = _mm256_add_pd(s3, a3);
		q0 = _mm256_fmadd_pd(a0, a0, q0);
		q1 = _mm256_fmadd_pd(a1, a1, q1);
		q2 = _mm256_fmadd_pd(a2, a2, q2);
		q3 = _mm256_fmadd_pd(a3, a3, q3);
	}
	for (; j + 4 <= D; j += 4) {
		__m256d a0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + j)), kv);
		s0 = _mm256_add_pd(s0, a0);
		q0 = _mm256_fmadd_pd(a0, a0, q0);
	}
	double s = ln_hsum_pd(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
	double q = ln_hsum_pd(_mm256_add_pd(_mm256_add_pd(q0, q1), _mm256_add_pd(q2, q3)));
	for (; j < D; j++) {
		double d = (double)x[j] - k;
		s += d;
		q += d * d;
	}
	double d = s / (double)D;
	double v = q / (double)D - d * d;
	*mean = k + d;
	*var = v > 0 ? v : 0;
}

// rows of out = (x - mean) * rstd * g + b (g, b NULL: 1, 0); mean and rstd per row.
LNT static void hpusim_ln_fwd_avx2(const float *x, int64_t xs, float *out, int64_t os, int64_t rows, int64_t D,
                                    const float *g, const float *b, double eps, float *mean, float *rstd) {
	const int64_t r8 = D & 7;
	const __m256i tm = ln_mask(r8);
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * xs;
		float *o = out + r * os;
		double md, vd;
		ln_row_moments(xr, D, &md, &vd);
		float m = (float)md, rs = (float)(1.0 / sqrt(vd + eps));
		mean[r] = m;
		rstd[r] = rs;
		const __m256 mv = _mm256_set1_ps(m), rv = _mm256_set1_ps(rs);
		int64_t j = 0;
		if (g && b) {
			for (; j + 8 <= D; j += 8) {
				__m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), rv);
				_mm256_storeu_ps(o + j, _mm256_fmadd_ps(t, _mm256_loadu_ps(g + j), _mm256_loadu_ps(b + j)));
			}
			if (r8) {
				__m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(xr + j, tm), mv), rv);
				_mm256_maskstore_ps(o + j, tm, _mm256_fmadd_ps(t, _mm256_maskload_ps(g + j, tm), _mm256_maskload_ps(b + j, tm)));
			}
		} else if (g) {
			for (; j + 8 <= D; j += 8) {
				__m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), rv);
				_mm256_storeu_ps(o + j, _mm256_mul_ps(t, _mm256_loadu_ps(g + j)));
			}
			if (r8) {
				__m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(xr + j, tm), mv), rv);
				_mm256_maskstore_ps(o + j, tm, _mm256_mul_ps(t, _mm256_maskload_ps(g + j, tm)));
			}
		} else {
			const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
			for (; j + 8 <= D; j += 8) {
				__m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), rv);
				__m256 bb = b ? _mm256_loadu_ps(b + j) : zero;
				_mm256_storeu_ps(o + j, _mm256_fmadd_ps(t, one, bb));
			}
			if (r8) {
				__m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(xr + j, tm), mv), rv);
				__m256 bb = b ? _mm256_maskload_ps(b + j, tm) : zero;
				_mm256_maskstore_ps(o + j, tm, _mm256_fmadd_ps(t, one, bb));
			}
		}
	}
}

// Backward over rows: gin (NULL: none) = rstd * (u - sum(u)/D - (x - mean) * rstd^2 * sum(u*(x - mean))/D)
// with u = dy * g (g NULL: dy); pdw, pdb (NULL: none) accumulate dy * (x - mean) * rstd and dy
// over the rows, starting from zero.
LNT static void hpusim_ln_bwd_avx2(const float *dy, int64_t dys, const float *x, int64_t xs, float *gin, int64_t gs,
                                    int64_t rows, int64_t D, const float *g, const float *mu, const float *rs,
                                    float *pdw, float *pdb) {
	const int64_t r8 = D & 7, D8 = D - r8;
	const __m256i tm = ln_mask(r8);
	const __m256 one = _mm256_set1_ps(1.0f);
	if (pdw) {
		memset(pdw, 0, D * sizeof(float));
		memset(pdb, 0, D * sizeof(float));
	}
#define LN_LOADG(j, msk) (g ? (msk ? _mm256_maskload_ps(g + (j), tm) : _mm256_loadu_ps(g + (j))) : one)
	for (int64_t r = 0; r < rows; r++) {
		const float *dyr = dy + r * dys, *xr = x + r * xs;
		const float a = rs[r];
		const __m256 mv = _mm256_set1_ps(mu[r]), av = _mm256_set1_ps(a);
		if (gin) {
			__m256 sb0 = _mm256_setzero_ps(), sb1 = sb0, sd0 = sb0, sd1 = sb0;
			int64_t j = 0;
			for (; j + 16 <= D8; j += 16) {
				__m256 u0 = _mm256_mul_ps(_mm256_loadu_ps(dyr + j), LN_LOADG(j, 0));
				__m256 u1 = _mm256_mul_ps(_mm256_loadu_ps(dyr + j + 8), LN_LOADG(j + 8, 0));
				sb0 = _mm256_add_ps(sb0, u0);
				sb1 = _mm256_add_ps(sb1, u1);
				sd0 = _mm256_fmadd_ps(u0, _mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), sd0);
				sd1 = _mm256_fmadd_ps(u1, _mm256_sub_ps(_mm256_loadu_ps(xr + j + 8), mv), sd1);
			}
			for (; j < D8; j += 8) {
				__m256 u0 = _mm256_mul_ps(_mm256_loadu_ps(dyr + j), LN_LOADG(j, 0));
				sb0 = _mm256_add_ps(sb0, u0);
				sd0 = _mm256_fmadd_ps(u0, _mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), sd0);
			}
			if (r8) {
				// masked lanes load zeros: u = 0 there, so x - mean adds nothing
				__m256 u0 = _mm256_mul_ps(_mm256_maskload_ps(dyr + j, tm), LN_LOADG(j, 1));
				sb1 = _mm256_add_ps(sb1, u0);
				sd1 = _mm256_fmadd_ps(u0, _mm256_sub_ps(_mm256_maskload_ps(xr + j, tm), mv), sd1);
			}
			double sb = ln_hsum_ps(_mm256_add_ps(sb0, sb1)), sd = ln_hsum_ps(_mm256_add_ps(sd0, sd1));
			const __m256 c1 = _mm256_set1_ps((float)(sb / (double)D));
			const __m256 c2 = _mm256_set1_ps((float)(sd * (double)a * (double)a / (double)D));
			float *o = gin + r * gs;
			for (j = 0; j < D8; j += 8) {
				__m256 dv = _mm256_loadu_ps(dyr + j);
				__m256 u = _mm256_sub_ps(_mm256_mul_ps(dv, LN_LOADG(j, 0)), c1);
				__m256 xm = _mm256_sub_ps(_mm256_loadu_ps(xr + j), mv);
				_mm256_storeu_ps(o + j, _mm256_mul_ps(av, _mm256_fnmadd_ps(xm, c2, u)));
				if (pdw) {
					_mm256_storeu_ps(pdw + j, _mm256_fmadd_ps(dv, _mm256_mul_ps(xm, av), _mm256_loadu_ps(pdw + j)));
					_mm256_storeu_ps(pdb + j, _mm256_add_ps(_mm256_loadu_ps(pdb + j), dv));
				}
			}
			if (r8) {
				__m256 dv = _mm256_maskload_ps(dyr + j, tm);
				__m256 u = _mm256_sub_ps(_mm256_mul_ps(dv, LN_LOADG(j, 1)), c1);
				__m256 xm = _mm256_sub_ps(_mm256_maskload_ps(xr + j, tm), mv);
				_mm256_maskstore_ps(o + j, tm, _mm256_mul_ps(av, _mm256_fnmadd_ps(xm, c2, u)));
				if (pdw) {
					_mm256_maskstore_ps(pdw + j, tm, _mm256_fmadd_ps(dv, _mm256_mul_ps(xm, av), _mm256_maskload_ps(pdw + j, tm)));
					_mm256_maskstore_ps(pdb + j, tm, _mm256_add_ps(_mm256_maskload_ps(pdb + j, tm), dv));
				}
			}
		} else if (pdw) {
			int64_t j = 0;
			for (; j < D8; j += 8) {
				__m256 dv = _mm256_loadu_ps(dyr + j);
				__m256 xm = _mm256_sub_ps(_mm256_loadu_ps(xr + j), mv);
				_mm256_storeu_ps(pdw + j, _mm256_fmadd_ps(dv, _mm256_mul_ps(xm, av), _mm256_loadu_ps(pdw + j)));
				_mm256_storeu_ps(pdb + j, _mm256_add_ps(_mm256_loadu_ps(pdb + j), dv));
			}
			if (r8) {
				__m256 dv = _mm256_maskload_ps(dyr + j, tm);
				__m256 xm = _mm256_sub_ps(_mm256_maskload_ps(xr + j, tm), mv);
				_mm256_maskstore_ps(pdw + j, tm, _mm256_fmadd_ps(dv, _mm256_mul_ps(xm, av), _mm256_maskload_ps(pdw + j, tm)));
				_mm256_maskstore_ps(pdb + j, tm, _mm256_add_ps(_mm256_maskload_ps(pdb + j, tm), dv));
			}
		}
	}
#undef LN_LOADG
}

// out[j] = sum over the nb rows of p (row stride D) of p[i][j], in float64, in row order.
LNT static void hpusim_ln_colsum_avx2(const float *p, int64_t nb, int64_t D, float *out) {
	int64_t j = 0;
	for (; j + 8 <= D; j += 8) {
		__m256d a0 = _mm256_setzero_pd(), a1 = a0;
		for (int64_t i = 0; i < nb; i++) {
			a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(p + i * D + j)));
			a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(p + i * D + j + 4)));
		}
		_mm_storeu_ps(out + j, _mm256_cvtpd_ps(a0));
		_mm_storeu_ps(out + j + 4, _mm256_cvtpd_ps(a1));
	}
	for (; j < D; j++) {
		double s = 0;
		for (int64_t i = 0; i < nb; i++) s += p[i * D + j];
		out[j] = (float)s;
	}
}
*/
import "C"

import "unsafe"

// lnAVX2 selects the AVX2 float32 layer norm rows (tests switch it off to reach the
// portable ones).
var lnAVX2 = C.hpusim_ln_avx2_ok() != 0

func lnFwdAVX2(x unsafe.Pointer, xs int64, out unsafe.Pointer, os int64, rows, D int64, g, b []float32, eps float64,
	mean, rstd []float32) {
	C.hpusim_ln_fwd_avx2(cf(x), C.int64_t(xs), cf(out), C.int64_t(os), C.int64_t(rows), C.int64_t(D), cfs(g), cfs(b),
		C.double(eps), cfs(mean), cfs(rstd))
}

func lnBwdAVX2(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, gin unsafe.Pointer, gs int64, rows, D int64,
	g, mu, rs, pdw, pdb []float32) {
	C.hpusim_ln_bwd_avx2(cf(dy), C.int64_t(dys), cf(x), C.int64_t(xs), cf(gin), C.int64_t(gs), C.int64_t(rows), C.int64_t(D),
		cfs(g), cfs(mu), cfs(rs), cfs(pdw), cfs(pdb))
}

func lnColSumAVX2(p []float32, nb, D int64, out []float32) {
	C.hpusim_ln_colsum_avx2(cfs(p), C.int64_t(nb), C.int64_t(D), cfs(out))
}
