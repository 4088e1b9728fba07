//go:build !cgo

package kernels

const cgoConvMin = 1 << 62 // no C: always the Go loops

func bf16ToF32Bulk(dst []float32, src []uint16) { bf16ToF32Go(dst, src) }

func f32ToBF16Bulk(dst []uint16, src []float32) { f32ToBF16Go(dst, src) }
