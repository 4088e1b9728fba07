package kernels

import (
	"fmt"
	"math"
)

// Segment reductions (torch.segment_reduce): data [outer, L, inner] is cut along L into the
// segments offsets[o, s] .. offsets[o, s+1], each reduced to out[o, s, :]. torch's CPU kernel
// accumulates in the data type itself, element by element in segment order (so bfloat16
// sums round at every step); these kernels do the same arithmetic with the same rounding,
// including the dtype-rounded segment length a mean divides by.

// Segment reductions, in torch's SegmentReductionType order.
const (
	SegMax  = 0
	SegMean = 1
	SegMin  = 2
	SegSum  = 3
	SegProd = 4
)

// dtRound rounds v to dt's precision (float64 kept).
func dtRound(dt DType, v float64) float64 {
	switch dt {
	case Float64:
		return v
	case Float32:
		return float64(float32(v))
	}
	return float64(roundTo(dt, float32(v)))
}

type view3 struct {
	t  Tensor
	es int64
}

func (v view3) ptrOff(a, b, c int64) int64 {
	s := v.t.Strides
	return (a*s[0] + b*s[1] + c*s[2]) * v.es
}

func (v view3) get(a, b, c int64) float64 { return ixGetF(at(v.t.Ptr, v.ptrOff(a, b, c)), v.t.DType) }

func (v view3) set(a, b, c int64, x float64) { ixSetF(at(v.t.Ptr, v.ptrOff(a, b, c)), v.t.DType, x) }

func newView3(t Tensor) view3 { return view3{t: t, es: int64(t.DType.Size())} }

// segOffsets loads and checks offsets [outer, S+1] against a segment axis of length L.
func segOffsets(offsets Tensor, outer, L int64) ([]int64, int64, error) {
	if offsets.Dim() != 2 || offsets.Sizes[0] != outer || offsets.Sizes[1] < 1 {
		return nil, 0, fmt.Errorf("segment_reduce: offsets %v, expected [%d, segments+1]", offsets.Sizes, outer)
	}
	if offsets.DType != Int64 && offsets.DType != Int32 {
		return nil, 0, fmt.Errorf("segment_reduce: offsets of dtype %v", offsets.DType)
	}
	n := offsets.Sizes[1]
	off := make([]int64, outer*n)
	es := int64(offsets.DType.Size())
	for o := int64(0); o < outer; o++ {
		for i := int64(0); i < n; i++ {
			v := ixGetI(at(offsets.Ptr, (o*offsets.Strides[0]+i*offsets.Strides[1])*es), offsets.DType)
			if v < 0 || v > L || (i > 0 && v < off[o*n+i-1]) {
				return nil, 0, fmt.Errorf("segment_reduce: segment bounds %d out of order or outside [0, %d]", v, L)
			}
			off[o*n+i] = v
		}
	}
	return off, n - 1, nil
}

func segCheck(reduce int, ts ...Tensor) error {
	if reduce < SegMax || reduce > SegProd {
		return fmt.Errorf("segment_reduce: unknown reduction %d", reduce)
	}
	for _, t := range ts {
		if t.Dim() != 3 {
			return fmt.Errorf("segment_reduce: expected 3-D views, got %v", t.Sizes)
		}
		switch t.DType {
		case Float32, Float64, BFloat16, Float16:
		default:
			return fmt.Errorf("segment_reduce: unsupported dtype %v", t.DType)
		}
	}
	return nil
}

// segInitial is the value a segment's reduction starts from.
func segInitial(reduce int, hasInit bool, init float64, dt DType) float64 {
	if hasInit {
		return dtRound(dt, init)
	}
	switch reduce {
	case SegMax:
		return math.Inf(-1)
	case SegMin:
		return math.Inf(1)
	case SegProd:
		return 1
	}
	return 0
}

// SegmentReduce fills out [outer, S, inner] with the reductions of data [outer, L, inner]
// over the segments of offsets [outer, S+1].
func SegmentReduce(out, data, offsets Tensor, reduce int, hasInit bool, init float64) error {
	if err := segCheck(reduce, out, data); err != nil {
		return err
	}
	outer, L, inner := data.Sizes[0], data.Sizes[1], data.Sizes[2]
	off, S, err := segOffsets(offsets, outer, L)
	if err != nil {
		return err
	}
	if out.Sizes[0] != outer || out.Sizes[1] != S || out.Sizes[2] != inner {
		return fmt.Errorf("segment_reduce: output %v, expected [%d %d %d]", out.Sizes, outer, S, inner)
	}
	dt := data.DType
	dv, ov := newView3(data), newView3(out)
	ParallelFor(outer*S, inner*(L/max(S, 1)+1), func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			o, s := r/S, r%S
			a, b := off[o*(S+1)+s], off[o*(S+1)+s+1]
			for i := int64(0); i < inner; i++ {
				acc := segInitial(reduce, hasInit, init, dt)
				for j := a; j < b; j++ {
					v := dv.get(o, j, i)
					switch reduce {
					case SegMax:
						if math.IsNaN(v) || acc < v {
							acc = v
						}
					case SegMin:
						if math.IsNaN(v) || v < acc {
							acc = v
						}
					case SegSum, SegMean:
						acc = dtRound(dt, acc+v)
					case SegProd:
						acc = dtRound(dt, acc*v)
					}
				}
				if reduce == SegMean {
					if b == a && !hasInit {
						acc = math.NaN()
					} else if b > a && !math.IsNaN(acc) {
						acc = dtRound(dt, acc/dtRound(dt, float64(b-a)))
					}
				}
				ov.set(o, s, i, acc)
			}
		}
	})
	return nil
}

// SegmentReduceBackward writes into gin (like data, zero-filled by the caller) the gradient
// of SegmentReduce for grad and its output, as torch's CPU kernel defines it: max/min split
// the gradient among the (NaN or) tied extremes (only positive shares are divided, as in
// torch), prod divides grad*output by each element or, for zeros and NaNs, multiplies out the
// others.
func SegmentReduceBackward(gin, grad, output, data, offsets Tensor, reduce int, hasInit bool, init float64) error {
	if err := segCheck(reduce, gin, grad, output, data); err != nil {
		return err
	}
	outer, L, inner := data.Sizes[0], data.Sizes[1], data.Sizes[2]
	off, S, err := segOffsets(offsets, outer, L)
	if err != nil {
		return err
	}
	for _, t := range []Tensor{grad, output} {
		if t.Sizes[0] != outer || t.Sizes[1] != S || t.Sizes[2] != inner {
			return fmt.Errorf("segment_reduce backward: %v, expected [%d %d %d]", t.Sizes, outer, S, inner)
		}
	}
	if fmt.Sprint(gin.Sizes) != fmt.Sprint(data.Sizes) {
		return fmt.Errorf("segment_reduce backward: grad_input %v, expected %v", gin.Sizes, data.Sizes)
	}
	dt := data.DType
	dv, gv, ov, iv := newView3(data), newView3(grad), newView3(output), newView3(gin)
	prodInit := 1.0
	if hasInit {
		prodInit = dtRound(dt, init)
	}
	ParallelFor(outer*S, inner*(L/max(S, 1)+1), func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			o, s := r/S, r%S
			a, b := off[o*(S+1)+s], off[o*(S+1)+s+1]
			if a == b {
				continue
			}
			for i := int64(0); i < inner; i++ {
				g, y := gv.get(o, s, i), ov.get(o, s, i)
				switch reduce {
				case SegMax, SegMin:
					var counter int64
					for j := a; j < b; j++ {
						if v := dv.get(o, j, i); math.IsNaN(v) || v == y {
							iv.set(o, j, i, g)
							counter++
						}
					}
					if counter < 2 {
						continue
					}
					c := dtRound(dt, float64(counter))
					for j := a; j < b; j++ {
						if x := iv.get(o, j, i); x > 0 {
							iv.set(o, j, i, dtRound(dt, x/c))
						}
					}
				case SegMean:
					gm := dtRound(dt, g/dtRound(dt, float64(b-a)))
					for j := a; j < b; j++ {
						iv.set(o, j, i, gm)
					}
				case SegSum:
					for j := a; j < b; j++ {
						iv.set(o, j, i, g)
					}
				case SegProd:
					gy := dtRound(dt, g*y)
					for j := a; j < b; j++ {
						v := dv.get(o, j, i)
						if math.IsNaN(v) || v == 0 {
							excl := prodInit
							for k := a; k < b; k++ {
								if k != j {
									excl = dtRound(dt, excl*dv.get(o, k, i))
								}
							}
							iv.set(o, j, i, dtRound(dt, g*excl))
							continue
						}
						iv.set(o, j, i, dtRound(dt, gy/v))
					}
				}
			}
		}
	})
	return nil
}
