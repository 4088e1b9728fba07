package kernels

import (
	"fmt"
	"math"
	"slices"
)

// ixDropDim removes dimension dim from a shape and from each operand's byte strides.
func ixDropDim(sizes []int64, strides [][]int64, dim int) ([]int64, [][]int64) {
	s := append(append([]int64{}, sizes[:dim]...), sizes[dim+1:]...)
	st := make([][]int64, len(strides))
	for i, v := range strides {
		st[i] = append(append([]int64{}, v[:dim]...), v[dim+1:]...)
	}
	return s, st
}

type ixKeyed[K int64 | float64] struct {
	k K
	i int64
}

// ixSortMode selects the algorithm ixSortLines applies to each line, as torch's CPU
// kernels do: std::stable_sort, std::sort, or topk's std::partial_sort (k*64 <= n) or
// std::nth_element followed (if sorted) by std::sort of the first k-1 elements.
type ixSortMode int

const (
	ixStable ixSortMode = iota
	ixUnstable
	ixTopK
	ixTopKUnsorted
)

func ixLessF(desc bool) func(a, b *ixKeyed[float64]) bool {
	if desc { // NaN first, then descending
		return func(a, b *ixKeyed[float64]) bool { return (a.k != a.k && b.k == b.k) || a.k > b.k }
	}
	return func(a, b *ixKeyed[float64]) bool { return (a.k == a.k && b.k != b.k) || a.k < b.k }
}

func ixLessI(desc bool) func(a, b *ixKeyed[int64]) bool {
	if desc {
		return func(a, b *ixKeyed[int64]) bool { return a.k > b.k }
	}
	return func(a, b *ixKeyed[int64]) bool { return a.k < b.k }
}

// ixOrderLine orders one line's (key, index) pairs with the algorithm of mode; the first
// k entries are the result.
func ixOrderLine[K int64 | float64](s []ixKeyed[K], k int, mode ixSortMode, less func(a, b *ixKeyed[K]) bool) {
	switch mode {
	case ixStable:
		slices.SortStableFunc(s, func(a, b ixKeyed[K]) int {
			if less(&a, &b) {
				return -1
			}
			if less(&b, &a) {
				return 1
			}
			return 0
		})
	case ixUnstable:
		stdSort(s, less)
	default:
		if k*64 <= len(s) {
			stdPartialSort(s, k, less)
			return
		}
		stdNthElement(s, k-1, less)
		if mode == ixTopK {
			stdSort(s[:k-1], less)
		}
	}
}

// ixSortLines orders every line of self along dim with the algorithm of mode (descending
// puts NaN first, ascending last, as torch does) and writes the first k of each line to
// values/indices (k = the line length for sort). Ties come out exactly as torch's CPU
// kernels leave them, libstdc++'s unstable algorithms included (stdsort.go).
func ixSortLines(values, indices, self Tensor, dim int, k int64, descending bool, mode ixSortMode) error {
	if values.DType != self.DType || indices.DType != Int64 {
		return fmt.Errorf("dtypes: values %v (self %v), indices %v (want int64)", values.DType, self.DType, indices.DType)
	}
	if self.Dim() == 0 {
		self = Tensor{Ptr: self.Ptr, DType: self.DType, Sizes: []int64{1}, Strides: []int64{1}}
		values = Tensor{Ptr: values.Ptr, DType: values.DType, Sizes: []int64{1}, Strides: []int64{1}}
		indices = Tensor{Ptr: indices.Ptr, DType: indices.DType, Sizes: []int64{1}, Strides: []int64{1}}
		dim = 0
	}
	if dim < 0 || dim >= self.Dim() {
		return fmt.Errorf("dim %d out of range for %d-D input", dim, self.Dim())
	}
	n := self.Sizes[dim]
	if k < 0 || k > n {
		return fmt.Errorf("selected index k out of range")
	}
	want := append([]int64{}, self.Sizes...)
	want[dim] = k
	if err := ixSameShape(want, []string{"values", "indices"}, values, indices); err != nil {
		return err
	}
	if self.Numel() == 0 || k == 0 {
		return nil
	}
	strides := [][]int64{ixByteStrides(values), ixByteStrides(indices), ixByteStrides(self)}
	outer, ost := ixDropDim(self.Sizes, strides, dim)
	lines := self.Numel() / n
	es := self.DType.Size()
	vs, is, ss := strides[0][dim], strides[1][dim], strides[2][dim]
	if ss == 0 && mode != ixTopK && mode != ixTopKUnsorted {
		// CPU's sort leaves a line of an expanded (stride-0) input in index order.
		mode = ixStable
	}
	isFloat := self.DType.IsFloat()
	cost := n * int64(max(1, ixBitsLen(n)))
	lessF, lessI := ixLessF(descending), ixLessI(descending)
	ParallelFor(lines, cost, func(lo, hi int64) {
		var fk []ixKeyed[float64]
		var ik []ixKeyed[int64]
		if isFloat {
			fk = make([]ixKeyed[float64], n)
		} else {
			ik = make([]ixKeyed[int64], n)
		}
		ixWalkRange(outer, ost, lo, hi, func(offs []int64) {
			src := at(self.Ptr, offs[2])
			var pos func(j int64) int64
			if isFloat {
				for j := range fk {
					fk[j] = ixKeyed[float64]{ixGetF(at(src, int64(j)*ss), self.DType), int64(j)}
				}
				ixOrderLine(fk, int(k), mode, lessF)
				pos = func(j int64) int64 { return fk[j].i }
			} else {
				for j := range ik {
					ik[j] = ixKeyed[int64]{ixGetI(at(src, int64(j)*ss), self.DType), int64(j)}
				}
				ixOrderLine(ik, int(k), mode, lessI)
				pos = func(j int64) int64 { return ik[j].i }
			}
			for j := int64(0); j < k; j++ {
				p := pos(j)
				ixCopyElem(at(values.Ptr, offs[0]+j*vs), at(src, p*ss), es)
				*(*int64)(at(indices.Ptr, offs[1]+j*is)) = p
			}
		})
	})
	return nil
}

func ixBitsLen(n int64) int { return int(math.Log2(float64(n)+1)) + 1 }

// Sort sorts self along dim into values and indices stably (std::stable_sort's order).
func Sort(values, indices, self Tensor, dim int, descending bool) error {
	return ixSort(values, indices, self, dim, descending, ixStable)
}

// SortUnstable sorts self along dim into values and indices with the tie order of
// libstdc++'s std::sort, as torch's CPU sort(stable=False) does.
func SortUnstable(values, indices, self Tensor, dim int, descending bool) error {
	return ixSort(values, indices, self, dim, descending, ixUnstable)
}

func ixSort(values, indices, self Tensor, dim int, descending bool, mode ixSortMode) error {
	n := int64(1)
	if self.Dim() > 0 {
		if dim < 0 || dim >= self.Dim() {
			return fmt.Errorf("dim %d out of range for %d-D input", dim, self.Dim())
		}
		n = self.Sizes[dim]
	}
	return ixSortLines(values, indices, self, dim, n, descending, mode)
}

// TopK writes the k largest (or smallest) elements along dim with NaN ranked above every
// number, in the order torch's CPU topk leaves them: std::partial_sort when k*64 <= n,
// else std::nth_element then (if sorted) std::sort of the first k-1.
func TopK(values, indices, self Tensor, dim int, k int64, largest, sorted bool) error {
	mode := ixTopK
	if !sorted {
		mode = ixTopKUnsorted
	}
	return ixSortLines(values, indices, self, dim, k, largest, mode)
}
