//go:build !cgo

package kernels

import "unsafe"

// Without cgo the bfloat16 rows take softmax.go's generic path.
const haveBF16Rows = false

func softmaxBF16C(x unsafe.Pointer, xs int64, y unsafe.Pointer, ys int64, rows, n int64, log bool, buf []float32) {
	panic("softmaxBF16C without cgo")
}

func softmaxBwdBF16C(g unsafe.Pointer, gs int64, y unsafe.Pointer, ys int64, o unsafe.Pointer, os int64, rows, n int64,
	log bool) {
	panic("softmaxBwdBF16C without cgo")
}
