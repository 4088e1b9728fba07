// Row reductions shared by the cgo preambles of layernorm_cgo.go and softmax_cgo.go, in
// torch's 16-lane reduce_all order (vecSum and vecDot in layernorm.go). The including
// preamble must have turned floating-point contraction off before including this.
#ifndef HPUSIM_VEC16_H
#define HPUSIM_VEC16_H
#include <stdint.h>
#include <string.h>

// torch's reduce_all order over 16 lanes (vecSum in layernorm.go).
static inline float vecsum16(const float *v, int64_t n) {
	if (n < 16) {
		float s = v[0];
		for (int64_t i = 1; i < n; i++) s += v[i];
		return s;
	}
	float acc[16];
	memcpy(acc, v, sizeof acc);
	// whole blocks in a fixed-count loop (vectorized), then the partial one: the same adds
	int64_t d = 16;
	for (; d + 16 <= n; d += 16)
		for (int j = 0; j < 16; j++) acc[j] += v[d + j];
	for (int64_t j = 0; j < n - d; j++) acc[j] += v[d + j];
	for (int h = 8; h >= 1; h /= 2)
		for (int j = 0; j < h; j++) acc[j] += acc[j + h];
	return acc[0];
}

// vecDot in layernorm.go: products rounded in the first vector, fused afterwards (a
// float32 product is exact in double, so one double add rounds like the fused op).
static inline float vecdot16(const float *a, const float *b, int64_t n) {
	if (n < 16) {
		float s = a[0] * b[0];
		for (int64_t i = 1; i < n; i++) s += a[i] * b[i];
		return s;
	}
	float acc[16];
	for (int j = 0; j < 16; j++) acc[j] = a[j] * b[j];
	int64_t d = 16;
	for (; d + 16 <= n; d += 16)
		for (int j = 0; j < 16; j++) acc[j] = (float)((double)a[d + j] * (double)b[d + j] + (double)acc[j]);
	for (int64_t j = 0; j < n - d; j++) acc[j] = (float)((double)a[d + j] * (double)b[d + j] + (double)acc[j]);
	for (int h = 8; h >= 1; h /= 2)
		for (int j = 0; j < h; j++) acc[j] += acc[j + h];
	return acc[0];
}

#endif
