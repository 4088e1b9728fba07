package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Element-at-a-time helpers for the data-movement kernels (gather, scatter, index,
// index_put, sort): single-element loads and stores by dtype, reductions with
// PyTorch's semantics, and a strided walker over several operands.

// ixGetF loads one element as float64 (exact for every stored dtype but int64 > 2^53).
func ixGetF(p unsafe.Pointer, dt DType) float64 {
	switch dt {
	case Float32:
		return float64(*(*float32)(p))
	case Float64:
		return *(*float64)(p)
	case BFloat16:
		return float64(BF16ToF32(*(*uint16)(p)))
	case Float16:
		return float64(F16ToF32(*(*uint16)(p)))
	}
	return float64(ixGetI(p, dt))
}

// ixSetF stores a float64, rounding through float32 for the 16-bit float types as torch does.
func ixSetF(p unsafe.Pointer, dt DType, v float64) {
	switch dt {
	case Float32:
		*(*float32)(p) = float32(v)
	case Float64:
		*(*float64)(p) = v
	case BFloat16:
		*(*uint16)(p) = F32ToBF16(float32(v))
	case Float16:
		*(*uint16)(p) = F32ToF16(float32(v))
	case Bool:
		*(*uint8)(p) = b2u(v != 0)
	default:
		storeOneInt(p, dt, floatToInt64(v))
	}
}

// ixGetI loads one integral (or bool) element as int64.
func ixGetI(p unsafe.Pointer, dt DType) int64 {
	switch dt {
	case Int8:
		return int64(*(*int8)(p))
	case Uint8:
		return int64(*(*uint8)(p))
	case Int16:
		return int64(*(*int16)(p))
	case Int32:
		return int64(*(*int32)(p))
	case Int64:
		return *(*int64)(p)
	case Bool:
		return int64(*(*uint8)(p) & 1)
	}
	return floatToInt64(ixGetF(p, dt))
}

// ixSetI stores an int64 with C truncation (bool: non-zero is true).
func ixSetI(p unsafe.Pointer, dt DType, v int64) {
	if dt == Bool {
		*(*uint8)(p) = b2u(v != 0)
		return
	}
	if dt.IsFloat() {
		ixSetF(p, dt, float64(v))
		return
	}
	storeOneInt(p, dt, v)
}

// ixCopyElem copies one element of es bytes.
func ixCopyElem(dst, src unsafe.Pointer, es int) {
	switch es {
	case 1:
		*(*uint8)(dst) = *(*uint8)(src)
	case 2:
		*(*uint16)(dst) = *(*uint16)(src)
	case 4:
		*(*uint32)(dst) = *(*uint32)(src)
	default:
		*(*uint64)(dst) = *(*uint64)(src)
	}
}

// Reduce kinds of the scatter/index_put family (mean is a sum here; the caller divides).
// index_ops.py maps torch's reduce names to these codes.
const (
	RedNone = iota // plain store
	RedAdd         // dst += alpha*src
	RedMul         // dst *= src
	RedMax         // dst = max(dst, src), NaN propagates
	RedMin         // dst = min(dst, src), NaN propagates
)

// ixCombiner returns the function applying reduction kind to (dst, src) for dtype dt.
// Floats combine in float64 and round once to the stored type, which equals torch's
// float32 arithmetic for float32 and its float-then-round arithmetic for bf16/fp16.
// Integers wrap as C does; bool add is logical or and mul logical and.
func ixCombiner(kind int, dt DType, alpha float64, ialpha int64) func(dst, src unsafe.Pointer) {
	es := dt.Size()
	if kind == RedNone {
		return func(dst, src unsafe.Pointer) { ixCopyElem(dst, src, es) }
	}
	if dt.IsFloat() {
		var f func(a, b float64) float64
		switch kind {
		case RedAdd:
			if alpha == 1 {
				f = func(a, b float64) float64 { return a + b }
			} else {
				f = func(a, b float64) float64 { return a + alpha*b }
			}
		case RedMul:
			f = func(a, b float64) float64 { return a * b }
		case RedMax:
			f = func(a, b float64) float64 {
				if a != a || b != b {
					return math.NaN()
				}
				return math.Max(a, b)
			}
		default:
			f = func(a, b float64) float64 {
				if a != a || b != b {
					return math.NaN()
				}
				return math.Min(a, b)
			}
		}
		return func(dst, src unsafe.Pointer) { ixSetF(dst, dt, f(ixGetF(dst, dt), ixGetF(src, dt))) }
	}
	var g func(a, b int64) int64
	switch kind {
	case RedAdd:
		if dt == Bool {
			g = func(a, b int64) int64 { return a | b*ialpha }
		} else {
			g = func(a, b int64) int64 { return a + ialpha*b }
		}
	case RedMul:
		g = func(a, b int64) int64 { return a * b }
	case RedMax:
		g = func(a, b int64) int64 { return max(a, b) }
	default:
		g = func(a, b int64) int64 { return min(a, b) }
	}
	return func(dst, src unsafe.Pointer) { ixSetI(dst, dt, g(ixGetI(dst, dt), ixGetI(src, dt))) }
}

// ixWalkRange visits the elements [lo, hi) (row-major linear order) of a shape, calling fn
// with the byte offsets of each operand; strides are in bytes, one slice per operand.
func ixWalkRange(sizes []int64, strides [][]int64, lo, hi int64, fn func(offs []int64)) {
	d := len(sizes)
	nops := len(strides)
	offs := make([]int64, nops)
	if d == 0 {
		if lo < hi {
			fn(offs)
		}
		return
	}
	idx := make([]int64, d)
	rem := lo
	for k := d - 1; k >= 0; k-- {
		if sizes[k] == 0 {
			return
		}
		idx[k] = rem % sizes[k]
		rem /= sizes[k]
		for op := 0; op < nops; op++ {
			offs[op] += idx[k] * strides[op][k]
		}
	}
	last := d - 1
	for i := lo; i < hi; {
		// Inner run along the last dimension.
		n := min(sizes[last]-idx[last], hi-i)
		for j := int64(0); j < n; j++ {
			fn(offs)
			for op := 0; op < nops; op++ {
				offs[op] += strides[op][last]
			}
		}
		i += n
		idx[last] += n
		if i >= hi {
			return
		}
		for k := last; k > 0 && idx[k] == sizes[k]; k-- {
			for op := 0; op < nops; op++ {
				offs[op] -= idx[k] * strides[op][k]
				offs[op] += strides[op][k-1]
			}
			idx[k] = 0
			idx[k-1]++
		}
	}
}

// ixByteStrides converts a tensor's element strides to byte strides.
func ixByteStrides(t Tensor) []int64 {
	es := int64(t.DType.Size())
	s := make([]int64, len(t.Strides))
	for i, v := range t.Strides {
		s[i] = v * es
	}
	return s
}

// ixSameShape reports an error unless every tensor has the given shape.
func ixSameShape(sizes []int64, what []string, ts ...Tensor) error {
	for k, t := range ts {
		if len(t.Sizes) != len(sizes) {
			return fmt.Errorf("%s has shape %v, expected %v", what[k], t.Sizes, sizes)
		}
		for i := range sizes {
			if t.Sizes[i] != sizes[i] {
				return fmt.Errorf("%s has shape %v, expected %v", what[k], t.Sizes, sizes)
			}
		}
	}
	return nil
}

// ixPermute reorders a shape's dims (and every operand's strides) as perm lists them.
func ixPermute(sizes []int64, strides [][]int64, perm []int) ([]int64, [][]int64) {
	ps := make([]int64, len(perm))
	for i, p := range perm {
		ps[i] = sizes[p]
	}
	pst := make([][]int64, len(strides))
	for op, s := range strides {
		pst[op] = make([]int64, len(perm))
		for i, p := range perm {
			pst[op][i] = s[p]
		}
	}
	return ps, pst
}
