//go:build !cgo

package kernels

import "unsafe"

// Without cgo layer norm takes layernorm.go's generic rows (lnAVX2 is false).
var lnAVX2 = false

func lnFwdAVX2(x unsafe.Pointer, xs int64, out unsafe.Pointer, os int64, rows, D int64, g, b []float32, eps float64,
	mean, rstd []float32) {
	panic("lnFwdAVX2 without cgo")
}

func lnBwdAVX2(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, gin unsafe.Pointer, gs int64, rows, D int64,
	g, mu, rs, pdw, pdb []float32) {
	panic("lnBwdAVX2 without cgo")
}

func lnColSumAVX2(p []float32, nb, D int64, out []float32) { panic("lnColSumAVX2 without cgo") }
