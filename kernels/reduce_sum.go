package kernels

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// Sum (and mean) in the summation order of torch's CPU sum kernel, so float32 results
// agree to the last bit rather than to a rounding-error bound.
//
// torch walks a reduction with a TensorIterator: dims are ordered reduced-first, then by
// stride, adjacent dims are coalesced, and a 2-D inner loop (cascade_sum) receives
// [size0 x size1] blocks. Depending on which of the two is contiguous it sums rows with a
// 4-way interleave ("row_sum") or columns with a multi-level cascade ("multi_row_sum"),
// over AVX-512 vectors of 16 float (8 double) lanes; the block's results are added into
// the output, which starts at zero and is stored in the output dtype after every block.
// A full reduction of at least 32768 elements on several threads is split in contiguous
// ranges per thread and the partial sums added at the end. Other parallel splits of
// torch (over kept dims) do not change the order except next to a split column, which is
// not reproduced.

const (
	sumGrain  = 32768 // at::internal::GRAIN_SIZE
	sumLevels = 4
	// sumVecBytes is the width of the Vectorized<T> the reference torch's sum kernel
	// uses: 256-bit (measured: its vector paths start at 8 floats).
	sumVecBytes = 32
)

type sumFloat interface{ float32 | float64 }

// sumDim is one iteration dim: size and element strides of (output, input).
type sumDim struct{ size, os, is int64 }

func ceilLog2(x int64) int64 {
	if x <= 2 {
		return 1
	}
	return int64(bits.Len64(uint64(x - 1)))
}

// sumIter is the coalesced iteration space of one sum.
type sumIter[A sumFloat] struct {
	dims     []sumDim
	in       Tensor
	scalarDT DType // torch's scalar_t: the dtype the input is cast to and the sum stored in
	outDT    DType // the output's dtype
	lanes    int64 // Vectorized<acc_t>::size()
	vecN     int64 // Vectorized<scalar_t>::size()
	acc      []A   // the output, one per output element (contiguous index)
	fast     bool  // nativeSum: loop2d takes loop2dFast
	outIdx   func(off int64) int64
}

func (s *sumIter[A]) load(off int64) A {
	p := at(s.in.Ptr, off*int64(s.in.DType.Size()))
	var v float64
	switch s.in.DType {
	case Float32:
		return s.cast(A(*(*float32)(p)))
	case Float64:
		v = *(*float64)(p)
	case BFloat16:
		return s.cast(A(BF16ToF32(*(*uint16)(p))))
	case Float16:
		return s.cast(A(F16ToF32(*(*uint16)(p))))
	}
	return s.cast(A(v))
}

// cast rounds an input value to scalar_t (torch casts the input to the sum's dtype).
func (s *sumIter[A]) cast(v A) A {
	switch s.scalarDT {
	case Float32:
		return A(float32(v))
	case BFloat16, Float16:
		return A(roundTo(s.scalarDT, float32(v)))
	}
	return v
}

// store adds v into output element o, rounding to scalar_t (CastStoreAccumulate).
func (s *sumIter[A]) store(o int64, v A) {
	s.acc[o] = s.cast(s.acc[o] + v)
}

// multiRowSum is torch's multi_row_sum: nrows columns summed over size rows with a
// cascade of accumulators; get(i, k) is row i, column k.
func multiRowSum[A sumFloat](get func(i, k int64) A, nrows, size int64, out []A) {
	levelPower := max(int64(4), ceilLog2(size)/sumLevels)
	levelStep := int64(1) << levelPower
	levelMask := levelStep - 1
	var accBuf [sumLevels * 4]A
	acc := accBuf[:sumLevels*nrows]
	if nrows > 4 {
		acc = make([]A, sumLevels*nrows)
	}
	i := int64(0)
	for i+levelStep <= size {
		for j := int64(0); j < levelStep; j, i = j+1, i+1 {
			for k := int64(0); k < nrows; k++ {
				acc[k] += get(i, k)
			}
		}
		for j := int64(1); j < sumLevels; j++ {
			for k := int64(0); k < nrows; k++ {
				acc[j*nrows+k] += acc[(j-1)*nrows+k]
				acc[(j-1)*nrows+k] = 0
			}
			if i&(levelMask<<(j*levelPower)) != 0 {
				break
			}
		}
	}
	for ; i < size; i++ {
		for k := int64(0); k < nrows; k++ {
			acc[k] += get(i, k)
		}
	}
	for j := int64(1); j < sumLevels; j++ {
		for k := int64(0); k < nrows; k++ {
			acc[k] += acc[j*nrows+k]
		}
	}
	copy(out, acc[:nrows])
}

// rowSum is torch's row_sum: a 4-way interleaved cascade, the tail, then the partials.
func rowSum[A sumFloat](get func(i int64) A, size int64) A {
	const ilp = 4
	sizeIlp := size / ilp
	var p [ilp]A
	multiRowSum(func(i, k int64) A { return get(i*ilp + k) }, ilp, sizeIlp, p[:])
	for i := sizeIlp * ilp; i < size; i++ {
		p[0] += get(i)
	}
	for k := 1; k < ilp; k++ {
		p[0] += p[k]
	}
	return p[0]
}

// loop2d is cascade_sum's inner loop over a [size0 x size1] block at (in, out) offsets.
func (s *sumIter[A]) loop2d(inOff, outOff int64, d0, d1 sumDim) {
	if d0.os != 0 && d1.os == 0 {
		d0, d1 = d1, d0
	}
	if s.fast && d0.os == 0 {
		s.loop2dFast(inOff, outOff, d0, d1)
		return
	}
	if s.bf16Cols(inOff, outOff, d0, d1) {
		return
	}
	size0, size1 := d0.size, d1.size
	if d0.os != 0 && d1.os != 0 { // not a reduction: out += in elementwise
		for j := int64(0); j < size1; j++ {
			for i := int64(0); i < size0; i++ {
				s.store(s.outIdx(outOff+j*d1.os+i*d0.os), s.load(inOff+j*d1.is+i*d0.is))
			}
		}
		return
	}
	is0, is1 := d0.is, d1.is
	col := func(j int64) func(i int64) A {
		base := inOff + j*is1
		return func(i int64) A { return s.load(base + i*is0) }
	}
	switch {
	case is0 == 1 && size0 >= s.vecN: // contiguous inner reduction, vectorized
		L := s.lanes
		per := s.vecN / L // scalar_t elements folded into one accumulator lane per load
		vecSize := size0 / s.vecN
		for j := int64(0); j < size1; j++ {
			base := inOff + j*is1
			var final A
			for k := vecSize * s.vecN; k < size0; k++ {
				final += s.load(base + k)
			}
			for l := int64(0); l < L; l++ {
				lane := rowSum(func(v int64) A {
					e := base + v*s.vecN + l
					if per == 1 {
						return s.load(e)
					}
					return A(float32(s.load(e)) + float32(s.load(e+L)))
				}, vecSize)
				final += lane
			}
			s.store(s.outIdx(outOff+j*d1.os), final)
		}
	case is1 == 1 && size1 >= s.vecN: // contiguous outer reduction, vectorized over columns
		blocked := size1 / (4 * s.lanes) * 4 * s.lanes
		var one [1]A
		for j := int64(0); j < size1; j++ {
			get := col(j)
			var r A
			if j < blocked {
				multiRowSum(func(i, _ int64) A { return get(i) }, 1, size0, one[:])
				r = one[0]
			} else {
				r = rowSum(get, size0)
			}
			s.store(s.outIdx(outOff+j*d1.os), r)
		}
	case is0 < is1: // strided inner reduction
		for j := int64(0); j < size1; j++ {
			s.store(s.outIdx(outOff+j*d1.os), rowSum(col(j), size0))
		}
	default: // strided outer reduction: columns in fours cascade, the rest row_sum
		blocked := size1 / 4 * 4
		var one [1]A
		for j := int64(0); j < size1; j++ {
			get := col(j)
			var r A
			if j < blocked {
				multiRowSum(func(i, _ int64) A { return get(i) }, 1, size0, one[:])
				r = one[0]
			} else {
				r = rowSum(get, size0)
			}
			s.store(s.outIdx(outOff+j*d1.os), r)
		}
	}
}

// forRange runs loop2d over the linear iteration range [begin, end) the way torch's
// serial_for_each does (DimCounter: 2-D steps bounded by the range).
func (s *sumIter[A]) forRange(begin, end int64) {
	nd := len(s.dims)
	if nd == 1 {
		d := s.dims[0]
		s.loop2d(begin*d.is, begin*d.os, sumDim{end - begin, d.os, d.is}, sumDim{size: 1})
		return
	}
	idx := make([]int64, nd)
	rem := begin
	for d := 0; d < nd; d++ {
		idx[d] = rem % s.dims[d].size
		rem /= s.dims[d].size
	}
	for off := begin; off < end; {
		var inOff, outOff int64
		for d := 0; d < nd; d++ {
			inOff += idx[d] * s.dims[d].is
			outOff += idx[d] * s.dims[d].os
		}
		d0, d1 := s.dims[0], s.dims[1]
		step0 := min(d0.size-idx[0], end-off)
		step1 := int64(1)
		if step0 == d0.size {
			step1 = min(d1.size-idx[1], (end-off)/d0.size)
		}
		s.loop2d(inOff, outOff, sumDim{step0, d0.os, d0.is}, sumDim{step1, d1.os, d1.is})
		off += step0 * step1
		overflow, i := step0, 0
		if step1 != 1 {
			overflow, i = step1, 1
		}
		for ; i < nd && overflow > 0; i++ {
			v := idx[i] + overflow
			if v >= s.dims[i].size {
				overflow = 1
				v -= s.dims[i].size
			} else {
				overflow = 0
			}
			idx[i] = v
		}
	}
}

// sumOrder orders and coalesces in's dims as torch's TensorIterator does for a reduction
// into a contiguous keepdim output (reduced[d]: dim d is reduced).
func sumOrder(in Tensor, reduced []bool, outStrides []int64) []sumDim {
	nd := in.Dim()
	dims := make([]sumDim, nd)
	for d := 0; d < nd; d++ {
		dims[d] = sumDim{size: in.Sizes[d], is: in.Strides[d]}
		if !reduced[d] {
			dims[d].os = outStrides[d]
		}
	}
	shouldSwap := func(a, b sumDim) int {
		// the output first: reduced dims go innermost
		if (a.os == 0) != (b.os == 0) {
			if b.os == 0 {
				return 1
			}
			return -1
		}
		for _, st := range [][2]int64{{a.os, b.os}, {a.is, b.is}} {
			if st[0] == 0 || st[1] == 0 {
				continue
			}
			if st[0] < st[1] {
				return -1
			}
			if st[0] > st[1] {
				return 1
			}
			if a.size > b.size {
				return 1
			}
		}
		return 0
	}
	perm := make([]sumDim, nd)
	for i := range perm {
		perm[i] = dims[nd-1-i]
	}
	for i := 1; i < nd; i++ {
		d1 := i
		for d0 := i - 1; d0 >= 0; d0-- {
			c := shouldSwap(perm[d0], perm[d1])
			if c > 0 {
				perm[d0], perm[d1] = perm[d1], perm[d0]
				d1 = d0
			} else if c < 0 {
				break
			}
		}
	}
	if nd == 0 {
		return []sumDim{{size: 1}}
	}
	out := perm[:1]
	for _, d := range perm[1:] {
		p := &out[len(out)-1]
		switch {
		case p.size == 1:
			*p = sumDim{size: d.size, os: d.os, is: d.is}
		case d.size == 1:
		case p.size*p.os == d.os && p.size*p.is == d.is:
			p.size *= d.size
		default:
			out = append(out, d)
			continue
		}
	}
	return out
}

// SumOpts selects mean and torch's intra-op thread count (it decides the split of full
// reductions).
type SumOpts struct {
	Mean    bool
	Threads int
}

// Sum reduces in over the dims flagged in reduced into out, which has in's rank with size
// 1 on reduced dims (any strides). Float dtypes only.
func Sum(out, in Tensor, reduced []bool, o SumOpts) error {
	if len(reduced) != in.Dim() || out.Dim() != in.Dim() {
		return fmt.Errorf("sum: input %v, output %v and %d reduced flags differ in rank", in.Sizes, out.Sizes, len(reduced))
	}
	if !in.DType.IsFloat() || !out.DType.IsFloat() {
		return fmt.Errorf("sum: unsupported dtypes %v -> %v", in.DType, out.DType)
	}
	for d := range reduced {
		want := in.Sizes[d]
		if reduced[d] {
			want = 1
		}
		if out.Sizes[d] != want {
			return fmt.Errorf("sum: output %v does not match input %v", out.Sizes, in.Sizes)
		}
	}
	if out.DType == Float64 {
		return runSum[float64](out, in, reduced, o)
	}
	return runSum[float32](out, in, reduced, o)
}

func runSum[A sumFloat](out, in Tensor, reduced []bool, o SumOpts) error {
	nOut := out.Numel()
	if nOut == 0 {
		return nil
	}
	// contiguous keepdim strides of the output (torch allocates it so)
	cs := make([]int64, out.Dim())
	st := int64(1)
	for d := out.Dim() - 1; d >= 0; d-- {
		cs[d] = st
		st *= out.Sizes[d]
	}
	s := &sumIter[A]{in: in, scalarDT: out.DType, outDT: out.DType, acc: make([]A, nOut), outIdx: func(off int64) int64 { return off }}
	if o.Mean && isReduced(out.DType) {
		s.scalarDT = Float32 // torch: float32 sum, divide, then round
	}
	numel := in.Numel()
	if numel > 0 {
		s.dims = sumOrder(in, reduced, cs)
		// torch sums reduced-precision inputs in a float32 buffer when the inner loop's
		// both dims are reduced (its 2-D loop would otherwise accumulate in bf16).
		if isReduced(s.scalarDT) && len(s.dims) >= 2 && s.dims[0].os == 0 && s.dims[1].os == 0 {
			s.scalarDT = Float32
		}
	}
	switch s.scalarDT {
	case Float64:
		s.lanes, s.vecN = sumVecBytes/8, sumVecBytes/8
	case Float32:
		s.lanes, s.vecN = sumVecBytes/4, sumVecBytes/4
	default:
		s.lanes, s.vecN = sumVecBytes/4, sumVecBytes/2
	}
	s.fast = s.nativeSum() && !noFastSum
	if numel > 0 {
		if nOut == 1 && numel >= sumGrain && o.Threads > 1 {
			tasks := min(int64(o.Threads), (numel+sumGrain-1)/sumGrain)
			chunk := (numel + tasks - 1) / tasks
			parts := make([]A, tasks)
			ParallelFor(tasks, sumGrain, func(lo, hi int64) {
				for t := lo; t < hi; t++ {
					sub := &sumIter[A]{dims: s.dims, in: in, scalarDT: s.scalarDT, outDT: s.outDT, lanes: s.lanes, vecN: s.vecN,
						acc: make([]A, 1), outIdx: s.outIdx, fast: s.fast}
					sub.forRange(t*chunk, min(numel, (t+1)*chunk))
					parts[t] = sub.acc[0]
				}
			})
			var total A
			for _, p := range parts {
				total += p
			}
			s.store(0, total)
		} else {
			s.forRange(0, numel)
		}
	}
	n := numel / nOut
	if s.fast && nativeOf[A](out.DType) && out.IsContiguous() {
		dst := unsafe.Slice((*A)(out.Ptr), nOut)
		for k, v := range s.acc {
			if o.Mean {
				v /= A(n)
			}
			dst[k] = v
		}
		return nil
	}
	dst := make([]float64, 1)
	oes := int64(out.DType.Size())
	idx := make([]int64, out.Dim())
	for k := int64(0); k < nOut; k++ {
		v := s.acc[k]
		if o.Mean {
			v = s.cast(v / A(n))
		}
		var off int64
		for d := range idx {
			off += idx[d] * out.Strides[d]
		}
		dst[0] = float64(v)
		storeFloat(unsafe.Add(out.Ptr, off*oes), 0, out.DType, dst)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < out.Sizes[d] {
				break
			}
			idx[d] = 0
		}
	}
	return nil
}
