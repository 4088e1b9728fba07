package kernels

import (
	"fmt"
	"unsafe"
)

var ixZeroElem [8]byte

// Tri writes out = tril(in, k) (upper false) or triu(in, k) (upper true) over the last
// two dims; out may be in itself (in-place).
func Tri(out, in Tensor, k int64, upper bool) error {
	if out.DType != in.DType {
		return fmt.Errorf("dtype mismatch: out %v, input %v", out.DType, in.DType)
	}
	if in.Dim() < 2 {
		return fmt.Errorf("input tensor must have at least 2 dimensions")
	}
	if err := ixSameShape(in.Sizes, []string{"out"}, out); err != nil {
		return err
	}
	d := in.Dim()
	R, C := in.Sizes[d-2], in.Sizes[d-1]
	rows := in.Numel() / max(C, 1)
	if in.Numel() == 0 {
		return nil
	}
	es := int64(in.DType.Size())
	ost, ist := ixByteStrides(out), ixByteStrides(in)
	zero := unsafe.Pointer(&ixZeroElem)
	ParallelFor(rows, C, func(lo, hi int64) {
		r := lo
		ixWalkRange(in.Sizes[:d-1], [][]int64{ost[:d-1], ist[:d-1]}, lo, hi, func(offs []int64) {
			i := r % R
			r++
			for j := int64(0); j < C; j++ {
				keep := j-i <= k
				if upper {
					keep = j-i >= k
				}
				dst := at(out.Ptr, offs[0]+j*ost[d-1])
				if keep {
					ixCopyElem(dst, at(in.Ptr, offs[1]+j*ist[d-1]), int(es))
				} else {
					ixCopyElem(dst, zero, int(es))
				}
			}
		})
	})
	return nil
}
