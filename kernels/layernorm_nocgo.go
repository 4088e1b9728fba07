//go:build !cgo

package kernels

import "unsafe"

const haveCNorm = false

func lnFwdC(x unsafe.Pointer, xs int64, out unsafe.Pointer, os int64, rows, D int64, g, b []float32, eps float32, mean, rstd []float32) {
	panic("lnFwdC without cgo")
}

func lnBwdC(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, gin unsafe.Pointer, gs int64, rows, D int64,
	g, mu, rs, tmp []float32) {
	panic("lnBwdC without cgo")
}

func lnBwdColsC(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, rows, n int64, mu, rs, dw, db []float32) {
	panic("lnBwdColsC without cgo")
}
