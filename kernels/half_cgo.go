//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include "isa.h"
#include <stddef.h>

// Bulk bfloat16 <-> float32 conversion, vectorized by the compiler; one clone per ISA,
// picked at load time. Bit-exact with F32ToBF16/BF16ToF32 in half.go.
HPUSIM_CLONES_2
static void hpusim_bf16_to_f32(uint32_t *restrict dst, const uint16_t *restrict src, size_t n) {
	for (size_t i = 0; i < n; i++) dst[i] = (uint32_t)src[i] << 16;
}

HPUSIM_CLONES_2
static void hpusim_f32_to_bf16(uint16_t *restrict dst, const uint32_t *restrict src, size_t n) {
	for (size_t i = 0; i < n; i++) {
		uint32_t x = src[i];
		uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
		dst[i] = (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)r;
	}
}
*/
import "C"

import "unsafe"

// cgoConvMin is the run length from which a C call beats the Go loop.
const cgoConvMin = 256

func bf16ToF32Bulk(dst []float32, src []uint16) {
	C.hpusim_bf16_to_f32((*C.uint32_t)(unsafe.Pointer(unsafe.SliceData(dst))),
		(*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(src))), C.size_t(len(dst)))
}

func f32ToBF16Bulk(dst []uint16, src []float32) {
	C.hpusim_f32_to_bf16((*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(dst))),
		(*C.uint32_t)(unsafe.Pointer(unsafe.SliceData(src))), C.size_t(len(dst)))
}
