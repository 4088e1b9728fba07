// exp in float32 arithmetic for the softmax rows (softmax_cgo.go), operation for operation
// as expF32 in expf.go (the Go build and the tests), so both give the same bits. Included
// by a preamble that turned floating-point contraction off (no fused multiply-adds: each
// product and sum rounds as written, as in Go). Branch-free and without division, so the
// loops calling it vectorize (8 lanes with AVX2, 16 with AVX-512).
//
// exp(x) = 2^k e^r, k = rint(x log2 e), r = (x - k ln2_hi) - k ln2_lo (ln2_hi has 15
// significant bits, so k ln2_hi is exact), |r| <= ~0.35; e^r = 1 + (r + r^2 q(r)) with q
// the Taylor series of (e^r - 1 - r)/r^2 through r^5 (truncation < 6e-9 relative), so
// the last operation is the add to 1 and the result is within ~1 ulp of exp(x) (the tests
// measure the largest error over every float32). 2^k is applied as two normal factors
// 2^(k>>1) and 2^(k - (k>>1)), so a subnormal result rounds once and exp(88.7) stays
// finite. x is clamped to [-110, 89] (NaN to -110) before the integer conversion, beyond
// which the result is 0 or inf anyway; NaN is returned as is.
#ifndef HPUSIM_EXPF32_H
#define HPUSIM_EXPF32_H
#include <stdint.h>
#include <string.h>

static inline float hp_expf32(float x) {
	float xc = x > -110.0f ? x : -110.0f; // NaN compares false: -110
	xc = xc < 89.0f ? xc : 89.0f;
	const float magic = 12582912.0f; // 1.5 * 2^23: adding it rounds to an integer
	float kf = (xc * 1.44269502f + magic) - magic;
	float r = xc - kf * 0.693145751953125f;
	r = r - kf * 1.42860677e-06f;
	float q = 1.98412701e-4f; // 1/5040
	q = q * r + 1.38888892e-3f; // 1/720
	q = q * r + 8.33333377e-3f; // 1/120
	q = q * r + 4.16666679e-2f; // 1/24
	q = q * r + 1.66666672e-1f; // 1/6
	q = q * r + 0.5f;
	float p = r + (r * r) * q;
	float y = 1.0f + p;
	int32_t k = (int32_t)kf;
	int32_t k1 = k >> 1, k2 = k - k1;
	uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
	float s1, s2;
	memcpy(&s1, &b1, 4);
	memcpy(&s2, &b2, 4);
	y = (y * s1) * s2;
	return x != x ? x : y;
}

#endif
