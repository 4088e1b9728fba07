package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Random fills driven by a Philox Stream. Element e of a tensor (row-major order) takes
// its bits from block e/per, word(s) e%per, so the values do not depend on strides or on
// how the work is split across goroutines.

// rndGenFill walks t (and the extra operands, same shape) element by element, calling fn
// with the block words, the element's lane within its block and the byte offsets.
func rndGenFill(s Stream, t Tensor, extra []Tensor, per int64, cost int64,
	fn func(w *[4]uint32, lane int64, offs []int64)) {
	n := t.Numel()
	if n == 0 {
		return
	}
	strides := [][]int64{ixByteStrides(t)}
	for _, x := range extra {
		strides = append(strides, ixByteStrides(x))
	}
	blocks := (n + per - 1) / per
	ParallelFor(blocks, per*cost, func(lo, hi int64) {
		e := lo * per
		var w [4]uint32
		ixWalkRange(t.Sizes, strides, lo*per, min(hi*per, n), func(offs []int64) {
			lane := e % per
			if lane == 0 {
				w = s.Block(uint64(e / per))
			}
			fn(&w, lane, offs)
			e++
		})
	})
}

func rndCheckOut(t Tensor, floatOnly bool) error {
	if !t.DType.Valid() {
		return fmt.Errorf("unsupported dtype %v", t.DType)
	}
	if floatOnly && !t.DType.IsFloat() {
		return fmt.Errorf("expected a floating point tensor, got %v", t.DType)
	}
	return nil
}

func rndW64(w *[4]uint32, lane int64) uint64 {
	return uint64(w[2*lane])<<32 | uint64(w[2*lane+1])
}

// rndUnit maps random bits to [0, 1) with as many bits as dt's significand holds, so the
// result is exact in dt.
func rndUnit(w *[4]uint32, lane int64, dt DType) float64 {
	switch dt {
	case Float64:
		return float64(rndW64(w, lane)>>11) * 0x1p-53
	case BFloat16:
		return float64(w[lane]>>24) * 0x1p-8
	case Float16:
		return float64(w[lane]>>21) * 0x1p-11
	}
	return float64(w[lane]>>8) * 0x1p-24
}

func rndPerFor(dt DType) int64 {
	if dt == Float64 {
		return 2
	}
	return 4
}

// Uniform fills t with values uniform on [from, to).
func Uniform(t Tensor, s Stream, from, to float64) error {
	if err := rndCheckOut(t, true); err != nil {
		return err
	}
	dt := t.DType
	rndGenFill(s, t, nil, rndPerFor(dt), 2, func(w *[4]uint32, lane int64, offs []int64) {
		ixSetF(at(t.Ptr, offs[0]), dt, from+rndUnit(w, lane, dt)*(to-from))
	})
	return nil
}

// Normal fills t with N(mean, std^2) values (Box-Muller on pairs of uniforms).
func Normal(t Tensor, s Stream, mean, std float64) error {
	if err := rndCheckOut(t, true); err != nil {
		return err
	}
	dt := t.DType
	per := int64(4)
	if dt == Float64 {
		per = 2
	}
	rndGenFill(s, t, nil, per, 8, func(w *[4]uint32, lane int64, offs []int64) {
		var u1, u2 float64
		if dt == Float64 {
			u1 = float64(rndW64(w, 0)>>11+1) * 0x1p-53
			u2 = float64(rndW64(w, 1)>>11) * 0x1p-53
		} else {
			p := lane &^ 1
			u1 = float64(w[p]>>8+1) * 0x1p-24
			u2 = float64(w[p+1]>>8) * 0x1p-24
		}
		r := math.Sqrt(-2 * math.Log(u1))
		sn, cs := math.Sincos(2 * math.Pi * u2)
		z := r * cs
		if lane&1 == 1 {
			z = r * sn
		}
		ixSetF(at(t.Ptr, offs[0]), dt, mean+std*z)
	})
	return nil
}

// rndU32 maps one word to [0, 1) in float64 (exact).
func rndU32(w *[4]uint32, lane int64) float64 { return float64(w[lane]) * 0x1p-32 }

// Bernoulli fills t with 1 where a uniform draw is below p (p in [0, 1]), else 0.
// With prob != nil, p is read per element from it (same shape as t).
func Bernoulli(t Tensor, prob *Tensor, s Stream, p float64) error {
	if err := rndCheckOut(t, false); err != nil {
		return err
	}
	var extra []Tensor
	if prob != nil {
		if err := ixSameShape(t.Sizes, []string{"p"}, *prob); err != nil {
			return err
		}
		if !prob.DType.IsFloat() {
			return fmt.Errorf("p must be a floating point tensor, got %v", prob.DType)
		}
		extra = []Tensor{*prob}
	}
	dt := t.DType
	if prob == nil && dt == Float32 && t.IsContiguous() {
		bernoulliF32(unsafe.Slice((*float32)(t.Ptr), t.Numel()), s, p)
		return nil
	}
	if prob == nil && dt == BFloat16 && t.IsContiguous() && !noFastBernoulli {
		bernoulliBF16(unsafe.Slice((*uint16)(t.Ptr), t.Numel()), s, p)
		return nil
	}
	rndGenFill(s, t, extra, 4, 2, func(w *[4]uint32, lane int64, offs []int64) {
		q := p
		if prob != nil {
			q = ixGetF(at(prob.Ptr, offs[1]), prob.DType)
		}
		v := int64(0)
		if rndU32(w, lane) < q {
			v = 1
		}
		ixSetI(at(t.Ptr, offs[0]), dt, v)
	})
	return nil
}

// RandomInt fills t with integers uniform on [from, from+span) (span 0 means 2^64).
func RandomInt(t Tensor, s Stream, from int64, span uint64) error {
	if err := rndCheckOut(t, false); err != nil {
		return err
	}
	dt := t.DType
	rndGenFill(s, t, nil, 2, 2, func(w *[4]uint32, lane int64, offs []int64) {
		r := rndW64(w, lane)
		if span != 0 {
			r %= span
		}
		v := from + int64(r)
		p := at(t.Ptr, offs[0])
		if dt.IsFloat() {
			ixSetF(p, dt, float64(v))
		} else {
			ixSetI(p, dt, v)
		}
	})
	return nil
}

// Dropout draws keep = (uniform < 1-p) into mask and writes out = in * keep * scale with
// scale = 1/(1-p) (0 when p = 1), rounded to float32 for the 32-bit and 16-bit float types
// as torch's native_dropout multiplies by it.
func Dropout(out, mask, in Tensor, s Stream, p float64) error {
	if out.DType != in.DType || !in.DType.IsFloat() {
		return fmt.Errorf("dtypes: out %v, input %v (floating point, equal)", out.DType, in.DType)
	}
	if err := ixSameShape(in.Sizes, []string{"out", "mask"}, out, mask); err != nil {
		return err
	}
	scale := 0.0
	if p < 1 {
		scale = 1 / (1 - p)
	}
	if in.DType != Float64 {
		scale = float64(float32(scale))
	}
	keepP := 1 - p
	dt, mt := in.DType, mask.DType
	if dt == Float32 && (mt == Bool || mt == Uint8) && out.IsContiguous() && in.IsContiguous() && mask.IsContiguous() {
		dropoutF32(out, mask, in, s, keepP, scale)
		return nil
	}
	rndGenFill(s, out, []Tensor{mask, in}, 4, 3, func(w *[4]uint32, lane int64, offs []int64) {
		m := 0.0
		if rndU32(w, lane) < keepP {
			m = 1
		}
		ixSetI(at(mask.Ptr, offs[1]), mt, int64(m))
		ixSetF(at(out.Ptr, offs[0]), dt, ixGetF(at(in.Ptr, offs[2]), dt)*m*scale)
	})
	return nil
}

// DropoutBackward writes gin = grad * mask * scale (scale rounded as in Dropout).
func DropoutBackward(gin, grad, mask Tensor, scale float64) error {
	if gin.DType != grad.DType || !grad.DType.IsFloat() {
		return fmt.Errorf("dtypes: grad_input %v, grad %v (floating point, equal)", gin.DType, grad.DType)
	}
	if err := ixSameShape(grad.Sizes, []string{"grad_input", "mask"}, gin, mask); err != nil {
		return err
	}
	if grad.DType != Float64 {
		scale = float64(float32(scale))
	}
	n := grad.Numel()
	strides := [][]int64{ixByteStrides(gin), ixByteStrides(grad), ixByteStrides(mask)}
	dt, mt := grad.DType, mask.DType
	if dt == Float32 && (mt == Bool || mt == Uint8) && n > 0 && gin.IsContiguous() && grad.IsContiguous() && mask.IsContiguous() {
		o := unsafe.Slice((*float32)(gin.Ptr), n)
		g := unsafe.Slice((*float32)(grad.Ptr), n)
		m := unsafe.Slice((*uint8)(mask.Ptr), n)
		ParallelFor(n, 2, func(lo, hi int64) {
			for i := lo; i < hi; i++ {
				o[i] = float32(float64(float32(float64(g[i])*float64(m[i]))) * scale)
			}
		})
		return nil
	}
	ParallelFor(n, 2, func(lo, hi int64) {
		ixWalkRange(grad.Sizes, strides, lo, hi, func(offs []int64) {
			v := ixGetF(at(grad.Ptr, offs[1]), dt) * ixGetF(at(mask.Ptr, offs[2]), mt)
			if dt != Float64 {
				v = float64(float32(v))
				if dt != Float32 {
					v = rndGetRounded(v, dt)
				}
			}
			ixSetF(at(gin.Ptr, offs[0]), dt, v*scale)
		})
	})
	return nil
}

// rndGetRounded rounds v to dt's precision (through a store and load).
func rndGetRounded(v float64, dt DType) float64 {
	var b [8]byte
	p := unsafe.Pointer(&b)
	ixSetF(p, dt, v)
	return ixGetF(p, dt)
}

// rndBatch is how many Philox blocks the fast paths generate per call.
const rndBatch = 256

// rndWords calls fn with the words of every block in [lo, hi) (4 per block, in order),
// generated rndBatch blocks at a time; fn also gets the first block's index.
func rndWords(s Stream, lo, hi int64, fn func(b0 int64, w []uint32)) {
	var buf [4 * rndBatch]uint32
	for b := lo; b < hi; b += rndBatch {
		nb := min(rndBatch, hi-b)
		w := buf[:4*nb]
		philoxBlocks(w, s, uint64(b))
		fn(b, w)
	}
}

// bernoulliF32 is Bernoulli with a scalar p into contiguous float32: element e is 1 when
// word e of the stream, as a fraction of 2^32, is below p (u < p*2^32, the same exact
// comparison as rndU32(w) < p).
func bernoulliF32(o []float32, s Stream, p float64) {
	n := int64(len(o))
	thr := p * 0x1p32
	ParallelFor((n+3)/4, 8, func(lo, hi int64) {
		rndWords(s, lo, hi, func(b0 int64, w []uint32) {
			bernWords(o[b0*4:min(b0*4+int64(len(w)), n)], w, thr)
		})
	})
}

// noFastBernoulli forces the generic walk for bfloat16 (tests compare them).
var noFastBernoulli bool

// bernoulliBF16 is bernoulliF32 into contiguous bfloat16: the same words and comparison
// per element, the 0/1 results (exact in bfloat16: 0x0000, 0x3f80, as the generic walk
// stores them) narrowed from a float32 batch.
func bernoulliBF16(o []uint16, s Stream, p float64) {
	n := int64(len(o))
	thr := p * 0x1p32
	ParallelFor((n+3)/4, 8, func(lo, hi int64) {
		var f [4 * rndBatch]float32
		rndWords(s, lo, hi, func(b0 int64, w []uint32) {
			dst := o[b0*4 : min(b0*4+int64(len(w)), n)]
			bernWords(f[:len(dst)], w, thr)
			f32ToBF16s(dst, f[:len(dst)])
		})
	})
}

// dropoutF32 is Dropout for contiguous float32 with a bool/uint8 mask: the same blocks,
// lanes and arithmetic as the generic walk, without its per-element dispatch.
func dropoutF32(out, mask, in Tensor, s Stream, keepP, scale float64) {
	n := in.Numel()
	if n == 0 {
		return
	}
	o := unsafe.Slice((*float32)(out.Ptr), n)
	x := unsafe.Slice((*float32)(in.Ptr), n)
	m := unsafe.Slice((*uint8)(mask.Ptr), n)
	thr := keepP * 0x1p32
	ParallelFor((n+3)/4, 12, func(lo, hi int64) {
		rndWords(s, lo, hi, func(b0 int64, w []uint32) {
			lo, hi := b0*4, min(b0*4+int64(len(w)), n)
			dropoutWords(o[lo:hi], m[lo:hi], x[lo:hi], w, thr, scale)
		})
	})
}
