package kernels

import (
	"cmp"
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

// ixCmpFloat orders floats ascending with NaN greater than everything (torch's sort order).
func ixCmpFloat(a, b float64) int {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

// ixSortLines sorts every line of self along dim (stable: equal keys keep their order;
// descending puts NaN first as torch does) and writes the first k of each line to
// values/indices (k = the line length for sort).
func ixSortLines(values, indices, self Tensor, dim int, k int64, descending bool) error {
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
	isFloat := self.DType.IsFloat()
	cost := n * int64(max(1, ixBitsLen(n)))
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
			pos := func(j int64) int64 { return 0 }
			if isFloat {
				for j := range fk {
					fk[j] = ixKeyed[float64]{ixGetF(at(src, int64(j)*ss), self.DType), int64(j)}
				}
				c := func(a, b ixKeyed[float64]) int { return ixCmpFloat(a.k, b.k) }
				if descending {
					c = func(a, b ixKeyed[float64]) int { return ixCmpFloat(b.k, a.k) }
				}
				slices.SortStableFunc(fk, c)
				pos = func(j int64) int64 { return fk[j].i }
			} else {
				for j := range ik {
					ik[j] = ixKeyed[int64]{ixGetI(at(src, int64(j)*ss), self.DType), int64(j)}
				}
				c := func(a, b ixKeyed[int64]) int { return cmp.Compare(a.k, b.k) }
				if descending {
					c = func(a, b ixKeyed[int64]) int { return cmp.Compare(b.k, a.k) }
				}
				slices.SortStableFunc(ik, c)
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

// Sort sorts self along dim into values and indices (stable; an unstable request gets
// the stable order, which is one of the orders it allows).
func Sort(values, indices, self Tensor, dim int, descending bool) error {
	n := int64(1)
	if self.Dim() > 0 {
		if dim < 0 || dim >= self.Dim() {
			return fmt.Errorf("dim %d out of range for %d-D input", dim, self.Dim())
		}
		n = self.Sizes[dim]
	}
	return ixSortLines(values, indices, self, dim, n, descending)
}

// TopK writes the k largest (or smallest) elements along dim, in sorted order, with
// NaN ranked above every number as torch does; ties keep index order.
func TopK(values, indices, self Tensor, dim int, k int64, largest bool) error {
	return ixSortLines(values, indices, self, dim, k, largest)
}
