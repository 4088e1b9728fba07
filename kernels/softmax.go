package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Softmax and log-softmax follow torch's CPU kernels operation by operation, so results
// round the way the CPU's do. Every operand is an [M,N] view with the softmax axis last.
//
// float32, bfloat16 and float16 compute in float32 (float64 in float64) and round once
// on store, except where torch's kernel itself rounds an intermediate to the input dtype:
//   - log_softmax over the last dim of a reduced-precision input keeps the row sum of
//     exp and its log in the input dtype (scalar_t buffers in the CPU kernel);
//   - softmax over a non-last dim rounds exp(x - max) to the input dtype before the
//     division in the scalar tail of each inner block (columns past the last full vector
//     of SoftmaxVecLanes).
//
// SoftmaxOpts carries where the axis was in the caller's tensor.
type SoftmaxOpts struct {
	LastDim bool  // the axis is the input's last dim (torch's *_lastdim kernels)
	Inner   int64 // product of the sizes after the axis (rows m have column m % Inner)
}

// SoftmaxVecLanes is the width of torch's Vectorized<BFloat16/Half> on AVX-512 (the CPU
// capability torch selects on the reference machine).
const SoftmaxVecLanes = 32

func isReduced(dt DType) bool { return dt == BFloat16 || dt == Float16 }

// roundTo rounds a float32 to dt's precision (identity for float32).
func roundTo(dt DType, v float32) float32 {
	switch dt {
	case BFloat16:
		return RoundBF16(v)
	case Float16:
		return F16ToF32(F32ToF16(v))
	}
	return v
}

func checkSame2D(name string, ts ...Tensor) error {
	for _, t := range ts {
		if t.Dim() != 2 || t.Sizes[0] != ts[0].Sizes[0] || t.Sizes[1] != ts[0].Sizes[1] {
			return fmt.Errorf("%s: operands must be the same 2-D shape, got %v and %v", name, ts[0].Sizes, t.Sizes)
		}
		if !t.DType.IsFloat() {
			return fmt.Errorf("%s: unsupported dtype %v", name, t.DType)
		}
	}
	return nil
}

// Softmax / log-softmax over the N axis of in [M,N] into out [M,N].
func Softmax(log bool, out, in Tensor, o SoftmaxOpts) error {
	if err := checkSame2D("softmax", out, in); err != nil {
		return err
	}
	M, N := in.Sizes[0], in.Sizes[1]
	if N == 0 || M == 0 {
		return nil
	}
	if o.Inner < 1 {
		o.Inner = 1
	}
	oes := int64(out.DType.Size())
	f64 := !useF32(in.DType)
	if in.DType == Float32 && out.DType == Float32 && in.Strides[1] == 1 && out.Strides[1] == 1 {
		// rows in place in out: the same float32 arithmetic without conversions
		ParallelFor(M, N*8, func(lo, hi int64) {
			row := func(t Tensor, m int64) []float32 {
				return unsafe.Slice((*float32)(at(t.Ptr, m*t.Strides[0]*4)), N)
			}
			if in.Ptr != out.Ptr && !noCSoftmax {
				bad := make([]uint8, hi-lo)
				if softmaxRowsC(at(in.Ptr, lo*in.Strides[0]*4), in.Strides[0], at(out.Ptr, lo*out.Strides[0]*4),
					out.Strides[0], hi-lo, N, log, o.LastDim, bad, false) {
					for j, b := range bad {
						if b != 0 { // a NaN row: torch's NaN handling
							y := row(out, lo+int64(j))
							copy(y, row(in, lo+int64(j)))
							softmaxRow32(log, y, Float32, o.LastDim, false)
						}
					}
					return
				}
			}
			var tmp []float32
			for m := lo; m < hi; m++ {
				x, y := row(in, m), row(out, m)
				if &x[0] == &y[0] { // in place: from a copy
					if tmp == nil {
						tmp = make([]float32, N)
					}
					copy(tmp, x)
					x = tmp
				}
				if !softmaxRowF32(log, y, x, o.LastDim) {
					copy(y, x)
					softmaxRow32(log, y, Float32, o.LastDim, false)
				}
			}
		})
		return nil
	}
	if in.DType == BFloat16 && out.DType == BFloat16 && o.LastDim && in.Strides[1] == 1 && out.Strides[1] == 1 &&
		haveBF16Rows && !noCSoftmax && !noBF16Rows {
		softmaxBF16Fused(log, out, in)
		return nil
	}
	if in.DType == BFloat16 && out.DType == BFloat16 && o.LastDim && in.Strides[1] == 1 && out.Strides[1] == 1 &&
		haveCNorm && !noCSoftmax {
		softmaxBF16Rows(log, out, in)
		return nil
	}
	ParallelFor(M, N*8, func(lo, hi int64) {
		r := newRowLoader(in)
		x := make([]float64, N)
		x32 := make([]float32, N)
		for m := lo; m < hi; m++ {
			loadRow(r, m, N, x)
			if f64 {
				softmaxRow64(log, x)
			} else {
				for i, v := range x {
					x32[i] = float32(v)
				}
				tail := !o.LastDim && m%o.Inner >= o.Inner/SoftmaxVecLanes*SoftmaxVecLanes
				softmaxRow32(log, x32, in.DType, o.LastDim, tail)
				for i, v := range x32 {
					x[i] = float64(v)
				}
			}
			storeFloat(at(out.Ptr, m*out.Strides[0]*oes), out.Strides[1]*oes, out.DType, x)
		}
	})
	return nil
}

func rowMax32(x []float32) float32 {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v > mx || v != v {
			mx = v
			if v != v {
				break
			}
		}
	}
	return mx
}

// exp32 is the softmax rows' exp: float32 arithmetic within an ulp of exp (expf32.h), as
// torch's vectorized CPU kernels compute it in float32 too.
func exp32(v float32) float32 { return expFloat32(v) }

// softmaxBwdRowF32 is one float32 row of SoftmaxBackward into o (which may alias g or
// y); softmax_cgo.go has the same in C for the last dim.
func softmaxBwdRowF32(log bool, o, g, y []float32, lastDim bool) {
	g, o = g[:len(y)], o[:len(y)]
	var s float32
	if log {
		if lastDim {
			s = vecSum(g, vecW32)
		} else {
			for _, v := range g {
				s += v
			}
		}
		for i, v := range y {
			o[i] = g[i] - float32(exp32(v)*s)
		}
		return
	}
	if lastDim {
		s = vecDot(g, y, vecW32)
	} else {
		for i, v := range g {
			s += float32(v * y[i])
		}
	}
	for i, v := range y {
		o[i] = (g[i] - s) * v
	}
}

// noCSoftmax forces the Go rows (tests compare them with the C ones).
var noCSoftmax bool

// sumExps adds a row's exps in the order of torch's kernel: over the last dim its
// 16-lane reduce_all, over another dim sequentially.
func sumExps(e []float32, lastDim bool) float32 {
	if lastDim {
		return vecSum(e, vecW32)
	}
	var s float32
	for _, v := range e {
		s += v
	}
	return s
}

// softmaxRowF32 is softmaxRow32 of a float32 row x into y (not aliased) with a cheaper
// max (no NaN test: a NaN reaches the sum of exps instead) and torch's summation order
// (sumExps); it reports false, leaving y undefined, when that sum is NaN and the caller
// must take softmaxRow32. softmax_cgo.go has the same in C.
func softmaxRowF32(log bool, y, x []float32, lastDim bool) bool {
	y = y[:len(x)]
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v > mx {
			mx = v
		}
	}
	var s float32
	if log {
		for i, v := range x {
			y[i] = exp32(v - mx)
		}
		s = sumExps(y, lastDim)
		if s != s {
			return false
		}
		ls := float32(math.Log(float64(s)))
		for i, v := range x {
			y[i] = (v - mx) - ls
		}
		return true
	}
	for i, v := range x {
		y[i] = exp32(v - mx)
	}
	s = sumExps(y, lastDim)
	if s != s {
		return false
	}
	if lastDim {
		inv := 1 / s
		for i, e := range y {
			y[i] = e * inv
		}
	} else {
		for i, e := range y {
			y[i] = e / s
		}
	}
	return true
}

// softmaxRow32 transforms one row in place (float32 math, dt the storage dtype).
func softmaxRow32(log bool, x []float32, dt DType, lastDim, tail bool) {
	mx := rowMax32(x)
	var s float32
	if log {
		for _, v := range x {
			s += exp32(v - mx)
		}
		var ls float32
		if lastDim && isReduced(dt) {
			ls = roundTo(dt, float32(math.Log(float64(roundTo(dt, s)))))
		} else {
			ls = float32(math.Log(float64(s)))
		}
		for i, v := range x {
			x[i] = (v - mx) - ls
		}
		return
	}
	for i, v := range x {
		e := exp32(v - mx)
		x[i] = e
		s += e
	}
	switch {
	case lastDim:
		inv := 1 / s
		for i, e := range x {
			x[i] = e * inv
		}
	case tail && isReduced(dt):
		for i, e := range x {
			x[i] = roundTo(dt, e) / s
		}
	default:
		for i, e := range x {
			x[i] = e / s
		}
	}
}

func softmaxRow64(log bool, x []float64) {
	mx := math.Inf(-1)
	for _, v := range x {
		if v > mx || v != v {
			mx = v
			if v != v {
				break
			}
		}
	}
	s := 0.0
	if log {
		for _, v := range x {
			s += math.Exp(v - mx)
		}
		ls := math.Log(s)
		for i, v := range x {
			x[i] = (v - mx) - ls
		}
		return
	}
	for i, v := range x {
		x[i] = math.Exp(v - mx)
		s += x[i]
	}
	for i, e := range x {
		x[i] = e / s
	}
}

// SoftmaxBackward: gi = y*(g - sum(g*y)) for softmax, g - exp(y)*sum(g) for log-softmax,
// over the N axis of [M,N] operands; float32 math (float64 for float64), rounded once.
// lastDim: the axis is the tensor's last dim, where torch sums in its 16-lane
// reduce_all order (float32 operands); otherwise sequentially.
func SoftmaxBackward(log bool, gi, g, y Tensor, lastDim bool) error {
	if err := checkSame2D("softmax_backward", gi, g, y); err != nil {
		return err
	}
	M, N := gi.Sizes[0], gi.Sizes[1]
	if N == 0 || M == 0 {
		return nil
	}
	oes := int64(gi.DType.Size())
	f64 := !useF32(y.DType)
	if gi.DType == Float32 && g.DType == Float32 && y.DType == Float32 &&
		gi.Strides[1] == 1 && g.Strides[1] == 1 && y.Strides[1] == 1 {
		// the float32 arithmetic below on the rows as they are
		row := func(t Tensor, m int64) []float32 {
			return unsafe.Slice((*float32)(at(t.Ptr, m*t.Strides[0]*4)), N)
		}
		ParallelFor(M, N*4, func(lo, hi int64) {
			if lastDim && !noCSoftmax && softmaxBwdRowsC(at(g.Ptr, lo*g.Strides[0]*4), g.Strides[0],
				at(y.Ptr, lo*y.Strides[0]*4), y.Strides[0], at(gi.Ptr, lo*gi.Strides[0]*4), gi.Strides[0], hi-lo, N, log, false) {
				return
			}
			for m := lo; m < hi; m++ {
				softmaxBwdRowF32(log, row(gi, m), row(g, m), row(y, m), lastDim)
			}
		})
		return nil
	}
	if gi.DType == BFloat16 && g.DType == BFloat16 && y.DType == BFloat16 && lastDim &&
		gi.Strides[1] == 1 && g.Strides[1] == 1 && y.Strides[1] == 1 && haveBF16Rows && !noCSoftmax && !noBF16Rows {
		softmaxBwdBF16Fused(log, gi, g, y)
		return nil
	}
	if gi.DType == BFloat16 && g.DType == BFloat16 && y.DType == BFloat16 && lastDim &&
		gi.Strides[1] == 1 && g.Strides[1] == 1 && y.Strides[1] == 1 && haveCNorm && !noCSoftmax {
		softmaxBwdBF16Rows(log, gi, g, y)
		return nil
	}
	ParallelFor(M, N*4, func(lo, hi int64) {
		gv := make([]float64, N)
		yv := make([]float64, N)
		rg, ry := newRowLoader(g), newRowLoader(y)
		for m := lo; m < hi; m++ {
			loadRow(rg, m, N, gv)
			loadRow(ry, m, N, yv)
			if f64 {
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
						gv[i] = (gv[i] - s) * yv[i]
					}
				}
			} else {
				var s float32
				if log {
					for _, v := range gv {
						s += float32(v)
					}
					for i := range gv {
						gv[i] = float64(float32(gv[i]) - float32(exp32(float32(yv[i]))*s))
					}
				} else {
					for i := range gv {
						s += float32(float32(gv[i]) * float32(yv[i]))
					}
					for i := range gv {
						gv[i] = float64((float32(gv[i]) - s) * float32(yv[i]))
					}
				}
			}
			storeFloat(at(gi.Ptr, m*gi.Strides[0]*oes), gi.Strides[1]*oes, gi.DType, gv)
		}
	})
	return nil
}

// softmaxBF16Rows is Softmax's generic rows for bfloat16 operands with the axis last and
// unit column strides: blocks of rows widened exactly into float32 scratch, the C rows
// with softmaxRow32's bfloat16 arithmetic (NaN rows redone by softmaxRow32 itself),
// results rounded once.
func softmaxBF16Rows(log bool, out, in Tensor) {
	M, N := in.Sizes[0], in.Sizes[1]
	ParallelFor(M, N*8, func(lo, hi int64) {
		rb := max(1, min(hi-lo, halfBlock/N))
		sp := getF32(int(2 * rb * N))
		defer putF32(sp)
		bad := make([]uint8, rb)
		for r0 := lo; r0 < hi; r0 += rb {
			n := min(rb, hi-r0)
			xb, yb := (*sp)[:n*N], (*sp)[rb*N:rb*N+n*N]
			loadRowsF32(xb, in, r0)
			softmaxRowsC(unsafe.Pointer(unsafe.SliceData(xb)), N, unsafe.Pointer(unsafe.SliceData(yb)), N, n, N, log, true,
				bad[:n], true)
			for j, b := range bad[:n] {
				if b != 0 { // a NaN sum: the generic row
					y := yb[int64(j)*N : int64(j+1)*N]
					copy(y, xb[int64(j)*N:int64(j+1)*N])
					softmaxRow32(log, y, BFloat16, true, false)
				}
			}
			storeRowsF32(out, r0, yb)
		}
	})
}

// softmaxBwdBF16Rows is SoftmaxBackward's generic rows for bfloat16 operands with the
// axis last and unit column strides: widened blocks, the C rows with sequential sums (the
// generic rows' order), results rounded once.
func softmaxBwdBF16Rows(log bool, gi, g, y Tensor) {
	M, N := gi.Sizes[0], gi.Sizes[1]
	ParallelFor(M, N*4, func(lo, hi int64) {
		rb := max(1, min(hi-lo, halfBlock/N))
		sp := getF32(int(2 * rb * N))
		defer putF32(sp)
		for r0 := lo; r0 < hi; r0 += rb {
			n := min(rb, hi-r0)
			gb, yb := (*sp)[:n*N], (*sp)[rb*N:rb*N+n*N]
			loadRowsF32(gb, g, r0)
			loadRowsF32(yb, y, r0)
			p := unsafe.Pointer(unsafe.SliceData(gb))
			softmaxBwdRowsC(p, N, unsafe.Pointer(unsafe.SliceData(yb)), N, p, N, n, N, log, true)
			storeRowsF32(gi, r0, gb)
		}
	})
}

func loadRow(r *rowLoader, m, N int64, dst []float64) {
	var pos int64
	r.each(m, N, func(c []float64) {
		copy(dst[pos:], c)
		pos += int64(len(c))
	})
}
