//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

// The attention tiles' row kernels in C, vectorized: the same operations as the Go loops
// in attention_rows.go (no contraction), so both builds compute the same values.
#pragma GCC optimize("fp-contract=off", "no-trapping-math")

// Written so that GCC vectorizes it: clamps as selects, rintf, the scale's bits by memcpy.
static inline float att_expf(float x) {
	float lo = x < -87.3f ? 0.0f : 1.0f;
	x = x < -87.3f ? -87.3f : x;
	x = x > 88.3f ? 88.3f : x;
	float k = __builtin_rintf(x * 1.44269504f);
	float r = x - k * 0.693359375f;
	r -= k * -2.12194440e-4f;
	float p = (1.0f / 720) * r + 1.0f / 120;
	p = p * r + 1.0f / 24;
	p = p * r + 1.0f / 6;
	p = p * r + 0.5f;
	p = p * r + 1;
	p = p * r + 1;
	int32_t e = ((int32_t)k + 127) << 23;
	float s;
	memcpy(&s, &e, 4);
	return p * s * lo;
}

// Reductions keep 16 partial lanes (summed in a fixed order), so the loops vectorize
// without reassociating float arithmetic behind the compiler's back.
__attribute__((target_clones("avx2", "default")))
static void att_exp_sub_any(float *row, int64_t n, float m, float *sum) {
	for (int64_t j = 0; j < n; j++) row[j] = att_expf(row[j] - m);
	float a[16] = {0};
	int64_t j = 0;
	for (; j + 16 <= n; j += 16)
		for (int k = 0; k < 16; k++) a[k] += row[j + k];
	for (int64_t t = 0; j < n; j++, t++) a[t] += row[j];
	float acc = 0;
	for (int k = 0; k < 16; k++) acc += a[k];
	*sum = acc;
}

// att_expf on 16 lanes, operation for operation (the clamps as max/min in the order that
// keeps a NaN, the zero of exp(-inf) as a mask), for AVX-512 where GCC leaves the scalar
// function's loop unvectorized.
__attribute__((target("avx512f"))) static inline __m512 att_exp16(__m512 x) {
	__mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);
	x = _mm512_max_ps(_mm512_set1_ps(-87.3f), x);
	x = _mm512_min_ps(_mm512_set1_ps(88.3f), x);
	__m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_sub_ps(x, _mm512_mul_ps(k, _mm512_set1_ps(0.693359375f)));
	r = _mm512_sub_ps(r, _mm512_mul_ps(k, _mm512_set1_ps(-2.12194440e-4f)));
	__m512 p = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(1.0f / 720), r), _mm512_set1_ps(1.0f / 120));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
	__m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
	return _mm512_maskz_mov_ps(keep, _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}

// row = exp(row - m) and its sum, in one pass: the tail is a masked vector, its element t
// added to lane t as the scalar loops do.
__attribute__((target("avx512f")))
static void att_exp_sub_512(float *row, int64_t n, float m, float *sum) {
	__m512 vm = _mm512_set1_ps(m), acc = _mm512_setzero_ps();
	int64_t j = 0;
	for (; j + 16 <= n; j += 16) {
		__m512 e = att_exp16(_mm512_sub_ps(_mm512_loadu_ps(row + j), vm));
		_mm512_storeu_ps(row + j, e);
		acc = _mm512_add_ps(acc, e);
	}
	if (j < n) {
		__mmask16 t = (__mmask16)((1u << (n - j)) - 1);
		__m512 e = att_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, row + j), vm));
		_mm512_mask_storeu_ps(row + j, t, e);
		acc = _mm512_mask_add_ps(acc, t, acc, e);
	}
	float a[16];
	_mm512_storeu_ps(a, acc);
	float s = 0;
	for (int k = 0; k < 16; k++) s += a[k];
	*sum = s;
}

static int att_avx512 = -1;

static void att_exp_sub(float *row, int64_t n, float m, float *sum) {
	if (att_avx512 < 0) {
		__builtin_cpu_init();
		att_avx512 = __builtin_cpu_supports("avx512f");
	}
	if (att_avx512)
		att_exp_sub_512(row, n, m, sum);
	else
		att_exp_sub_any(row, n, m, sum);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static float att_rowmax(const float *row, int64_t n) {
	float a[16];
	for (int k = 0; k < 16; k++) a[k] = -__builtin_inff();
	int64_t j = 0;
	for (; j + 16 <= n; j += 16)
		for (int k = 0; k < 16; k++) a[k] = row[j + k] > a[k] ? row[j + k] : a[k];
	for (int64_t t = 0; j < n; j++, t++) a[t] = row[j] > a[t] ? row[j] : a[t];
	float mx = a[0];
	for (int k = 1; k < 16; k++) mx = a[k] > mx ? a[k] : mx;
	return mx;
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void att_ds(float *p, const float *dp, int64_t n, float d) {
	for (int64_t j = 0; j < n; j++) p[j] *= dp[j] - d;
}

static void att_online_softmax(float *s, int64_t rows, int64_t cols, float *m, float *l, float *alpha) {
	for (int64_t r = 0; r < rows; r++) {
		float *row = s + r * cols;
		float mx = att_rowmax(row, cols);
		float mn = m[r] > mx ? m[r] : mx;
		if (mn == -__builtin_inff()) {
			memset(row, 0, cols * sizeof(float));
			alpha[r] = 1;
			continue;
		}
		float a = att_expf(m[r] - mn);
		float sum;
		att_exp_sub(row, cols, mn, &sum);
		alpha[r] = a;
		l[r] = l[r] * a + sum;
		m[r] = mn;
	}
}

static void att_probs(float *p, int64_t rows, int64_t cols, const float *lse) {
	for (int64_t r = 0; r < rows; r++) {
		float *row = p + r * cols;
		if (lse[r] == -__builtin_inff()) {
			memset(row, 0, cols * sizeof(float));
			continue;
		}
		float sum;
		att_exp_sub(row, cols, lse[r], &sum);
	}
}

static void att_ds_rows(float *p, const float *dp, int64_t rows, int64_t cols, const float *delta) {
	for (int64_t r = 0; r < rows; r++) att_ds(p + r * cols, dp + r * cols, cols, delta[r]);
}
*/
import "C"

func attCF(s []float32) *C.float { return (*C.float)(f32p(s)) }

func attOnlineSoftmax(s []float32, rows, cols int64, m, l, alpha []float32) {
	C.att_online_softmax(attCF(s), C.int64_t(rows), C.int64_t(cols), attCF(m), attCF(l), attCF(alpha))
}

func attProbs(p []float32, rows, cols int64, lse []float32) {
	C.att_probs(attCF(p), C.int64_t(rows), C.int64_t(cols), attCF(lse))
}

func attDS(p, dp []float32, rows, cols int64, delta []float32) {
	C.att_ds_rows(attCF(p), attCF(dp), C.int64_t(rows), C.int64_t(cols), attCF(delta))
}
