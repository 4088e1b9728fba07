//go:build !cgo || !amd64

package kernels

import "unsafe"

var f32SmallCPU = false

func f32SmallCall(i0, i1, j0, j1, k int, a unsafe.Pointer, ars, acs int64, b unsafe.Pointer, ldb int,
	c unsafe.Pointer, ldc int, alpha, beta float32) {
	panic("f32SmallCall without cgo")
}

func f32SmallPackBT(dst []float32, b unsafe.Pointer, ldb, k, n, j0, j1 int) {
	panic("f32SmallPackBT without cgo")
}
