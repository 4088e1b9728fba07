//go:build !cgo || !amd64

package kernels

import "unsafe"

const (
	bf16DotMR = 8
	bf16DotNR = 32
)

// bf16DotCPU is false without the C micro-kernel: bfloat16 GEMMs widen to float32.
var bf16DotCPU = false

func bf16DotPackA(dst []uint16, a unsafe.Pointer, rs, cs int64, m, k int) {
	panic("bf16 dot GEMM needs cgo on amd64")
}

func bf16DotPackB(dst []uint16, b unsafe.Pointer, rs, cs int64, k, n0, n1 int) {
	panic("bf16 dot GEMM needs cgo on amd64")
}

func bf16DotGemm(pa, pb []uint16, m, n, k int, c unsafe.Pointer, ldc int, add bool) {
	panic("bf16 dot GEMM needs cgo on amd64")
}
