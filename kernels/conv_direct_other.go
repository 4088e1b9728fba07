//go:build !cgo || !amd64

package kernels

// Without cgo on amd64 the direct convolution kernels do not exist; convDirectFwdOK and
// convDirectBwdOK are false (f32DotCPU is), so these are never called.

// dconvAVX2: no AVX2 direct kernels either.
var dconvAVX2 = false

const noDirectConv = "the direct convolution kernels need cgo on amd64"

func dconvF32(xp, wt []float32, koff []int64, d dconvGeom, y, bias []float32) { panic(noDirectConv) }
func dconvPad(dst, src []float32, c, h, w, top, left, hp, wp int)             { panic(noDirectConv) }
func dconvWeightGradF32(xp []float32, koff []int64, dyt []float32, d dconvGeom, sums []float32) {
	panic(noDirectConv)
}
func dconvTranspose(dst, src []float32, o, p, op int) { panic(noDirectConv) }

func dconvBF16(xp, wt []uint32, koff []int64, d dconvGeom, y, bias []float32) { panic(noDirectConv) }
func dconvPadPairs(dst []uint32, src []uint16, c, h, w, top, left, hp, wp int) {
	panic(noDirectConv)
}
func dconvPad16(dst, src []uint16, c, h, w, top, left, hp, wp int) { panic(noDirectConv) }
func dconvWeightGradBF16(xp []uint16, koff []int64, dyt []uint32, d dconvGeom, sums []float32) {
	panic(noDirectConv)
}
func dconvTransposePairs(dst []uint32, src []uint16, o, oh, ow, op int) { panic(noDirectConv) }

func lconvF32(xp, wt []float32, koff []int64, d dconvGeom, y, bias []float32) { panic(noDirectConv) }
