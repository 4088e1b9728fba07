//go:build !cgo

package kernels

import "unsafe"

// Without cgo bfloat16 layer norm takes layernorm.go's generic rows (haveBF16Rows is false).

func lnFwdBF16C(x unsafe.Pointer, xs int64, out unsafe.Pointer, os int64, rows, D int64, g, b []float32, eps float32,
	mean, rstd, buf []float32) {
	panic("lnFwdBF16C without cgo")
}

func lnBwdBF16C(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, gin unsafe.Pointer, gs int64, rows, D int64,
	g, mu, rs, dw, db, xb, gb []float32) {
	panic("lnBwdBF16C without cgo")
}
