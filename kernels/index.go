package kernels

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// loadIndices reads a 0-D or 1-D int32/int64 index tensor.
func loadIndices(idx Tensor) ([]int64, error) {
	if idx.Dim() > 1 {
		return nil, fmt.Errorf("index must be 0-D or 1-D, got %d-D", idx.Dim())
	}
	n, s := idx.Numel(), int64(0)
	if idx.Dim() == 1 {
		s = idx.Strides[0]
	}
	out := make([]int64, n)
	switch idx.DType {
	case Int64:
		for i := range out {
			out[i] = *(*int64)(at(idx.Ptr, int64(i)*s*8))
		}
	case Int32:
		for i := range out {
			out[i] = int64(*(*int32)(at(idx.Ptr, int64(i)*s*4)))
		}
	default:
		return nil, fmt.Errorf("index must be int32 or int64, got %v", idx.DType)
	}
	return out, nil
}

// selectView is t with dimension dim fixed at i (dropped).
func selectView(t Tensor, dim int, i int64) Tensor {
	v := Tensor{Ptr: at(t.Ptr, i*t.Strides[dim]*int64(t.DType.Size())), DType: t.DType}
	v.Sizes = append(append([]int64{}, t.Sizes[:dim]...), t.Sizes[dim+1:]...)
	v.Strides = append(append([]int64{}, t.Strides[:dim]...), t.Strides[dim+1:]...)
	return v
}

// IndexSelect writes out.select(dim, i) = self.select(dim, index[i]). self and out have the
// same rank (a 0-D self is passed as 1-D by the caller).
func IndexSelect(out, self, index Tensor, dim int) error {
	if out.DType != self.DType {
		return fmt.Errorf("dtype mismatch: out %v, self %v", out.DType, self.DType)
	}
	if dim < 0 || dim >= self.Dim() || out.Dim() != self.Dim() {
		return fmt.Errorf("dim %d out of range for %v / %v", dim, self.Sizes, out.Sizes)
	}
	ix, err := loadIndices(index)
	if err != nil {
		return err
	}
	for d := range self.Sizes {
		want := self.Sizes[d]
		if d == dim {
			want = int64(len(ix))
		}
		if out.Sizes[d] != want {
			return fmt.Errorf("out of shape %v, expected %d at dim %d", out.Sizes, want, d)
		}
	}
	for _, k := range ix {
		if k < 0 || k >= self.Sizes[dim] {
			return fmt.Errorf("index out of range in self")
		}
	}
	inner := out.Numel() / max(int64(len(ix)), 1)
	if indexSelectRows(out, self, ix, dim) {
		return nil
	}
	var first error
	var mu sync.Mutex
	ParallelFor(int64(len(ix)), inner, func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			if err := Copy(selectView(out, dim, i), selectView(self, dim, ix[i])); err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
				return
			}
		}
	})
	return first
}

// indexSelectRows is IndexSelect when the dims after dim are one contiguous block in both
// self and out (an embedding lookup's rows, say): each selected block is one memmove.
// It reports false, doing nothing, for other layouts.
func indexSelectRows(out, self Tensor, ix []int64, dim int) bool {
	for _, t := range []Tensor{out, self} {
		want := int64(1)
		for d := t.Dim() - 1; d > dim; d-- {
			if t.Sizes[d] != 1 && t.Strides[d] != want {
				return false
			}
			want *= t.Sizes[d]
		}
	}
	inner := int64(1)
	for d := dim + 1; d < out.Dim(); d++ {
		inner *= out.Sizes[d]
	}
	es := int64(out.DType.Size())
	nb := inner * es
	nix := int64(len(ix))
	outer := int64(1)
	for d := 0; d < dim; d++ {
		outer *= out.Sizes[d]
	}
	// offsets of outer row o in t (dims before dim), in bytes
	offset := func(t Tensor, o int64) int64 {
		var off int64
		for d := dim - 1; d >= 0; d-- {
			off += o % t.Sizes[d] * t.Strides[d]
			o /= t.Sizes[d]
		}
		return off * es
	}
	ParallelFor(outer*nix, inner, func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			o, i := r/nix, r%nix
			dst := at(out.Ptr, offset(out, o)+i*out.Strides[dim]*es)
			src := at(self.Ptr, offset(self, o)+ix[i]*self.Strides[dim]*es)
			copy(unsafe.Slice((*byte)(dst), nb), unsafe.Slice((*byte)(src), nb))
		}
	})
	return true
}

// EmbeddingBackward computes grad_weight ([num_weights, D], overwritten) from grad ([M, D])
// and indices ([M]): rows summed per index, padding_idx skipped, optionally scaled by
// 1/frequency. Each worker owns a block of weight rows, so sums are deterministic.
func EmbeddingBackward(gw, grad, index Tensor, paddingIdx int64, scaleByFreq bool) error {
	if gw.Dim() != 2 || grad.Dim() != 2 || grad.Sizes[1] != gw.Sizes[1] {
		return fmt.Errorf("grad_weight %v and grad %v must be [*, D]", gw.Sizes, grad.Sizes)
	}
	if !gw.DType.IsFloat() || !grad.DType.IsFloat() {
		return fmt.Errorf("unsupported dtypes %v, %v", gw.DType, grad.DType)
	}
	ix, err := loadIndices(index)
	if err != nil {
		return err
	}
	if int64(len(ix)) != grad.Sizes[0] {
		return fmt.Errorf("%d indices for %d gradient rows", len(ix), grad.Sizes[0])
	}
	V, D := gw.Sizes[0], gw.Sizes[1]
	for _, k := range ix {
		if k < 0 || k >= V {
			return fmt.Errorf("index %d out of range for %d embeddings", k, V)
		}
	}
	var freq []int64
	if scaleByFreq {
		freq = make([]int64, V)
		for _, k := range ix {
			freq[k]++
		}
	}
	if gw.DType == Float32 && grad.DType == Float32 && gw.Strides[1] == 1 && grad.Strides[1] == 1 {
		embeddingBackward32(gw, grad, ix, paddingIdx, freq)
		return nil
	}
	ges, wes := int64(grad.DType.Size()), int64(gw.DType.Size())
	ParallelFor(V, int64(len(ix))/max(V, 1)*D+D+1, func(lo, hi int64) {
		acc := make([]float64, (hi-lo)*D)
		row := make([]float64, D)
		for i, k := range ix {
			if k < lo || k >= hi || k == paddingIdx {
				continue
			}
			loadRowT(row, at(grad.Ptr, int64(i)*grad.Strides[0]*ges), grad.Strides[1]*ges, grad.DType)
			dst := acc[(k-lo)*D : (k-lo+1)*D]
			scale := 1.0
			if freq != nil {
				scale = 1 / float64(freq[k])
			}
			for j, v := range row {
				dst[j] += v * scale
			}
		}
		for k := lo; k < hi; k++ {
			storeRowT(at(gw.Ptr, k*gw.Strides[0]*wes), gw.Strides[1]*wes, gw.DType, acc[(k-lo)*D:(k-lo+1)*D])
		}
	})
	return nil
}

// embeddingBackward32 is EmbeddingBackward for float32 rows: like torch's CPU kernel it
// adds each gradient row into its weight row in float32, in index order (a fused
// multiply-add when scaled by frequency), each worker owning a block of weight rows.
func embeddingBackward32(gw, grad Tensor, ix []int64, paddingIdx int64, freq []int64) {
	V, D := gw.Sizes[0], gw.Sizes[1]
	ParallelFor(V, int64(len(ix))/max(V, 1)*D+D+1, func(lo, hi int64) {
		for k := lo; k < hi; k++ {
			clear(unsafe.Slice((*float32)(at(gw.Ptr, k*gw.Strides[0]*4)), D))
		}
		for i, k := range ix {
			if k < lo || k >= hi || k == paddingIdx {
				continue
			}
			dst := unsafe.Slice((*float32)(at(gw.Ptr, k*gw.Strides[0]*4)), D)
			src := unsafe.Slice((*float32)(at(grad.Ptr, int64(i)*grad.Strides[0]*4)), D)[:len(dst)]
			if freq == nil {
				for j, v := range src {
					dst[j] += v
				}
				continue
			}
			scale := float64(float32(1 / float64(freq[k])))
			for j, v := range src {
				dst[j] = float32(math.FMA(float64(v), scale, float64(dst[j])))
			}
		}
	})
}
