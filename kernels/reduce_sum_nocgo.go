//go:build !cgo

package kernels

import "unsafe"

const cgoCascadeMin = 1 << 62 // no C: always the Go loops

func cascadeC[A sumFloat](p unsafe.Pointer, is, size, nrows, power int64, acc []A) {
	panic("cascadeC without cgo")
}

func innerC[A sumFloat](base unsafe.Pointer, rs, rows, size0, L, power int64, acc, out []A) {
	panic("innerC without cgo")
}

func cascadeBF16C(p unsafe.Pointer, is, size, nrows, power int64, out []float32) {
	panic("cascadeBF16C without cgo")
}
