//go:build !cgo

package kernels

import (
	"math"
	"unsafe"
)

// softmaxRowsC: no C without cgo; the caller takes the Go rows.
func softmaxRowsC(x unsafe.Pointer, xs int64, y unsafe.Pointer, ys int64, rows, n int64, log, lastDim bool, bad []uint8,
	bf16 bool) bool {
	return false
}

func softmaxBwdRowsC(g unsafe.Pointer, gs int64, y unsafe.Pointer, ys int64, o unsafe.Pointer, os int64, rows, n int64, log,
	seq bool) bool {
	return false
}

func logC(v float64) float64 { return math.Log(v) }
