//go:build !cgo

package kernels

import "unsafe"

// maskedFillRun is the select over n elements of es (2 or 4) bytes.
func maskedFillRun(o, s, m unsafe.Pointer, n, es int64, bits uint32) {
	maskedFillGo(o, s, m, n, es, bits)
}
