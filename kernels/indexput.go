package kernels

import (
	"fmt"
	"unsafe"
)

// IndexSpec describes integer indices applied to a "restrided" tensor: a view over the
// iteration shape whose indexed dimensions have stride 0. Element p of the iteration
// addresses base(p) + sum_k Idx[k](p) * Stride[k] (elements). This one form serves
// advanced indexing (index.Tensor / index_put_), gather / scatter (one index along dim)
// and index_add (one index along dim).
type IndexSpec struct {
	Idx    []Tensor // int64 or int32, each with the iteration shape (broadcast strides)
	Bound  []int64  // size of the indexed dimension
	Stride []int64  // element stride of the indexed dimension
	Dim    []int64  // dimension number, for error messages
	// WrapNegative accepts -Bound <= i < 0 as i + Bound (indexing); otherwise negatives
	// are out of bounds (gather, scatter, index_add).
	WrapNegative bool
}

func (s *IndexSpec) check(sizes []int64) error {
	k := len(s.Idx)
	if len(s.Bound) != k || len(s.Stride) != k || len(s.Dim) != k {
		return fmt.Errorf("index spec lengths differ")
	}
	for i, t := range s.Idx {
		if t.DType != Int64 && t.DType != Int32 {
			return fmt.Errorf("indices must be int64 or int32, got %v", t.DType)
		}
		if err := ixSameShape(sizes, []string{fmt.Sprintf("index %d", i)}, t); err != nil {
			return err
		}
	}
	return nil
}

// validate reads every index once before any memory is touched through it.
func (s *IndexSpec) validate(sizes []int64) error {
	n := int64(1)
	for _, v := range sizes {
		n *= v
	}
	for k, t := range s.Idx {
		var bad int64
		found := false
		b, w := s.Bound[k], s.WrapNegative
		st := [][]int64{ixByteStrides(t)}
		ixWalkRange(sizes, st, 0, n, func(offs []int64) {
			if found {
				return
			}
			v := ixGetI(at(t.Ptr, offs[0]), t.DType)
			if v >= b || v < -b || (v < 0 && !w) {
				bad, found = v, true
			}
		})
		if found {
			return fmt.Errorf("index %d is out of bounds for dimension %d with size %d", bad, s.Dim[k], b)
		}
	}
	return nil
}

// offset is the extra byte offset the indices add at iteration offsets io (one per index).
func (s *IndexSpec) offset(io []int64, es int64) int64 {
	var off int64
	for k, t := range s.Idx {
		v := ixGetI(at(t.Ptr, io[k]), t.DType)
		if v < 0 {
			v += s.Bound[k]
		}
		off += v * s.Stride[k]
	}
	return off * es
}

// IndexGather writes out[p] = selfR[p + indices]. selfR has out's shape and dtype.
func IndexGather(out, selfR Tensor, spec IndexSpec) error {
	if out.DType != selfR.DType {
		return fmt.Errorf("dtype mismatch: out %v, self %v", out.DType, selfR.DType)
	}
	if err := ixSameShape(out.Sizes, []string{"self view"}, selfR); err != nil {
		return err
	}
	if err := spec.check(out.Sizes); err != nil {
		return err
	}
	if err := spec.validate(out.Sizes); err != nil {
		return err
	}
	n := out.Numel()
	es := int64(out.DType.Size())
	strides := [][]int64{ixByteStrides(out), ixByteStrides(selfR)}
	for _, t := range spec.Idx {
		strides = append(strides, ixByteStrides(t))
	}
	ParallelFor(n, int64(1+len(spec.Idx)), func(lo, hi int64) {
		ixWalkRange(out.Sizes, strides, lo, hi, func(offs []int64) {
			src := at(selfR.Ptr, offs[1]+spec.offset(offs[2:], es))
			ixCopyElem(at(out.Ptr, offs[0]), src, int(es))
		})
	})
	return nil
}

// IndexPut applies dstR[p + indices] (op)= src[p] over the iteration shape (dstR's).
// parallelDims is a bit mask of dimensions along which distinct positions are known to
// address distinct destination elements; the work is split across them only, and runs
// in row-major order along the others, so duplicate indices accumulate in the order
// torch's serial CPU kernel uses.
func IndexPut(dstR, src Tensor, spec IndexSpec, kind int, alpha float64, ialpha int64, parallelDims int64) error {
	if dstR.DType != src.DType {
		return fmt.Errorf("dtype mismatch: self %v, values %v", dstR.DType, src.DType)
	}
	sizes := dstR.Sizes
	if err := ixSameShape(sizes, []string{"values"}, src); err != nil {
		return err
	}
	if err := spec.check(sizes); err != nil {
		return err
	}
	if err := spec.validate(sizes); err != nil {
		return err
	}
	es := int64(dstR.DType.Size())
	strides := [][]int64{ixByteStrides(dstR), ixByteStrides(src)}
	for _, t := range spec.Idx {
		strides = append(strides, ixByteStrides(t))
	}
	var perm []int
	outer := int64(1)
	for d := range sizes {
		if parallelDims&(1<<d) != 0 {
			perm = append(perm, d)
			outer *= sizes[d]
		}
	}
	for d := range sizes {
		if parallelDims&(1<<d) == 0 {
			perm = append(perm, d)
		}
	}
	total := dstR.Numel()
	if total == 0 {
		return nil
	}
	inner := total / outer
	ps, pst := ixPermute(sizes, strides, perm)
	f := ixCombiner(kind, dstR.DType, alpha, ialpha)
	ParallelFor(outer, inner*int64(2+len(spec.Idx)), func(lo, hi int64) {
		ixWalkRange(ps, pst, lo*inner, hi*inner, func(offs []int64) {
			f(at(dstR.Ptr, offs[0]+spec.offset(offs[2:], es)), at(src.Ptr, offs[1]))
		})
	})
	return nil
}

// ixIsNonzero is torch's truth value of one element (NaN is non-zero).
func ixIsNonzero(p unsafe.Pointer, dt DType) bool {
	switch dt {
	case Float32:
		return *(*float32)(p) != 0
	case Float64:
		return *(*float64)(p) != 0
	case BFloat16, Float16:
		return *(*uint16)(p)&0x7fff != 0
	}
	return ixGetI(p, dt) != 0
}

// ixNonzeroChunks counts non-zero elements of t per row-major chunk (one chunk per worker).
func ixNonzeroChunks(t Tensor) (int64, []int64) {
	n := t.Numel()
	w := int64(Workers())
	if n < 2*Grain {
		w = 1
	}
	chunk := (n + w - 1) / max(w, 1)
	counts := make([]int64, w)
	st := [][]int64{ixByteStrides(t)}
	ParallelFor(w, Grain, func(lo, hi int64) {
		for c := lo; c < hi; c++ {
			var k int64
			ixWalkRange(t.Sizes, st, c*chunk, min((c+1)*chunk, n), func(offs []int64) {
				if ixIsNonzero(at(t.Ptr, offs[0]), t.DType) {
					k++
				}
			})
			counts[c] = k
		}
	})
	return chunk, counts
}

// CountNonzero returns how many elements of t are non-zero (NaN counts as non-zero).
func CountNonzero(t Tensor) int64 {
	var s int64
	_, c := ixNonzeroChunks(t)
	for _, v := range c {
		s += v
	}
	return s
}

// Nonzero writes the coordinates of t's non-zero elements, in row-major order, into out
// ([count, ndim] int64); count must be CountNonzero(t).
func Nonzero(out, t Tensor) error {
	d := t.Dim()
	if out.DType != Int64 || out.Dim() != 2 || out.Sizes[1] != int64(d) {
		return fmt.Errorf("out must be int64 [n, %d], got %v %v", d, out.DType, out.Sizes)
	}
	chunk, counts := ixNonzeroChunks(t)
	var total int64
	starts := make([]int64, len(counts))
	for i, c := range counts {
		starts[i] = total
		total += c
	}
	if total != out.Sizes[0] {
		return fmt.Errorf("out has %d rows for %d non-zero elements (input changed?)", out.Sizes[0], total)
	}
	n := t.Numel()
	tst := ixByteStrides(t)
	ParallelFor(int64(len(counts)), Grain, func(lo, hi int64) {
		idx := make([]int64, d)
		for c := lo; c < hi; c++ {
			row := starts[c]
			a, b := c*chunk, min((c+1)*chunk, n)
			if a >= b {
				continue
			}
			rem := a
			var off int64
			for k := d - 1; k >= 0; k-- {
				idx[k] = rem % t.Sizes[k]
				rem /= t.Sizes[k]
				off += idx[k] * tst[k]
			}
			for i := a; i < b; i++ {
				if ixIsNonzero(at(t.Ptr, off), t.DType) {
					for k := 0; k < d; k++ {
						*(*int64)(at(out.Ptr, (row*out.Strides[0]+int64(k)*out.Strides[1])*8)) = idx[k]
					}
					row++
				}
				for k := d - 1; k >= 0; k-- {
					idx[k]++
					off += tst[k]
					if idx[k] < t.Sizes[k] {
						break
					}
					off -= idx[k] * tst[k]
					idx[k] = 0
				}
			}
		}
	})
	return nil
}

// DivCount divides res by count elementwise (same shape), treating a zero count as 1:
// true division for floating dtypes (computed in float64, rounded once), floor division
// for integral ones. It finishes scatter_reduce's "mean".
func DivCount(res, count Tensor) error {
	if err := ixSameShape(res.Sizes, []string{"count"}, count); err != nil {
		return err
	}
	dt, ct := res.DType, count.DType
	strides := [][]int64{ixByteStrides(res), ixByteStrides(count)}
	ParallelFor(res.Numel(), 2, func(lo, hi int64) {
		ixWalkRange(res.Sizes, strides, lo, hi, func(offs []int64) {
			p, q := at(res.Ptr, offs[0]), at(count.Ptr, offs[1])
			if dt.IsFloat() {
				c := ixGetF(q, ct)
				if c == 0 {
					c = 1
				}
				ixSetF(p, dt, ixGetF(p, dt)/c)
				return
			}
			a, b := ixGetI(p, dt), ixGetI(q, ct)
			if b == 0 {
				b = 1
			}
			d := a / b
			if a%b != 0 && (a < 0) != (b < 0) {
				d--
			}
			ixSetI(p, dt, d)
		})
	})
	return nil
}
