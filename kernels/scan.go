package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Scans along the last dim of [M, N] views, with torch's CPU accumulation rules
// (cpu_cum_base_kernel): the running value is kept in at::acc_type<T, false> (double for
// float32, float for bf16/fp16, int64 for integers) and rounded to the output's dtype at
// each position.

// Scan kinds.
const (
	ScanSum       = iota // cumsum (integers; floats have their own kernel)
	ScanProd             // cumprod
	ScanLogSumExp        // logcumsumexp (floats)
	scanKinds
)

// scanAccF rounds a running float value as the CPU accumulator type of dt does.
func scanAccF(dt DType) func(float64) float64 {
	if dt == Float32 || dt == Float64 {
		return func(v float64) float64 { return v } // accumulates in double
	}
	return func(v float64) float64 { return float64(float32(v)) } // bf16/fp16: in float
}

// logAddExp is torch's _log_add_exp_helper(x, y) (NaN propagates; two equal infinities
// give x).
func logAddExp(x, y float64) float64 {
	lo, hi := math.Min(x, y), math.Max(x, y)
	if math.IsNaN(y) {
		lo, hi = y, y
	} else if math.IsNaN(x) {
		lo, hi = x, x
	}
	if lo != hi || !math.IsInf(lo, 0) {
		return math.Log1p(math.Exp(lo-hi)) + hi
	}
	return x
}

// Scan runs kind over each row of in [M, N] into out [M, N] (out's dtype is the result's).
func Scan(kind int, out, in Tensor) error {
	if kind < 0 || kind >= scanKinds {
		return fmt.Errorf("unknown scan kind %d", kind)
	}
	if out.Dim() != 2 || in.Dim() != 2 || out.Sizes[0] != in.Sizes[0] || out.Sizes[1] != in.Sizes[1] {
		return fmt.Errorf("expected [M, N] operands of one shape, got out %v, in %v", out.Sizes, in.Sizes)
	}
	float := out.DType.IsFloat()
	if kind == ScanLogSumExp && !float {
		return fmt.Errorf("logcumsumexp needs a floating result, got %v", out.DType)
	}
	M, N := in.Sizes[0], in.Sizes[1]
	ies, oes := int64(in.DType.Size()), int64(out.DType.Size())
	acc := scanAccF(out.DType)
	ParallelFor(M, N, func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			src := at(in.Ptr, r*in.Strides[0]*ies)
			dst := at(out.Ptr, r*out.Strides[0]*oes)
			elem := func(j int64) unsafe.Pointer { return at(src, j*in.Strides[1]*ies) }
			put := func(j int64) unsafe.Pointer { return at(dst, j*out.Strides[1]*oes) }
			switch {
			case float && kind == ScanLogSumExp:
				c := math.Inf(-1)
				for j := int64(0); j < N; j++ {
					c = acc(logAddExp(acc(ixGetF(elem(j), in.DType)), c))
					ixSetF(put(j), out.DType, c)
				}
			case float:
				c := 0.0
				if kind == ScanProd {
					c = 1
				}
				for j := int64(0); j < N; j++ {
					x := ixGetF(elem(j), in.DType)
					if kind == ScanProd {
						c = acc(c * x)
					} else {
						c = acc(c + x)
					}
					ixSetF(put(j), out.DType, c)
				}
			default:
				var c int64
				if kind == ScanProd {
					c = 1
				}
				for j := int64(0); j < N; j++ {
					x := ixGetI(elem(j), in.DType)
					if kind == ScanProd {
						c *= x
					} else {
						c += x
					}
					ixSetI(put(j), out.DType, c)
				}
			}
		}
	})
	return nil
}

// CumMaxMin is torch's cummax/cummin over each row of in [M, N]: the running extreme
// (a later equal element takes over, as CPU's >= / <= comparison does; NaN wins and each
// later NaN takes over) and its index.
func CumMaxMin(isMin bool, values, indices, in Tensor) error {
	if values.DType != in.DType || indices.DType != Int64 {
		return fmt.Errorf("dtypes: values %v (in %v), indices %v", values.DType, in.DType, indices.DType)
	}
	for _, t := range []Tensor{values, indices, in} {
		if t.Dim() != 2 || t.Sizes[0] != in.Sizes[0] || t.Sizes[1] != in.Sizes[1] {
			return fmt.Errorf("expected [M, N] operands of one shape")
		}
	}
	M, N := in.Sizes[0], in.Sizes[1]
	es := int64(in.DType.Size())
	float := in.DType.IsFloat()
	ParallelFor(M, N, func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			src := at(in.Ptr, r*in.Strides[0]*es)
			vdst := at(values.Ptr, r*values.Strides[0]*es)
			idst := at(indices.Ptr, r*indices.Strides[0]*8)
			best := int64(0)
			bf := 0.0
			var bi int64
			for j := int64(0); j < N; j++ {
				p := at(src, j*in.Strides[1]*es)
				if float {
					x := ixGetF(p, in.DType)
					take := j == 0 || math.IsNaN(x) || (!math.IsNaN(bf) && ((isMin && x <= bf) || (!isMin && x >= bf)))
					if take {
						bf, best = x, j
					}
				} else {
					x := ixGetI(p, in.DType)
					if j == 0 || (isMin && x <= bi) || (!isMin && x >= bi) {
						bi, best = x, j
					}
				}
				ixCopyElem(at(vdst, j*values.Strides[1]*es), at(src, best*in.Strides[1]*es), int(es))
				*(*int64)(at(idst, j*indices.Strides[1]*8)) = best
			}
		}
	})
	return nil
}
