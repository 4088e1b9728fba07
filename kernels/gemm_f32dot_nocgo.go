//go:build !cgo || !amd64

package kernels

import "unsafe"

const (
	f32DotMR = 12
	f32DotNR = 32
)

// f32DotCPU is false without the C micro-kernel: float32 GEMMs run on the BLAS backend.
var f32DotCPU = false

func f32DotPackA(dst []float32, a unsafe.Pointer, rs, cs int64, m, k int) {
	panic("float32 dot GEMM needs cgo on amd64")
}

func f32DotPackB(dst []float32, b unsafe.Pointer, rs, cs int64, k, n int) {
	panic("float32 dot GEMM needs cgo on amd64")
}

func f32DotTiles(pa, pb []float32, m, n, k int, alpha, beta float32, c unsafe.Pointer, ldc int) {
	panic("float32 dot GEMM needs cgo on amd64")
}
