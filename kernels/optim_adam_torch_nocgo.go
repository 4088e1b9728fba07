//go:build !cgo

package kernels

import "math"

// Without cgo Go's math.Pow stands in for libm's pow (Python's `**`), which can differ in
// the last bit of a bias correction.
func libmPow(x, y float64) float64 { return math.Pow(x, y) }

func adamTorchRun(consts []adamTorchConsts, ops []adamTorchOperands, parts []optPart) {
	for _, pt := range parts {
		adamTorchChunkGo(&consts[pt.ti], &ops[pt.ti], pt.lo, pt.hi)
	}
}
