//go:build !cgo || !amd64

package kernels

import "unsafe"

// Without cgo on amd64 the float32 batch norm runs the portable C (or Go) kernels.
var bnF32Vec = false

const noBNF32Vec = "the AVX-512 float32 batch-norm kernels need cgo on amd64"

func bnMomentsF32V(x unsafe.Pointer, ns, N, S int64) (mean, ss float64) { panic(noBNF32Vec) }
func bnApplyF32V(x unsafe.Pointer, xns int64, o unsafe.Pointer, ons, N, S int64, sd, hd float64) {
	panic(noBNF32Vec)
}
func bnBwdSumsF32V(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns, N, S int64, mean float64) (float64, float64) {
	panic(noBNF32Vec)
}
func bnBwdApplyF32V(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns int64, o unsafe.Pointer, ons, N, S int64,
	mean, gm, k, invstd, wc float64, training bool) {
	panic(noBNF32Vec)
}
