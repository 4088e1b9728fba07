package kernels

import "fmt"

// Arange writes out[i] = start + i*step (1-D out). Integral dtypes use istart/istep in
// int64 arithmetic; floating ones compute in float64 and round once.
func Arange(out Tensor, isInt bool, istart, istep int64, start, step float64) error {
	if out.Dim() != 1 {
		return fmt.Errorf("out must be 1-D, got %v", out.Sizes)
	}
	dt := out.DType
	es := out.Strides[0] * int64(dt.Size())
	ParallelFor(out.Numel(), 1, func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			p := at(out.Ptr, i*es)
			if isInt {
				ixSetI(p, dt, istart+i*istep)
			} else {
				ixSetF(p, dt, start+float64(i)*step)
			}
		}
	})
	return nil
}

// Linspace writes n evenly spaced values from start to end (1-D float out): the first
// half steps up from start, the second half down from end, so both ends are exact
// (a single step is start).
func Linspace(out Tensor, start, end float64) error {
	if out.Dim() != 1 || !out.DType.IsFloat() {
		return fmt.Errorf("out must be a 1-D floating point tensor, got %v %v", out.DType, out.Sizes)
	}
	n := out.Sizes[0]
	dt := out.DType
	es := out.Strides[0] * int64(dt.Size())
	step := 0.0
	if n > 1 {
		step = (end - start) / float64(n-1)
	}
	half := n / 2
	ParallelFor(n, 1, func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			v := start + step*float64(i)
			if i >= half && n > 1 {
				v = end - step*float64(n-i-1)
			}
			ixSetF(at(out.Ptr, i*es), dt, v)
		}
	})
	return nil
}
