// Fused bfloat16 row kernels' shared pieces (softmax_bf16_cgo.go, layernorm_bf16_cgo.go):
// bfloat16 <-> float32 conversion and a float32 exp. The rows compute in float32 straight
// from the bfloat16 operands and round each result once, so a row costs one pass over
// memory instead of widen, compute and narrow passes. They do not reproduce torch's CPU
// bits (its bfloat16 rows round differently anyway); they are accurate to float32 before
// the final rounding, well inside bfloat16's half ulp.
#ifndef HPUSIM_BF16_ROWS_H
#define HPUSIM_BF16_ROWS_H
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float bf16r_load(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

// nearest-even rounding; NaN becomes the canonical quiet NaN (as F32ToBF16)
static inline uint16_t bf16r_store(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)r;
}

// exp of x <= 0 (or NaN) in float32: 2^n * p(r), r = x - n*ln2 in [-ln2/2, ln2/2], p of
// degree 6 (relative error ~2e-7). Below -87.3 the result is 0 (float32 underflow, and
// what a masked -inf score must give); NaN stays NaN.
static inline float bf16r_exp(float x) {
	const float log2e = 1.44269504088896341f, ln2hi = 0.693359375f, ln2lo = -2.12194440e-4f;
	float xc = x < -87.3f ? -87.3f : x;  // NaN compares false: stays NaN
	const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
	float n = (xc * log2e + magic) - magic;
	float r = (xc - n * ln2hi) - n * ln2lo;
	float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-1f + r * (4.16666418e-2f +
	          r * (8.33333470e-3f + r * 1.38888893e-3f)))));
	int32_t e = (int32_t)n + 127;  // n in [-126, 0] for clamped x <= 0
	e = e < 1 ? 1 : (e > 254 ? 254 : e);
	uint32_t sb = (uint32_t)e << 23;
	float s;
	memcpy(&s, &sb, 4);
	float y = p * s;
	return x < -87.3f ? 0.0f : y;
}

#endif

// 16-lane versions (GCC vector extensions: one AVX-512 register, two AVX2 ones).
typedef float bf16r_v16f __attribute__((vector_size(64)));
typedef int32_t bf16r_v16i __attribute__((vector_size(64)));
typedef uint32_t bf16r_v16u __attribute__((vector_size(64)));
typedef uint16_t bf16r_v16h __attribute__((vector_size(32)));
typedef double bf16r_v8d __attribute__((vector_size(64)));

// macros, not functions: a function taking or returning a vector changes ABI per clone
#define bf16r_sel(m, a, b) ((bf16r_v16f)(((bf16r_v16i)(a) & (m)) | ((bf16r_v16i)(b) & ~(m))))
#define bf16r_load16(p) ({                                                  \
	bf16r_v16h h_;                                                          \
	memcpy(&h_, (p), sizeof h_);                                            \
	(bf16r_v16f)(__builtin_convertvector(h_, bf16r_v16u) << 16);            \
})
#define bf16r_store16(p, f) do {                                            \
	bf16r_v16u u_ = (bf16r_v16u)(f);                                        \
	bf16r_v16u r_ = (u_ + 0x7fffu + ((u_ >> 16) & 1u)) >> 16;               \
	bf16r_v16i nan_ = (bf16r_v16i)((u_ & 0x7fffffffu) > 0x7f800000u);       \
	r_ = (r_ & ~(bf16r_v16u)nan_) | (0x7fc0u & (bf16r_v16u)nan_);            \
	bf16r_v16h h_ = __builtin_convertvector(r_, bf16r_v16h);                \
	memcpy((p), &h_, sizeof h_);                                            \
} while (0)
// bf16r_exp on 16 lanes, operation for operation
#define bf16r_exp16(xv) ({                                                                     \
	bf16r_v16f x_ = (xv);                                                                      \
	bf16r_v16i lo_ = x_ < -87.3f;                                                              \
	bf16r_v16f xc_ = bf16r_sel(lo_, (bf16r_v16f){0} - 87.3f, x_);                              \
	bf16r_v16f n_ = (xc_ * 1.44269504088896341f + 12582912.0f) - 12582912.0f;                  \
	bf16r_v16f r_ = (xc_ - n_ * 0.693359375f) - n_ * -2.12194440e-4f;                          \
	bf16r_v16f p_ = 1.0f + r_ * (1.0f + r_ * (0.5f + r_ * (1.66666672e-1f + r_ * (4.16666418e-2f + \
	                r_ * (8.33333470e-3f + r_ * 1.38888893e-3f)))));                          \
	bf16r_v16i e_ = __builtin_convertvector(n_, bf16r_v16i) + 127;                             \
	bf16r_v16i elo_ = e_ < 1, ehi_ = e_ > 254;                                                 \
	e_ = (e_ & ~elo_) | (1 & elo_);                                                            \
	e_ = (e_ & ~ehi_) | (254 & ehi_);                                                          \
	bf16r_v16f y_ = p_ * (bf16r_v16f)(e_ << 23);                                               \
	bf16r_sel(lo_, (bf16r_v16f){0}, y_);                                                       \
})
