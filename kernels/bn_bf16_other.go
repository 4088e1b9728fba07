//go:build !cgo || !amd64

package kernels

import "unsafe"

// Without cgo on amd64 the bfloat16 batch norm runs the portable C (or Go) kernels.
var bnBF16Vec = false

const noBNVec = "the AVX-512 batch-norm kernels need cgo on amd64"

func bnMomentsBF16V(x unsafe.Pointer, ns, N, S int64) (mean, ss float64) { panic(noBNVec) }
func bnApplyBF16V(x unsafe.Pointer, xns int64, o unsafe.Pointer, ons, N, S int64, sd, hd float64) {
	panic(noBNVec)
}
func bnBwdSumsBF16V(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns, N, S int64, mean float64) (float64, float64) {
	panic(noBNVec)
}
func bnBwdApplyBF16V(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns int64, o unsafe.Pointer, ons, N, S int64,
	mean, gm, k, invstd, wc float64, training bool) {
	panic(noBNVec)
}
