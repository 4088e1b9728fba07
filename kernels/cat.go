package kernels

import "fmt"

// ixNarrowView is t restricted to [start, start+length) along dim.
func ixNarrowView(t Tensor, dim int, start, length int64) Tensor {
	v := Tensor{Ptr: at(t.Ptr, start*t.Strides[dim]*int64(t.DType.Size())), DType: t.DType,
		Sizes: append([]int64{}, t.Sizes...), Strides: t.Strides}
	v.Sizes[dim] = length
	return v
}

// Cat writes the inputs one after another along dim into out, converting each input's
// dtype to out's as torch.cat does after type promotion. Inputs must match out's shape
// except along dim, and their sizes along dim must add up to out's.
func Cat(out Tensor, ins []Tensor, dim int) error {
	if dim < 0 || dim >= out.Dim() {
		return fmt.Errorf("dim %d out of range for a %d-D output", dim, out.Dim())
	}
	var total int64
	for i, t := range ins {
		if t.Dim() != out.Dim() {
			return fmt.Errorf("input %d has %d dims, output %d", i, t.Dim(), out.Dim())
		}
		for d := range t.Sizes {
			if d != dim && t.Sizes[d] != out.Sizes[d] {
				return fmt.Errorf("input %d has shape %v, output %v (dim %d)", i, t.Sizes, out.Sizes, dim)
			}
		}
		total += t.Sizes[dim]
	}
	if total != out.Sizes[dim] {
		return fmt.Errorf("inputs add up to %d along dim %d, output has %d", total, dim, out.Sizes[dim])
	}
	var off int64
	for _, t := range ins {
		if err := Copy(ixNarrowView(out, dim, off, t.Sizes[dim]), t); err != nil {
			return err
		}
		off += t.Sizes[dim]
	}
	return nil
}
