//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include "isa.h"

// o[i] = m[i] ? v : s[i] over n elements (in place when o == s): branch-free blends.
HPUSIM_CLONES_V4_2
static void hpusim_masked_fill16(uint16_t *o, const uint16_t *s, const uint8_t *m, int64_t n, uint16_t v) {
	for (int64_t i = 0; i < n; i++) o[i] = m[i] ? v : s[i];
}
HPUSIM_CLONES_V4_2
static void hpusim_masked_fill32(uint32_t *o, const uint32_t *s, const uint8_t *m, int64_t n, uint32_t v) {
	for (int64_t i = 0; i < n; i++) o[i] = m[i] ? v : s[i];
}
*/
import "C"

import "unsafe"

// maskedFillRun is the select over n elements of es (2 or 4) bytes.
func maskedFillRun(o, s, m unsafe.Pointer, n, es int64, bits uint32) {
	if n < 64 {
		maskedFillGo(o, s, m, n, es, bits)
		return
	}
	if es == 2 {
		C.hpusim_masked_fill16((*C.uint16_t)(o), (*C.uint16_t)(s), (*C.uint8_t)(m), C.int64_t(n), C.uint16_t(bits))
		return
	}
	C.hpusim_masked_fill32((*C.uint32_t)(o), (*C.uint32_t)(s), (*C.uint8_t)(m), C.int64_t(n), C.uint32_t(bits))
}
