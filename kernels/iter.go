package kernels

import "unsafe"

// layout is a coalesced iteration space over several operands sharing one shape.
// Strides are in bytes. The last dimension is the inner (row) dimension.
type layout struct {
	sizes   []int64
	strides [][]int64 // [operand][dim]
}

// newLayout drops size-1 dims and merges dims that are contiguous for every operand.
func newLayout(sizes []int64, strides [][]int64, elemSizes []int) layout {
	nops := len(strides)
	l := layout{strides: make([][]int64, nops)}
	for i, s := range sizes {
		if s == 1 {
			continue
		}
		if s == 0 {
			return layout{sizes: []int64{0}, strides: zeroStrides(nops)}
		}
		if d := len(l.sizes); d > 0 {
			merge := true
			for op := 0; op < nops; op++ {
				if l.strides[op][d-1] != strides[op][i]*int64(elemSizes[op])*s {
					merge = false
					break
				}
			}
			if merge {
				l.sizes[d-1] *= s
				for op := 0; op < nops; op++ {
					l.strides[op][d-1] = strides[op][i] * int64(elemSizes[op])
				}
				continue
			}
		}
		l.sizes = append(l.sizes, s)
		for op := 0; op < nops; op++ {
			l.strides[op] = append(l.strides[op], strides[op][i]*int64(elemSizes[op]))
		}
	}
	if len(l.sizes) == 0 {
		l.sizes = []int64{1}
		l = layout{sizes: l.sizes, strides: zeroStrides(nops)}
	}
	return l
}

func zeroStrides(n int) [][]int64 {
	s := make([][]int64, n)
	for i := range s {
		s[i] = []int64{0}
	}
	return s
}

// rowFunc processes one row of n elements; ptrs are the row starts, strides the byte
// strides along the row, one per operand.
type rowFunc func(ptrs []unsafe.Pointer, strides []int64, n int64)

// run calls fn on every row, over all workers. cost is the relative cost per element.
func (l layout) run(bases []unsafe.Pointer, cost int64, fn rowFunc) {
	d := len(l.sizes)
	inner := l.sizes[d-1]
	rows := int64(1)
	for _, s := range l.sizes[:d-1] {
		rows *= s
	}
	if rows*inner == 0 {
		return
	}
	nops := len(bases)
	innerStrides := make([]int64, nops)
	for op := range innerStrides {
		innerStrides[op] = l.strides[op][d-1]
	}
	if rows == 1 {
		// One long row: split it.
		ParallelFor(inner, cost, func(lo, hi int64) {
			ptrs := make([]unsafe.Pointer, nops)
			for op := range ptrs {
				ptrs[op] = at(bases[op], lo*innerStrides[op])
			}
			fn(ptrs, innerStrides, hi-lo)
		})
		return
	}
	ParallelFor(rows, inner*cost, func(lo, hi int64) {
		// Decompose lo into a multi-index over the outer dims, then step it.
		idx := make([]int64, d-1)
		rem := lo
		for k := d - 2; k >= 0; k-- {
			idx[k] = rem % l.sizes[k]
			rem /= l.sizes[k]
		}
		offs := make([]int64, nops)
		for op := range offs {
			for k := 0; k < d-1; k++ {
				offs[op] += idx[k] * l.strides[op][k]
			}
		}
		ptrs := make([]unsafe.Pointer, nops)
		for r := lo; r < hi; r++ {
			for op := range ptrs {
				ptrs[op] = at(bases[op], offs[op])
			}
			fn(ptrs, innerStrides, inner)
			for k := d - 2; k >= 0; k-- {
				idx[k]++
				for op := range offs {
					offs[op] += l.strides[op][k]
				}
				if idx[k] < l.sizes[k] {
					break
				}
				for op := range offs {
					offs[op] -= idx[k] * l.strides[op][k]
				}
				idx[k] = 0
			}
		}
	})
}
