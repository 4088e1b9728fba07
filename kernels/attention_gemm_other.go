//go:build !cgo || !amd64

package kernels

import "unsafe"

func attGemmC(m, n, k int64, a unsafe.Pointer, ars, acs int64, b unsafe.Pointer, ldb int64, c unsafe.Pointer, ldc int64,
	alpha float32, accum bool, rs []float32, kind attCausalKind, off int64) {
	panic("attention: no AVX-512 product in this build")
}

// attGemmFast: this build has only the sgemm path.
var attGemmFast = false

// attFused: this build has no fused block loops (the Go loops run instead).
func attFused() bool { return false }

func attFwdQBlock(rows, i0, S, D, Dv int64, q unsafe.Pointer, ldq int64, kt []float32, v unsafe.Pointer, ldv int64,
	scale float32, causal bool, st, ot, m, l, alpha []float32) {
	panic("attention: no fused loops in this build")
}

func attBwdKBlock(L, j0, cols, D, Dv int64, q unsafe.Pointer, ldq int64, dout unsafe.Pointer, lddo int64,
	ktb, vtb unsafe.Pointer, kp unsafe.Pointer, ldk int64, lse, delta []float32, scale float32, causal bool,
	acc, dkt, dvt, pt, dpt []float32) {
	panic("attention: no fused loops in this build")
}
