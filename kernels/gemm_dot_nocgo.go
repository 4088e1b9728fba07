//go:build !cgo || !amd64

package kernels

import "unsafe"

// Without cgo on amd64 there are no C micro-kernels: bfloat16 GEMMs widen to float32 and
// float32 GEMMs run on the BLAS backend. The tile sizes stay defined for shared code.
const (
	bf16DotMR = 8
	bf16DotNR = 32
	f32DotMR  = 12
	f32DotNR  = 32
)

var (
	bf16DotCPU = false
	f32DotCPU  = false
)

const noDotKernel = "the dot GEMM micro-kernels need cgo on amd64"

func bf16DotPackA(dst []uint16, a unsafe.Pointer, rs, cs int64, m, k int)      { panic(noDotKernel) }
func bf16DotPackB(dst []uint16, b unsafe.Pointer, rs, cs int64, k, n0, n1 int) { panic(noDotKernel) }
func bf16DotGemm(pa, pb []uint16, m, n, k int, c unsafe.Pointer, ldc int, add bool) {
	panic(noDotKernel)
}
func f32DotPackA(dst []float32, a unsafe.Pointer, rs, cs int64, m, k int) { panic(noDotKernel) }
func f32DotPackB(dst []float32, b unsafe.Pointer, rs, cs int64, k, n int) { panic(noDotKernel) }

func f32DotTiles(pa, pb []float32, m, n, k int, alpha, beta float32, c unsafe.Pointer, ldc int) {
	panic(noDotKernel)
}

func f32DotConvFwd(pa, x, y []float32, g convGeom, p ConvParams, s *f32ConvScratch) {
	panic(noDotKernel)
}

func f32ConvWeightGrad(acc []float32, gout, in Tensor, n0, s, gi int, g convGeom, p ConvParams, xp []float32) {
	panic(noDotKernel)
}
func f32LaneSums(acc, dst []float32) { panic(noDotKernel) }
func f32ConvInputGrad(pa, dy, dx []float32, g convGeom, p ConvParams, s *f32GradScratch) {
	panic(noDotKernel)
}
