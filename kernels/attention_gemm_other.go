//go:build !cgo || !amd64

package kernels

import "unsafe"

func attGemmC(m, n, k int64, a unsafe.Pointer, ars, acs int64, b unsafe.Pointer, ldb int64, c unsafe.Pointer, ldc int64,
	alpha float32, accum bool, rs []float32, kind attCausalKind, off int64) {
	panic("attention: no AVX-512 product in this build")
}

// attGemmFast: this build has only the sgemm path.
var attGemmFast = false
