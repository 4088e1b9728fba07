//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include "isa.h"
#include <string.h>
#include <immintrin.h>

// The attention tiles' row kernels in C, vectorized: the same operations as the Go loops
// in attention_rows.go (no contraction), so both builds compute the same values. No
// contraction in the products' epilogues either, so that a product gives the same values
// wherever it is inlined or specialised (the fused loops and the single products agree).
#pragma GCC optimize("fp-contract=off", "no-trapping-math")
#include "attention_gemm_avx512.h"

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

// Reductions keep 16 partial lanes, so the loops vectorize without reassociating float
// arithmetic behind the compiler's back; the lanes are then added as a tree (lane k with
// k+8, k+4, k+2, k+1), as att_sum16 and lanesSum (the Go build) do.
static inline float att_lanes_sum(float *a) {
	for (int k = 0; k < 8; k++) a[k] += a[k + 8];
	for (int k = 0; k < 4; k++) a[k] += a[k + 4];
	for (int k = 0; k < 2; k++) a[k] += a[k + 2];
	return a[0] + a[1];
}

HPUSIM_CLONES_2
static void att_exp_sub_any(float *row, int64_t n, float m, float *sum) {
	for (int64_t j = 0; j < n; j++) row[j] = att_expf(row[j] - m);
	float a[16] = {0};
	int64_t j = 0;
	for (; j + 16 <= n; j += 16)
		for (int k = 0; k < 16; k++) a[k] += row[j + k];
	for (int64_t t = 0; j < n; j++, t++) a[t] += row[j];
	*sum = att_lanes_sum(a);
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

// The 16 lanes' sum in att_lanes_sum's tree order.
__attribute__((target("avx512f"))) static inline float att_sum16(__m512 v) {
	__m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
	__m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
	q = _mm_add_ps(q, _mm_movehl_ps(q, q));
	q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
	return _mm_cvtss_f32(q);
}

// row = exp(row - m) and, when sum is not NULL, its sum, in one pass: the tail is a masked
// vector, its element t added to lane t as the scalar loops do.
__attribute__((target("avx512f"), always_inline))
static inline void att_exp_sub_512(float *row, int64_t n, float m, float *sum) {
	__m512 vm = _mm512_set1_ps(m), acc = _mm512_setzero_ps();
	int64_t j = 0;
	for (; j + 16 <= n; j += 16) {
		__m512 e = att_exp16(_mm512_sub_ps(_mm512_loadu_ps(row + j), vm));
		_mm512_storeu_ps(row + j, e);
		if (sum) acc = _mm512_add_ps(acc, e);
	}
	if (j < n) {
		__mmask16 t = (__mmask16)((1u << (n - j)) - 1);
		__m512 e = att_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, row + j), vm));
		_mm512_mask_storeu_ps(row + j, t, e);
		if (sum) acc = _mm512_mask_add_ps(acc, t, acc, e);
	}
	if (sum) *sum = att_sum16(acc);
}

// A row's max (NaN ignored, as the scalar loop: max_ps keeps its second operand then).
__attribute__((target("avx512f"), always_inline))
static inline float att_rowmax_512(const float *row, int64_t n) {
	__m512 acc = _mm512_set1_ps(-__builtin_inff());
	int64_t j = 0;
	for (; j + 16 <= n; j += 16) acc = _mm512_max_ps(_mm512_loadu_ps(row + j), acc);
	if (j < n) {
		__mmask16 t = (__mmask16)((1u << (n - j)) - 1);
		acc = _mm512_mask_max_ps(acc, t, _mm512_maskz_loadu_ps(t, row + j), acc);
	}
	return _mm512_reduce_max_ps(acc);
}

// The online softmax step of a tile, 16 rows at a time: their new maxima, their rescale
// factors exp(m - new max) as one vector (1 for a row that is still all -inf), then each
// row's exponentials and sum.
__attribute__((target("avx512f")))
static void att_online_softmax_512(float *s, int64_t rows, int64_t cols, float *m, float *l, float *alpha) {
	const float ninf = -__builtin_inff();
	for (int64_t r0 = 0; r0 < rows; r0 += 16) {
		int n = rows - r0 < 16 ? (int)(rows - r0) : 16;
		__mmask16 t = (__mmask16)((1u << n) - 1);
		float mn[16] = {0};
		for (int r = 0; r < n; r++) {
			float mx = att_rowmax_512(s + (r0 + r) * cols, cols);
			mn[r] = m[r0 + r] > mx ? m[r0 + r] : mx;
		}
		__m512 vmn = _mm512_loadu_ps(mn);
		__m512 a = att_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, m + r0), vmn));
		a = _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(vmn, _mm512_set1_ps(ninf), _CMP_EQ_OQ), _mm512_set1_ps(1));
		_mm512_mask_storeu_ps(alpha + r0, t, a);
		for (int r = 0; r < n; r++) {
			float *row = s + (r0 + r) * cols;
			if (mn[r] == ninf) {
				memset(row, 0, cols * sizeof(float));
				continue;
			}
			float sum;
			att_exp_sub_512(row, cols, mn[r], &sum);
			l[r0 + r] = l[r0 + r] * alpha[r0 + r] + sum;
			m[r0 + r] = mn[r];
		}
	}
}

__attribute__((target("avx512f")))
static void att_probs_512(float *p, int64_t rows, int64_t cols, const float *lse) {
	for (int64_t r = 0; r < rows; r++) {
		float *row = p + r * cols;
		if (lse[r] == -__builtin_inff())
			memset(row, 0, cols * sizeof(float));
		else
			att_exp_sub_512(row, cols, lse[r], 0);
	}
}

static int att_avx512 = -1;

static int att_has_avx512(void) {
	if (att_avx512 < 0) {
		__builtin_cpu_init();
		att_avx512 = HPUSIM_AVX512F();
	}
	return att_avx512;
}

HPUSIM_CLONES_2
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

HPUSIM_CLONES_512_2
static void att_ds(float *p, const float *dp, int64_t n, float d) {
	for (int64_t j = 0; j < n; j++) p[j] *= dp[j] - d;
}

static void att_online_softmax(float *s, int64_t rows, int64_t cols, float *m, float *l, float *alpha) {
	if (att_has_avx512()) {
		att_online_softmax_512(s, rows, cols, m, l, alpha);
		return;
	}
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
		att_exp_sub_any(row, cols, mn, &sum);
		alpha[r] = a;
		l[r] = l[r] * a + sum;
		m[r] = mn;
	}
}

static void att_probs(float *p, int64_t rows, int64_t cols, const float *lse) {
	if (att_has_avx512()) {
		att_probs_512(p, rows, cols, lse);
		return;
	}
	for (int64_t r = 0; r < rows; r++) {
		float *row = p + r * cols;
		if (lse[r] == -__builtin_inff()) {
			memset(row, 0, cols * sizeof(float));
			continue;
		}
		float sum;
		att_exp_sub_any(row, cols, lse[r], &sum);
	}
}

static void att_ds_rows(float *p, const float *dp, int64_t rows, int64_t cols, const float *delta) {
	for (int64_t r = 0; r < rows; r++) att_ds(p + r * cols, dp + r * cols, cols, delta[r]);
}

// The causal limit on a score tile (query rows from i0, key columns from j0): -inf past
// the diagonal, as attBias.
static void att_causal(float *s, int64_t rows, int64_t cols, int64_t i0, int64_t j0) {
	if (j0 + cols - 1 <= i0) return;
	for (int64_t r = 0; r < rows; r++) {
		int64_t first = i0 + r + 1 - j0;
		for (int64_t j = first < 0 ? 0 : first; j < cols; j++) s[r * cols + j] = -__builtin_inff();
	}
}

// The fused loops below run a whole block's tiles in one call (a crossing from Go per
// tile product costs the products about a fifth of their speed). They are the Go loops of
// AttentionForward and AttentionBackward for calls with no mask, no dropout and the exact
// softmax: the same operations in the same order, so both paths give the same values.
// Kinds: 1 attQueryKey, 2 attQueryByKey, 3 attKeyByQuery (attention_gemm.go).

// att_fwd_qblock: every visible key block of one query block: S = scale Q K^T, the
// causal limit, the online softmax, O = alpha O + P V. kt holds the head's K^T blocks
// (D x bc each), v the head's value rows.
static void att_fwd_qblock(int64_t rows, int64_t i0, int64_t S, int64_t D, int64_t Dv, int64_t bc, const float *q,
                           int64_t ldq, const float *kt, const float *v, int64_t ldv, float scale, int causal, float *st,
                           float *ot, float *m, float *l, float *alpha) {
	int64_t send = causal && i0 + rows < S ? i0 + rows : S;
	for (int64_t j0 = 0; j0 < send; j0 += bc) {
		int64_t cols = S - j0 < bc ? S - j0 : bc;
		att_gemm(rows, cols, D, q, ldq, 1, kt + j0 * D, bc, st, cols, scale, 0, 0, causal ? 1 : 0, i0 - j0);
		if (causal) att_causal(st, rows, cols, i0, j0);
		att_online_softmax(st, rows, cols, m, l, alpha);
		att_gemm(rows, Dv, cols, st, cols, 1, v + j0 * ldv, ldv, ot, Dv, 1, 1, alpha, causal ? 2 : 0, i0 - j0);
	}
}

// att_bwd_kblock: one key block (keys j0.., cols of them) against every query block of one
// query head: P recomputed from the row logsumexp, dP = dO V^T, dV += P^T dO,
// dS = P (dP - delta), dQ += scale dS K, dK += scale dS^T Q. ktb and vtb are the key
// block's K^T and V^T (D x bc, Dv x bc), kp its key rows; acc is the head's dQ sum.
static void att_bwd_kblock(int64_t L, int64_t br, int64_t j0, int64_t cols, int64_t D, int64_t Dv, const float *q,
                           int64_t ldq, const float *dout, int64_t lddo, const float *ktb, const float *vtb, int64_t bc,
                           const float *kp, int64_t ldk, const float *lse, const float *delta, float scale, int causal,
                           float *acc, float *dkt, float *dvt, float *pt, float *dpt) {
	for (int64_t i0 = 0; i0 < L; i0 += br) {
		int64_t rows = L - i0 < br ? L - i0 : br;
		if (causal && j0 > i0 + rows - 1) continue; // every score of the tile is masked
		int64_t off = i0 - j0;
		const float *qp = q + i0 * ldq, *dop = dout + i0 * lddo;
		att_gemm(rows, cols, D, qp, ldq, 1, ktb, bc, pt, cols, scale, 0, 0, causal ? 1 : 0, off);
		if (causal) att_causal(pt, rows, cols, i0, j0);
		att_probs(pt, rows, cols, lse + i0);
		att_gemm(rows, cols, Dv, dop, lddo, 1, vtb, bc, dpt, cols, 1, 0, 0, causal ? 1 : 0, off);
		att_gemm(cols, Dv, rows, pt, 1, cols, dop, lddo, dvt, Dv, 1, 1, 0, causal ? 3 : 0, off);
		att_ds_rows(pt, dpt, rows, cols, delta + i0);
		att_gemm(rows, D, cols, pt, cols, 1, kp, ldk, acc + i0 * D, D, scale, 1, 0, causal ? 2 : 0, off);
		att_gemm(cols, D, rows, pt, 1, cols, qp, ldq, dkt, D, scale, 1, 0, causal ? 3 : 0, off);
	}
}
*/
import "C"

import "unsafe"

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

// attGemmC is attGemm on the AVX-512 loops (attention_gemm_avx512.h).
func attGemmC(m, n, k int64, a unsafe.Pointer, ars, acs int64, b unsafe.Pointer, ldb int64, c unsafe.Pointer, ldc int64,
	alpha float32, accum bool, rs []float32, kind attCausalKind, off int64) {
	var rsp *C.float
	if rs != nil {
		rsp = (*C.float)(f32p(rs))
	}
	acc := C.int(0)
	if accum {
		acc = 1
	}
	C.att_gemm(C.int64_t(m), C.int64_t(n), C.int64_t(k), (*C.float)(a), C.int64_t(ars), C.int64_t(acs), (*C.float)(b),
		C.int64_t(ldb), (*C.float)(c), C.int64_t(ldc), C.float(alpha), acc, rsp, C.int(kind), C.int64_t(off))
}

// attGemmFast: the CPU runs the AVX-512 loops.
var attGemmFast = f32DotCPU

// attFused: the fused block loops (below) may run; they use the AVX-512 products.
func attFused() bool { return attGemmFast }

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// attFwdQBlock runs the key-block loop of one query block in C (att_fwd_qblock).
func attFwdQBlock(rows, i0, S, D, Dv int64, q unsafe.Pointer, ldq int64, kt []float32, v unsafe.Pointer, ldv int64,
	scale float32, causal bool, st, ot, m, l, alpha []float32) {
	C.att_fwd_qblock(C.int64_t(rows), C.int64_t(i0), C.int64_t(S), C.int64_t(D), C.int64_t(Dv), attBc, (*C.float)(q),
		C.int64_t(ldq), attCF(kt), (*C.float)(v), C.int64_t(ldv), C.float(scale), cBool(causal), attCF(st), attCF(ot),
		attCF(m), attCF(l), attCF(alpha))
}

// attBwdKBlock runs one key block against every query block of one head in C
// (att_bwd_kblock).
func attBwdKBlock(L, j0, cols, D, Dv int64, q unsafe.Pointer, ldq int64, dout unsafe.Pointer, lddo int64,
	ktb, vtb unsafe.Pointer, kp unsafe.Pointer, ldk int64, lse, delta []float32, scale float32, causal bool,
	acc, dkt, dvt, pt, dpt []float32) {
	C.att_bwd_kblock(C.int64_t(L), attBr, C.int64_t(j0), C.int64_t(cols), C.int64_t(D), C.int64_t(Dv), (*C.float)(q),
		C.int64_t(ldq), (*C.float)(dout), C.int64_t(lddo), (*C.float)(ktb), (*C.float)(vtb), attBc, (*C.float)(kp),
		C.int64_t(ldk), attCF(lse), attCF(delta), C.float(scale), cBool(causal), attCF(acc), attCF(dkt), attCF(dvt),
		attCF(pt), attCF(dpt))
}
