//go:build !cgo || !amd64

package kernels

import "unsafe"

// Without cgo on amd64 there is no blocked bfloat16 kernel (bf16DotCPU is false, so
// nothing calls these).
const (
	gbMR = 6
	gbNR = 64
)

func gbPackA(dst []uint16, a unsafe.Pointer, rs, cs int64, m, k, p0, p1 int) { panic(noDotKernel) }
func gbPackB(dst []uint16, b unsafe.Pointer, rs, cs int64, k, n, q0, q1 int) { panic(noDotKernel) }
func gbTiles(pa unsafe.Pointer, lda int64, pb []uint16, m, n, k, p0, p1, q0, q1, kk0, kk1 int, e *gbEpilogue) {
	panic(noDotKernel)
}
