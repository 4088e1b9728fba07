//go:build !cgo || !amd64

package kernels

import "unsafe"

var f32SmallCPU = false

func f32SmallCall(m, n, k int, a unsafe.Pointer, ars, acs int64, b unsafe.Pointer, ldb int, c unsafe.Pointer, ldc int) {
	panic("f32SmallCall without cgo")
}
