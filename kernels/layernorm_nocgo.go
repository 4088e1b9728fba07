//go:build !cgo

package kernels

import "unsafe"

const haveCNorm = false

func lnFwdC(x unsafe.Pointer, xs int64, out unsafe.Pointer, os int64, rows, D int64, g, b []float32, eps float32, mean, rstd []float32,
	reduced bool) {
	panic("lnFwdC without cgo")
}

func lnBwdC(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, gin unsafe.Pointer, gs int64, rows, D int64,
	g, mu, rs, tmp []float32) {
	panic("lnBwdC without cgo")
}

func lnBwdColsC(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, rows, n int64, mu, rs, dw, db []float32) {
	panic("lnBwdColsC without cgo")
}

func bnSumC(x unsafe.Pointer, ns, N, S int64, mean float64, sq bool) float64 {
	panic("bnSumC without cgo")
}

func bnApplyC(x unsafe.Pointer, xns int64, o unsafe.Pointer, ons, N, S int64, sd, hd float64) {
	panic("bnApplyC without cgo")
}

func bnBwdSumsC(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns, N, S int64, mean float64) (float64, float64) {
	panic("bnBwdSumsC without cgo")
}

func bnBwdApplyC(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns int64, o unsafe.Pointer, ons, N, S int64,
	mean, gm, k, invstd, wc float64, training bool) {
	panic("bnBwdApplyC without cgo")
}

func bnSumBF16C(x unsafe.Pointer, ns, N, S int64, mean float64, sq bool) float64 {
	panic("bnSumBF16C without cgo")
}

func bnApplyBF16C(x unsafe.Pointer, xns int64, o unsafe.Pointer, ons, N, S int64, sd, hd float64) {
	panic("bnApplyBF16C without cgo")
}

func bnBwdSumsBF16C(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns, N, S int64, mean float64) (float64, float64) {
	panic("bnBwdSumsBF16C without cgo")
}

func bnBwdApplyBF16C(x unsafe.Pointer, xns int64, g unsafe.Pointer, gns int64, o unsafe.Pointer, ons, N, S int64,
	mean, gm, k, invstd, wc float64, training bool) {
	panic("bnBwdApplyBF16C without cgo")
}
