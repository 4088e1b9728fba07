package kernels

import (
	"fmt"
	"unsafe"
)

// Selections along the last dim of [M, N] views (python/.../_ops/selection_ops.py):
// median, nanmedian, kthvalue and mode, each returning one value and its index per row,
// with the tie and NaN rules of torch's CPU kernels (aten/src/ATen/native/Sorting.cpp and
// cpu/TensorCompareKernel.cpp): median partitions row indices with libstdc++'s
// std::nth_element under a (value, index) order, kthvalue runs TH's Sedgewick
// quickselect on (value, index) pairs, mode std::sorts (value, index) pairs by value.

// Selection kinds.
const (
	SelMedian    = iota // NaN anywhere: the first NaN; else the lower median
	SelNanMedian        // the lower median of the non-NaN values (NaN if all are)
	SelKth              // the k-th smallest (NaN ranks above every number)
	SelMode             // the most frequent value (the smallest of equally frequent ones)
	selKinds
)

type selKey interface{ int64 | float64 }

func selIsNaN[K selKey](v K) bool { return v != v }

// selLine loads one row into keys (as float64 for floats, int64 otherwise).
func selLine[K selKey](keys []K, src unsafe.Pointer, stride int64, dt DType, get func(unsafe.Pointer, DType) K) {
	for j := range keys {
		keys[j] = get(at(src, int64(j)*stride), dt)
	}
}

func selGetF(p unsafe.Pointer, dt DType) float64 { return ixGetF(p, dt) }
func selGetI(p unsafe.Pointer, dt DType) int64   { return ixGetI(p, dt) }

// selMedian returns the position of the median of keys (ignoreNaN: of the non-NaN ones).
func selMedian[K selKey](keys []K, idx []int64, ignoreNaN bool) int64 {
	n := len(keys)
	if !ignoreNaN {
		for j, v := range keys {
			if selIsNaN(v) {
				return int64(j)
			}
		}
	}
	for j := range idx {
		idx[j] = int64(j)
	}
	nans := 0
	if ignoreNaN {
		for _, v := range keys {
			if selIsNaN(v) {
				nans++
			}
		}
	}
	// C++'s (size - nans - 1) / 2 truncates toward zero: an all-NaN row takes position 0.
	nth := (n - nans - 1) / 2
	less := func(a, b *int64) bool {
		x, y := keys[*a], keys[*b]
		return x < y || (x == y && *a < *b) || (ignoreNaN && selIsNaN(y) && !selIsNaN(x))
	}
	stdNthElement(idx, nth, less)
	return idx[nth]
}

// selKth is TH's quick_select_template on (vals, idx) for 0-based position k, NaN
// ranking above every number; it returns the original index of the k-th smallest.
func selKth[K selKey](vals []K, idx []int64, k int64) int64 {
	for j := range idx {
		idx[j] = int64(j)
	}
	gt := func(x, y K) bool { return (selIsNaN(x) && !selIsNaN(y)) || x > y }
	swap := func(i, j int64) {
		vals[i], vals[j] = vals[j], vals[i]
		idx[i], idx[j] = idx[j], idx[i]
	}
	L, R := int64(0), int64(len(vals)-1)
	for {
		if R <= L {
			break
		}
		if R == L+1 {
			if gt(vals[L], vals[R]) {
				swap(L, R)
			}
			break
		}
		P := L + (R-L)/2
		swap(P, L+1)
		if gt(vals[L+1], vals[R]) {
			swap(L+1, R)
		}
		if gt(vals[L], vals[R]) {
			swap(L, R)
		}
		if gt(vals[L+1], vals[L]) {
			swap(L+1, L)
		}
		i, j := L+1, R
		piv := vals[L]
		for {
			i++
			for gt(piv, vals[i]) {
				i++
			}
			j--
			for gt(vals[j], piv) {
				j--
			}
			if j < i {
				break
			}
			swap(i, j)
		}
		swap(L, j)
		if j <= k {
			L = i
		}
		if j >= k {
			R = j - 1
		}
	}
	return idx[k]
}

type selPair[K selKey] struct {
	v K
	i int64
}

// selMode is torch's CPU mode: std::sort of (value, index) pairs by value, then the last
// pair of the first run with the highest count.
func selMode[K selKey](pairs []selPair[K]) int64 {
	stdSort(pairs, func(a, b *selPair[K]) bool { return a.v < b.v })
	n := len(pairs)
	var modei, freq, best int64
	for i := 0; i < n; i++ {
		freq++
		if i == n-1 || pairs[i].v != pairs[i+1].v {
			if freq > best {
				modei, best = pairs[i].i, freq
			}
			freq = 0
		}
	}
	return modei
}

// LineSelect runs kind over each row of in [M, N] and writes the selected element and its
// index within the row to values[r] and indices[r] (1-D, length M). k is kthvalue's 1-based
// rank.
func LineSelect(kind int, k int64, values, indices, in Tensor) error {
	if kind < 0 || kind >= selKinds {
		return fmt.Errorf("unknown selection kind %d", kind)
	}
	if in.Dim() != 2 || values.Dim() != 1 || indices.Dim() != 1 ||
		values.Sizes[0] != in.Sizes[0] || indices.Sizes[0] != in.Sizes[0] {
		return fmt.Errorf("expected values [M], indices [M], in [M, N], got %v, %v, %v",
			values.Sizes, indices.Sizes, in.Sizes)
	}
	if values.DType != in.DType || indices.DType != Int64 {
		return fmt.Errorf("dtypes: values %v (in %v), indices %v (want int64)", values.DType, in.DType, indices.DType)
	}
	M, N := in.Sizes[0], in.Sizes[1]
	if M == 0 {
		return nil
	}
	if N == 0 {
		return fmt.Errorf("cannot select from an empty row")
	}
	if kind == SelKth && (k < 1 || k > N) {
		return fmt.Errorf("selected index k out of range")
	}
	es := int64(in.DType.Size())
	rs, cs := in.Strides[0]*es, in.Strides[1]*es
	vs, is := values.Strides[0]*es, indices.Strides[0]*8
	float := in.DType.IsFloat()
	ParallelFor(M, N*int64(max(1, ixBitsLen(N))), func(lo, hi int64) {
		if float {
			selRows(kind, k, lo, hi, N, in, rs, cs, values.Ptr, vs, indices.Ptr, is, es, selGetF)
		} else {
			selRows(kind, k, lo, hi, N, in, rs, cs, values.Ptr, vs, indices.Ptr, is, es, selGetI)
		}
	})
	return nil
}

func selRows[K selKey](kind int, k, lo, hi, N int64, in Tensor, rs, cs int64, vp unsafe.Pointer, vs int64,
	ip unsafe.Pointer, is int64, es int64, get func(unsafe.Pointer, DType) K) {
	keys := make([]K, N)
	idx := make([]int64, N)
	var pairs []selPair[K]
	if kind == SelMode {
		pairs = make([]selPair[K], N)
	}
	for r := lo; r < hi; r++ {
		src := at(in.Ptr, r*rs)
		var pos int64
		switch kind {
		case SelMedian, SelNanMedian:
			selLine(keys, src, cs, in.DType, get)
			pos = selMedian(keys, idx, kind == SelNanMedian)
		case SelKth:
			selLine(keys, src, cs, in.DType, get)
			pos = selKth(keys, idx, k-1)
		default:
			for j := range pairs {
				pairs[j] = selPair[K]{get(at(src, int64(j)*cs), in.DType), int64(j)}
			}
			pos = selMode(pairs)
		}
		ixCopyElem(at(vp, r*vs), at(src, pos*cs), int(es))
		*(*int64)(at(ip, r*is)) = pos
	}
}

// ----------------------------------------------------------------------------- searchsorted

// SearchSorted writes, for each value vals[r, j], the insertion position in the sorted row
// seq[r, :] (or in the row ordered by sorter[r, :]): the first position whose element is
// >= the value (right: > the value), by torch's cus_lower_bound/cus_upper_bound, whose
// negated comparisons put NaN values past every number. seq and vals have one dtype; out
// is int64 or int32 [M, K].
func SearchSorted(out, seq, vals Tensor, sorter *Tensor, right bool) error {
	if seq.Dim() != 2 || vals.Dim() != 2 || out.Dim() != 2 || seq.Sizes[0] != vals.Sizes[0] ||
		out.Sizes[0] != vals.Sizes[0] || out.Sizes[1] != vals.Sizes[1] {
		return fmt.Errorf("expected out [M, K], seq [M, N], vals [M, K], got %v, %v, %v", out.Sizes, seq.Sizes, vals.Sizes)
	}
	if seq.DType != vals.DType {
		return fmt.Errorf("seq %v and values %v must have one dtype", seq.DType, vals.DType)
	}
	if out.DType != Int64 && out.DType != Int32 {
		return fmt.Errorf("out must be int64 or int32, got %v", out.DType)
	}
	if sorter != nil && (sorter.Dim() != 2 || sorter.Sizes[0] != seq.Sizes[0] || sorter.Sizes[1] != seq.Sizes[1] ||
		sorter.DType != Int64) {
		return fmt.Errorf("sorter must be int64 of seq's shape %v, got %v %v", seq.Sizes, sorter.DType, sorter.Sizes)
	}
	M, N, K := seq.Sizes[0], seq.Sizes[1], vals.Sizes[1]
	if M == 0 || K == 0 {
		return nil
	}
	es := int64(seq.DType.Size())
	float := seq.DType.IsFloat()
	ParallelFor(M*K, max(1, int64(ixBitsLen(N)))*4, func(lo, hi int64) {
		for e := lo; e < hi; e++ {
			r, j := e/K, e%K
			row := at(seq.Ptr, r*seq.Strides[0]*es)
			elemAt := func(m int64) unsafe.Pointer {
				if sorter != nil {
					m = *(*int64)(at(sorter.Ptr, (r*sorter.Strides[0]+m*sorter.Strides[1])*8))
					if m < 0 || m >= N {
						m = min(max(m, 0), N-1) // bad sorter indices are the caller's check; never read outside
					}
				}
				return at(row, m*seq.Strides[1]*es)
			}
			vp := at(vals.Ptr, (r*vals.Strides[0]+j*vals.Strides[1])*es)
			var pos int64
			if float {
				pos = ssBound(N, ixGetF(vp, vals.DType), func(m int64) float64 { return ixGetF(elemAt(m), seq.DType) }, right)
			} else {
				pos = ssBound(N, ixGetI(vp, vals.DType), func(m int64) int64 { return ixGetI(elemAt(m), seq.DType) }, right)
			}
			op := at(out.Ptr, (r*out.Strides[0]+j*out.Strides[1])*int64(out.DType.Size()))
			if out.DType == Int32 {
				*(*int32)(op) = int32(pos)
			} else {
				*(*int64)(op) = pos
			}
		}
	})
	return nil
}

func ssBound[K selKey](n int64, val K, get func(int64) K, right bool) int64 {
	start, end := int64(0), n
	for start < end {
		mid := start + (end-start)>>1
		m := get(mid)
		var goRight bool
		if right {
			goRight = !(m > val)
		} else {
			goRight = !(m >= val)
		}
		if goRight {
			start = mid + 1
		} else {
			end = mid
		}
	}
	return start
}

// LinspaceCPU writes n evenly spaced values from start to end into out (1-D, float32,
// bfloat16 or float16) exactly as torch's CPU linspace kernel rounds them: start, end and
// step in out's dtype, every product and sum rounded to it; the first half from start,
// the second from end; the leading pairs of `lanes`-wide vectors (Vectorized<T>::arange:
// lane i is base + i*step) and the scalar tail.
func LinspaceCPU(out Tensor, start, end float64, lanes int64) error {
	if out.Dim() != 1 || !out.DType.IsFloat() || out.DType == Float64 || lanes <= 0 {
		return fmt.Errorf("out must be a 1-D float32/bfloat16/float16 tensor (lanes > 0), got %v %v", out.DType, out.Sizes)
	}
	n := out.Sizes[0]
	if n == 0 {
		return nil
	}
	dt := out.DType
	r := histArith(dt)
	es := out.Strides[0] * int64(dt.Size())
	s, e := r(start), r(end)
	if n == 1 {
		ixSetF(out.Ptr, dt, s)
		return nil
	}
	// The 16-bit types convert an int64 operand to their own type first.
	ri := func(i int64) float64 {
		if dt == Float32 {
			return float64(float32(i))
		}
		return r(float64(i))
	}
	step := r(r(e-s) / ri(n-1))
	half := n / 2
	base := func(i int64) float64 {
		if i < half {
			return r(s + r(step*ri(i)))
		}
		return r(e - r(step*ri(n-i-1)))
	}
	vecEnd := n / (2 * lanes) * (2 * lanes)
	for i := int64(0); i < vecEnd; i += lanes {
		b := base(i)
		for l := int64(0); l < lanes; l++ {
			v := b
			if l > 0 {
				v = r(b + r(ri(l)*step))
			}
			ixSetF(at(out.Ptr, (i+l)*es), dt, v)
		}
	}
	for i := vecEnd; i < n; i++ {
		ixSetF(at(out.Ptr, i*es), dt, base(i))
	}
	return nil
}
