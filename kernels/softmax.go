package kernels

import (
	"fmt"
	"math"
)

// Softmax / log-softmax over the N axis of in [M,N] into out [M,N]; computed in float32
// for float32/bf16/fp16 (float64 sums) and float64 for float64.
func Softmax(log bool, out, in Tensor) error {
	if in.Dim() != 2 || out.Dim() != 2 || out.Sizes[0] != in.Sizes[0] || out.Sizes[1] != in.Sizes[1] {
		return fmt.Errorf("softmax: shapes %v, %v", out.Sizes, in.Sizes)
	}
	M, N := in.Sizes[0], in.Sizes[1]
	if N == 0 {
		return nil
	}
	oes := int64(out.DType.Size())
	ParallelFor(M, N*8, func(lo, hi int64) {
		x := make([]float64, N)
		r := newRowLoader(in)
		for m := lo; m < hi; m++ {
			var pos int64
			mx := math.Inf(-1)
			r.each(m, N, func(c []float64) {
				copy(x[pos:], c)
				for _, v := range c {
					if v > mx || v != v {
						mx = v
					}
				}
				pos += int64(len(c))
			})
			s := 0.0
			if useF32(in.DType) {
				m32 := float32(mx)
				for i, v := range x {
					e := float64(float32(math.Exp(float64(float32(v) - m32))))
					if !log {
						x[i] = e
					}
					s += e
				}
			} else {
				for i, v := range x {
					e := math.Exp(v - mx)
					if !log {
						x[i] = e
					}
					s += e
				}
			}
			if log {
				ls := mx + math.Log(s)
				if math.IsInf(mx, 0) {
					ls = mx + math.Log(s)
				}
				for i, v := range x {
					x[i] = v - ls
				}
			} else {
				inv := 1 / s
				for i, v := range x {
					x[i] = v * inv
				}
			}
			storeFloat(at(out.Ptr, m*out.Strides[0]*oes), out.Strides[1]*oes, out.DType, x)
		}
	})
	return nil
}

// SoftmaxBackward: gi = y*(g - sum(g*y)) for softmax, g - exp(y)*sum(g) for log-softmax,
// over the N axis of [M,N] operands.
func SoftmaxBackward(log bool, gi, g, y Tensor) error {
	for _, t := range []Tensor{g, y} {
		if t.Dim() != 2 || gi.Dim() != 2 || t.Sizes[0] != gi.Sizes[0] || t.Sizes[1] != gi.Sizes[1] {
			return fmt.Errorf("softmax_backward: shapes %v, %v", gi.Sizes, t.Sizes)
		}
	}
	M, N := gi.Sizes[0], gi.Sizes[1]
	if N == 0 {
		return nil
	}
	oes := int64(gi.DType.Size())
	ParallelFor(M, N*4, func(lo, hi int64) {
		gv := make([]float64, N)
		yv := make([]float64, N)
		rg, ry := newRowLoader(g), newRowLoader(y)
		for m := lo; m < hi; m++ {
			loadRow(rg, m, N, gv)
			loadRow(ry, m, N, yv)
			s := 0.0
			if log {
				for _, v := range gv {
					s += v
				}
				for i := range gv {
					gv[i] -= math.Exp(yv[i]) * s
				}
			} else {
				for i := range gv {
					s += gv[i] * yv[i]
				}
				for i := range gv {
					gv[i] = yv[i] * (gv[i] - s)
				}
			}
			storeFloat(at(gi.Ptr, m*gi.Strides[0]*oes), gi.Strides[1]*oes, gi.DType, gv)
		}
	})
	return nil
}

func loadRow(r *rowLoader, m, N int64, dst []float64) {
	var pos int64
	r.each(m, N, func(c []float64) {
		copy(dst[pos:], c)
		pos += int64(len(c))
	})
}
