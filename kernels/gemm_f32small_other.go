//go:build !cgo || !amd64

package kernels

import "unsafe"

var f32SmallCPU = false

func f32SmallCall(i0, i1, j0, j1, k int, a unsafe.Pointer, lda int, ta bool, b unsafe.Pointer, ldb int, tb bool,
	bs []float32, c unsafe.Pointer, ldc int, alpha, beta float32, bias unsafe.Pointer) {
	panic("f32SmallCall without cgo")
}
