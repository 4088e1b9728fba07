// The float32 softmax rows of softmax_cgo.go in AVX2 intrinsics: the same operations in
// the same order as hpusim_softmax_f32 / hpusim_softmax_bwd_f32 (so the same bits as the
// Go rows), written out in 8-lane vectors because GCC's own vectorization of those loops
// left the max, the 16-lane reductions and every row's tail scalar, with the lanes
// spilled to the stack (about 2 ns an element at rows of 64, 4x torch's CPU kernel).
//   - the max over 16 lanes (two vectors), lane l the largest of x[l], x[l+16], ...
//     (MAXPS(x, m) is `x > m ? x : m`, the C rows' select, so a NaN is skipped as there);
//   - exp lane by lane as hp_expf32 (expf32.h), operation for operation, no FMA;
//   - the sum of exps fused into the exp pass in vecsum16's order (two 8-lane
//     accumulators for its 16 lanes, the partial block added lane-wise, then its tree),
//     or sequentially (non-last dims, the bfloat16 rows) as the C rows;
//   - the backward's dot in vecdot16's order with its float64 multiply-adds.
// Included by softmax_cgo.go's preamble after expf32.h and vec16.h, with contraction off.
#ifndef HPUSIM_SOFTMAX_AVX2_H
#define HPUSIM_SOFTMAX_AVX2_H
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#define SMX_TARGET __attribute__((target("avx2")))

// hp_expf32's reduction and polynomial: 1 + p(r) for r = xc - kf ln2 (two-part ln2),
// before the scaling by 2^kf; shared by both exps below, operation for operation.
SMX_TARGET static inline __m256 smx_exp_poly(__m256 xc, __m256 kf) {
	__m256 r = _mm256_sub_ps(xc, _mm256_mul_ps(kf, _mm256_set1_ps(0.693145751953125f)));
	r = _mm256_sub_ps(r, _mm256_mul_ps(kf, _mm256_set1_ps(1.42860677e-06f)));
	__m256 q = _mm256_set1_ps(1.98412701e-4f);
	q = _mm256_add_ps(_mm256_mul_ps(q, r), _mm256_set1_ps(1.38888892e-3f));
	q = _mm256_add_ps(_mm256_mul_ps(q, r), _mm256_set1_ps(8.33333377e-3f));
	q = _mm256_add_ps(_mm256_mul_ps(q, r), _mm256_set1_ps(4.16666679e-2f));
	q = _mm256_add_ps(_mm256_mul_ps(q, r), _mm256_set1_ps(1.66666672e-1f));
	q = _mm256_add_ps(_mm256_mul_ps(q, r), _mm256_set1_ps(0.5f));
	__m256 p = _mm256_add_ps(r, _mm256_mul_ps(_mm256_mul_ps(r, r), q));
	__m256 y = _mm256_add_ps(_mm256_set1_ps(1.0f), p);
	return y;
}

// hp_expf32 on 8 lanes. Lanes below -104, whose hp_expf32 is +0 (TestExpF32ZeroBelow),
// compute exp(0) and are zeroed: their last product underflows, and on AMD's cores every
// such product takes a microcode assist (the causal mask's -inf halves of the attention
// rows cost 2.3 ns an element instead of 0.7).
SMX_TARGET static inline __m256 smx_exp(__m256 x) {
	const __m256 zero = _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ); // -inf too, not NaN
	__m256 xc = _mm256_max_ps(x, _mm256_set1_ps(-110.0f)); // x > -110 ? x : -110 (NaN: -110)
	xc = _mm256_min_ps(xc, _mm256_set1_ps(89.0f));          // xc < 89 ? xc : 89
	xc = _mm256_andnot_ps(zero, xc);
	const __m256 magic = _mm256_set1_ps(12582912.0f);
	__m256 kf = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269502f)), magic), magic);
	__m256 y = smx_exp_poly(xc, kf);
	__m256i k = _mm256_cvttps_epi32(kf); // kf is an integer
	__m256i k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);
	const __m256i bias = _mm256_set1_epi32(127);
	__m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
	__m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
	y = _mm256_andnot_ps(zero, _mm256_mul_ps(_mm256_mul_ps(y, s1), s2));
	return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// smx_exp of x - max in a softmax row: x <= 0, -inf or NaN (from inf - inf or a NaN x,
// whose rows the caller redoes), in fewer operations with the same bits. Over [-104, 0]
// smx_exp's clamps do nothing and k = rint(x log2 e) is in [-150, 0], so 2^k can be applied
// as 2^(k+64) (exact, normal) and then 2^-64: the exact product rounds once, as with its
// two factors 2^(k>>1), 2^(k-(k>>1)). A NaN lane stays NaN (an unspecified one).
SMX_TARGET static inline __m256 smx_exp_neg(__m256 x) {
	const __m256 zero = _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ);
	const __m256 xc = _mm256_andnot_ps(zero, x);
	// rint(x log2 e), ties to even, as smx_exp's (t + 1.5 2^23) - 1.5 2^23 rounds it
	__m256 kf = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269502f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 y = smx_exp_poly(xc, kf);
	__m256i k = _mm256_cvttps_epi32(kf);
	__m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127 + 64)), 23));
	y = _mm256_mul_ps(_mm256_mul_ps(y, s1), _mm256_set1_ps(0x1p-64f));
	return _mm256_andnot_ps(zero, y);
}

// The first r lanes set (0 <= r <= 8).
SMX_TARGET static inline __m256i smx_mask(int64_t r) {
	const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), idx);
}

// r (< 8) floats from p, the other lanes pad.
SMX_TARGET static inline __m256 smx_load_part(const float *p, int64_t r, float pad) {
	const __m256i m = smx_mask(r);
	return _mm256_blendv_ps(_mm256_set1_ps(pad), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

SMX_TARGET static inline void smx_store_part(float *p, int64_t r, __m256 v) {
	_mm256_maskstore_ps(p, smx_mask(r), v);
}

// vecsum16's tree over its 16 lanes held in a (lanes 0-7) and b (lanes 8-15).
SMX_TARGET static inline float smx_tree16(__m256 a, __m256 b) {
	__m256 s = _mm256_add_ps(a, b);                                                     // h = 8
	__m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));     // h = 4
	t = _mm_add_ps(t, _mm_movehl_ps(t, t));                                             // h = 2
	t = _mm_add_ss(t, _mm_shuffle_ps(t, t, 1));                                         // h = 1
	return _mm_cvtss_f32(t);
}

// The row max. Lane by lane `x > m ? x : m` (a NaN skipped) as the C rows, then a tree
// over the lanes instead of their sequential order: the two can differ only in the sign of
// a zero max, which changes no result (x - max is then +0 or -0 only for x = +-0, whose exp
// is 1 either way, and a log-softmax row holding both zeros has a sum of exps of 2 or more).
SMX_TARGET static inline float smx_rowmax(const float *xr, int64_t n) {
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	__m256 m0 = ninf, m1 = ninf;
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		m0 = _mm256_max_ps(_mm256_loadu_ps(xr + i), m0);
		m1 = _mm256_max_ps(_mm256_loadu_ps(xr + i + 8), m1);
	}
	if (i + 8 <= n) {
		m0 = _mm256_max_ps(_mm256_loadu_ps(xr + i), m0);
		i += 8;
	}
	if (i < n) m1 = _mm256_max_ps(smx_load_part(xr + i, n - i, -INFINITY), m1);
	__m256 m = _mm256_max_ps(m0, m1);
	__m128 t = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	t = _mm_max_ps(t, _mm_movehl_ps(t, t));
	t = _mm_max_ss(t, _mm_shuffle_ps(t, t, 1));
	return _mm_cvtss_f32(t);
}

// The length of a row of n >= 16 (a multiple of 8) without its trailing vectors whose every
// x - mx is below -104 (exp +0: a causal or padding mask's -inf), keeping the first 16;
// n otherwise. Those vectors' exps are +0 and adding +0 leaves vecsum16's lanes (+0 or
// more) as they are, so they need no exp, no add and no scaling.
SMX_TARGET static inline int64_t smx_live(const float *xr, int64_t n, float mx) {
	if (n % 8) return n;
	const __m256 lim = _mm256_set1_ps(-104.0f), vm = _mm256_set1_ps(mx);
	int64_t l = n;
	while (l > 16 &&
	       _mm256_movemask_ps(_mm256_cmp_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + l - 8), vm), lim, _CMP_LT_OQ)) == 0xff)
		l -= 8;
	return l;
}

// The exps of a row into yr and their sum: in vecsum16's order (vsum, n >= 16), else
// sequentially from yr[0] (seq0: vecsum16 of n < 16) or from 0 (the generic rows).
SMX_TARGET static inline float smx_expsum(const float *xr, float *yr, int64_t n, float mx, int vsum, int seq0) {
	const __m256 vm = _mm256_set1_ps(mx);
	int64_t i = 0;
	float s;
	if (vsum) {
		__m256 a = smx_exp_neg(_mm256_sub_ps(_mm256_loadu_ps(xr), vm));
		__m256 b = smx_exp_neg(_mm256_sub_ps(_mm256_loadu_ps(xr + 8), vm));
		_mm256_storeu_ps(yr, a);
		_mm256_storeu_ps(yr + 8, b);
		for (i = 16; i + 16 <= n; i += 16) {
			__m256 e0 = smx_exp_neg(_mm256_sub_ps(_mm256_loadu_ps(xr + i), vm));
			__m256 e1 = smx_exp_neg(_mm256_sub_ps(_mm256_loadu_ps(xr + i + 8), vm));
			_mm256_storeu_ps(yr + i, e0);
			_mm256_storeu_ps(yr + i + 8, e1);
			a = _mm256_add_ps(a, e0);
			b = _mm256_add_ps(b, e1);
		}
		int64_t r = n - i; // 0..15 left: lanes 0..r-1 of the 16 get one more add
		if (r >= 8) {
			__m256 e0 = smx_exp_neg(_mm256_sub_ps(_mm256_loadu_ps(xr + i), vm));
			_mm256_storeu_ps(yr + i, e0);
			a = _mm256_add_ps(a, e0);
			i += 8;
			r -= 8;
			if (r > 0) {
				__m256 e1 = smx_exp_neg(_mm256_sub_ps(smx_load_part(xr + i, r, 0), vm));
				smx_store_part(yr + i, r, e1);
				b = _mm256_blendv_ps(b, _mm256_add_ps(b, e1), _mm256_castsi256_ps(smx_mask(r)));
			}
		} else if (r > 0) {
			__m256 e0 = smx_exp_neg(_mm256_sub_ps(smx_load_part(xr + i, r, 0), vm));
			smx_store_part(yr + i, r, e0);
			a = _mm256_blendv_ps(a, _mm256_add_ps(a, e0), _mm256_castsi256_ps(smx_mask(r)));
		}
		return smx_tree16(a, b);
	}
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(yr + i, smx_exp_neg(_mm256_sub_ps(_mm256_loadu_ps(xr + i), vm)));
	if (i < n) smx_store_part(yr + i, n - i, smx_exp_neg(_mm256_sub_ps(smx_load_part(xr + i, n - i, 0), vm)));
	if (seq0) {
		s = yr[0];
		for (i = 1; i < n; i++) s += yr[i];
	} else {
		s = 0;
		for (i = 0; i < n; i++) s += yr[i];
	}
	return s;
}

// hpusim_softmax_f32 (softmax_cgo.go) in AVX2. Short rows go in blocks of up to 8, each
// step over the whole block before the next (maxes, exps and sums, the scaling), so a
// row's serial steps (its max, the exps' latency, the sum, 1/s) overlap the other rows'.
SMX_TARGET static void smx_softmax_f32(const float *x, int64_t xs, float *y, int64_t ys, int64_t rows, int64_t n,
                                       int islog, int lastdim, uint8_t *bad, int bf16) {
	const int vsum = lastdim && !bf16 && n >= 16, seq0 = lastdim && !bf16;
	const int64_t rb = n <= 512 ? 8 : 1;
	float mxs[8], ss[8];
	int64_t ls[8];
	for (int64_t j0 = 0; j0 < rows; j0 += rb) {
		const int64_t nb = rows - j0 < rb ? rows - j0 : rb;
		for (int64_t jj = 0; jj < nb; jj++) mxs[jj] = smx_rowmax(x + (j0 + jj) * xs, n);
		for (int64_t jj = 0; jj < nb; jj++) {
			const float *xr = x + (j0 + jj) * xs;
			float *yr = y + (j0 + jj) * ys;
			const int64_t l = vsum ? smx_live(xr, n, mxs[jj]) : n;
			ls[jj] = l;
			if (l == n) { // (the whole row: its own copy, with n invariant)
				ss[jj] = smx_expsum(xr, yr, n, mxs[jj], vsum, seq0);
			} else {
				ss[jj] = smx_expsum(xr, yr, l, mxs[jj], vsum, seq0);
				for (int64_t i = l; i < n; i += 8) _mm256_storeu_ps(yr + i, _mm256_setzero_ps());
			}
		}
		for (int64_t jj = 0; jj < nb; jj++) {
			const int64_t j = j0 + jj;
			const float *xr = x + j * xs;
			float *yr = y + j * ys;
			const float s = ss[jj], mx = mxs[jj];
			int64_t i;
			bad[j] = s != s;
			if (s != s) continue;
			if (islog) {
				float ls = bf16 ? round_bf16((float)log((double)round_bf16(s))) : (float)log((double)s);
				const __m256 vm = _mm256_set1_ps(mx), vl = _mm256_set1_ps(ls);
				for (i = 0; i + 8 <= n; i += 8)
					_mm256_storeu_ps(yr + i, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + i), vm), vl));
				for (; i < n; i++) yr[i] = (xr[i] - mx) - ls;
			} else if (lastdim) {
				const float inv = 1 / s; // <= 1: the +0 past ls[jj] stay
				const __m256 vi = _mm256_set1_ps(inv);
				const int64_t l = ls[jj];
				for (i = 0; i + 8 <= l; i += 8) _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_loadu_ps(yr + i), vi));
				for (; i < l; i++) yr[i] = yr[i] * inv;
			} else {
				const __m256 vs = _mm256_set1_ps(s);
				for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(yr + i, _mm256_div_ps(_mm256_loadu_ps(yr + i), vs));
				for (; i < n; i++) yr[i] = yr[i] / s;
			}
		}
	}
}

// vecdot16's lanes after the first vector: acc = (float)((double)a * b + acc), 8 lanes.
SMX_TARGET static inline __m256 smx_dotstep(__m256 acc, __m256 a, __m256 b) {
	__m256d lo = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)),
	                                         _mm256_cvtps_pd(_mm256_castps256_ps128(b))),
	                           _mm256_cvtps_pd(_mm256_castps256_ps128(acc)));
	__m256d hi = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)),
	                                         _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1))),
	                           _mm256_cvtps_pd(_mm256_extractf128_ps(acc, 1)));
	return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

// vecsum16 (isdot 0) or vecdot16 (isdot 1) of a row of n >= 16.
SMX_TARGET static inline float smx_vec16(const float *g, const float *y, int64_t n, int isdot) {
	__m256 a, b;
	if (isdot) {
		a = _mm256_mul_ps(_mm256_loadu_ps(g), _mm256_loadu_ps(y));
		b = _mm256_mul_ps(_mm256_loadu_ps(g + 8), _mm256_loadu_ps(y + 8));
	} else {
		a = _mm256_loadu_ps(g);
		b = _mm256_loadu_ps(g + 8);
	}
	int64_t i = 16;
	for (; i + 16 <= n; i += 16) {
		if (isdot) {
			a = smx_dotstep(a, _mm256_loadu_ps(g + i), _mm256_loadu_ps(y + i));
			b = smx_dotstep(b, _mm256_loadu_ps(g + i + 8), _mm256_loadu_ps(y + i + 8));
		} else {
			a = _mm256_add_ps(a, _mm256_loadu_ps(g + i));
			b = _mm256_add_ps(b, _mm256_loadu_ps(g + i + 8));
		}
	}
	int64_t r = n - i;
	__m256 *acc = &a;
	while (r > 0) {
		int64_t w = r < 8 ? r : 8;
		__m256 gv = w == 8 ? _mm256_loadu_ps(g + i) : smx_load_part(g + i, w, 0);
		__m256 t;
		if (isdot) {
			__m256 yv = w == 8 ? _mm256_loadu_ps(y + i) : smx_load_part(y + i, w, 0);
			t = smx_dotstep(*acc, gv, yv);
		} else {
			t = _mm256_add_ps(*acc, gv);
		}
		*acc = w == 8 ? t : _mm256_blendv_ps(*acc, t, _mm256_castsi256_ps(smx_mask(w)));
		i += w;
		r -= w;
		acc = &b;
	}
	return smx_tree16(a, b);
}

// hpusim_softmax_bwd_f32 (softmax_cgo.go) in AVX2; o may alias g or y.
SMX_TARGET static inline float smx_bwd_sum(const float *gr, const float *yr, int64_t n, int islog, int seq) {
	float s;
	int64_t i;
	if (seq) {
		s = 0;
		if (islog)
			for (i = 0; i < n; i++) s += gr[i];
		else
			for (i = 0; i < n; i++) s += gr[i] * yr[i];
	} else if (n >= 16) {
		s = smx_vec16(gr, yr, n, !islog);
	} else if (islog) {
		s = gr[0];
		for (i = 1; i < n; i++) s += gr[i];
	} else {
		s = gr[0] * yr[0];
		for (i = 1; i < n; i++) s += gr[i] * yr[i];
	}
	return s;
}

// Short rows in blocks of 8 as smx_softmax_f32: the block's sums, then its outputs.
SMX_TARGET static void smx_softmax_bwd_f32(const float *g, int64_t gs, const float *y, int64_t ys, float *o, int64_t os,
                                           int64_t rows, int64_t n, int islog, int seq) {
	const int64_t rb = n <= 512 ? 8 : 1;
	float ss[8];
	for (int64_t j0 = 0; j0 < rows; j0 += rb) {
		const int64_t nb = rows - j0 < rb ? rows - j0 : rb;
		for (int64_t jj = 0; jj < nb; jj++) ss[jj] = smx_bwd_sum(g + (j0 + jj) * gs, y + (j0 + jj) * ys, n, islog, seq);
		for (int64_t jj = 0; jj < nb; jj++) {
			const int64_t j = j0 + jj;
			const float *gr = g + j * gs, *yr = y + j * ys;
			float *orow = o + j * os;
			const float s = ss[jj];
			const __m256 vs = _mm256_set1_ps(s);
			int64_t i = 0;
			if (islog) {
				for (; i + 8 <= n; i += 8)
					_mm256_storeu_ps(orow + i, _mm256_sub_ps(_mm256_loadu_ps(gr + i),
					                                         _mm256_mul_ps(smx_exp(_mm256_loadu_ps(yr + i)), vs)));
				if (i < n) {
					__m256 e = smx_exp(smx_load_part(yr + i, n - i, 0));
					smx_store_part(orow + i, n - i, _mm256_sub_ps(smx_load_part(gr + i, n - i, 0), _mm256_mul_ps(e, vs)));
				}
			} else {
				for (; i + 8 <= n; i += 8)
					_mm256_storeu_ps(orow + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(gr + i), vs),
					                                         _mm256_loadu_ps(yr + i)));
				if (i < n)
					smx_store_part(orow + i, n - i, _mm256_mul_ps(_mm256_sub_ps(smx_load_part(gr + i, n - i, 0), vs),
					                                              smx_load_part(yr + i, n - i, 0)));
			}
		}
	}
}

#endif // __x86_64__
#endif
