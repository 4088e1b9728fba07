package kernels

import (
	"fmt"
	"slices"
	"unsafe"
)

// EmbeddingBag (aten::_embedding_bag and its backwards, the hpex EmbeddingBag helpers):
// bag b of a batch is positions [offsets[b], end_b) of indices, end_b = offsets[b+1], or
// the number of indices for the last offset. Each bag reduces its weight rows by sum
// (optionally scaled by per-sample weights), mean or max; indices equal to paddingIdx
// are left out of the bag. Rows are float32 or bfloat16 (accumulated in float32 in index
// order, as torch's CPU kernel does); indices and offsets int32 or int64.

// Bag reduction modes (torch's EmbeddingBagMode).
const (
	BagSum  = 0
	BagMean = 1
	BagMax  = 2
)

// EmbeddingBagParams are a call's attributes.
type EmbeddingBagParams struct {
	Mode        int
	PaddingIdx  int64 // an index left out of every bag; negative: none
	IncludeLast bool  // offsets has one entry per bag plus the end of the last bag
	ScaleByFreq bool  // backward: divide each row's gradient by its index's count
}

// bagLayout is the batch split into bags: bag b spans positions [start[b], end[b]).
type bagLayout struct {
	ix         []int64
	start, end []int64
}

func loadBags(indices, offsets Tensor, nBags int64) (bagLayout, error) {
	ix, err := loadIndices(indices)
	if err != nil {
		return bagLayout{}, err
	}
	off, err := loadIndices(offsets)
	if err != nil {
		return bagLayout{}, err
	}
	n := int64(len(ix))
	if nBags > int64(len(off)) {
		return bagLayout{}, fmt.Errorf("embedding_bag: %d bags need at least as many offsets, got %d", nBags, len(off))
	}
	if len(off) > 0 && off[0] != 0 {
		return bagLayout{}, fmt.Errorf("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to "+
			"start from position 0. However, got %d", off[0])
	}
	if len(off) > 0 && off[len(off)-1] > n {
		return bagLayout{}, fmt.Errorf("offsets[-1] can not be greater than input's length %d but got offsets[-1] of %d",
			n, off[len(off)-1])
	}
	l := bagLayout{ix: ix, start: make([]int64, nBags), end: make([]int64, nBags)}
	for b := int64(0); b < nBags; b++ {
		s, e := off[b], n
		if b+1 < int64(len(off)) {
			e = off[b+1]
		}
		s, e = min(max(s, 0), n), min(max(e, 0), n)
		if e < s {
			e = s // decreasing offsets: an empty bag (torch's CPU kernel does not check them)
		}
		l.start[b], l.end[b] = s, e
	}
	return l, nil
}

func (l bagLayout) checkRange(numRows int64) error {
	for _, k := range l.ix {
		if k < 0 || k >= numRows {
			return fmt.Errorf("embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be %d", k)
		}
	}
	return nil
}

func bagI64(t Tensor) []int64 { return unsafe.Slice((*int64)(t.Ptr), t.Numel()) }

func bagRow(t Tensor, r int64) unsafe.Pointer {
	return at(t.Ptr, r*t.Strides[0]*int64(t.DType.Size()))
}

func bagColStride(t Tensor) int64 { return t.Strides[1] * int64(t.DType.Size()) }

func bagCheckRows(name string, t Tensor, D int64) error {
	if t.Dim() != 2 || t.Sizes[1] != D || (t.DType != Float32 && t.DType != BFloat16) {
		return fmt.Errorf("embedding_bag: %s must be a float32 or bfloat16 [*, %d] tensor, got %v %v", name, D,
			t.DType, t.Sizes)
	}
	return nil
}

func bagCheckI64(name string, t Tensor, n int64) error {
	if t.DType != Int64 || t.Numel() != n || !t.IsContiguous() {
		return fmt.Errorf("embedding_bag: %s must be a contiguous int64 tensor of %d elements", name, n)
	}
	return nil
}

// EmbeddingBagForward writes out [B, D] (weight's dtype), bagSize [B] (the bag's indices
// other than padding for mean and max, 0 for sum, as torch reports them) and, when given,
// maxIdx (max mode: [B, D], the weight row each maximum came from, 0 for an empty bag;
// other modes: [B], a copy of bagSize) and offset2bag [n] (each position's bag).
// psw (optional, sum mode) scales each position's row.
func EmbeddingBagForward(out, bagSize Tensor, maxIdx, offset2bag *Tensor, weight, indices, offsets Tensor,
	psw *Tensor, p EmbeddingBagParams) error {
	D := weight.Sizes[len(weight.Sizes)-1]
	if err := bagCheckRows("weight", weight, D); err != nil {
		return err
	}
	if err := bagCheckRows("output", out, D); err != nil {
		return err
	}
	B := out.Sizes[0]
	l, err := loadBags(indices, offsets, B)
	if err != nil {
		return err
	}
	if err := l.checkRange(weight.Sizes[0]); err != nil {
		return err
	}
	n := int64(len(l.ix))
	if err := bagCheckI64("bag_size", bagSize, B); err != nil {
		return err
	}
	var wts []float32
	if psw != nil {
		if p.Mode != BagSum {
			return fmt.Errorf("embedding_bag: per_sample_weights is only supported for mode='sum'")
		}
		if psw.Dim() != 1 || psw.Sizes[0] != n {
			return fmt.Errorf("embedding_bag: expected per_sample_weights to be 1-D with %d elements", n)
		}
		wts = make([]float32, n)
		loadRowF32(wts, psw.Ptr, psw.Strides[0]*int64(psw.DType.Size()), psw.DType)
	}
	var mi []int64
	if maxIdx != nil {
		want := B
		if p.Mode == BagMax {
			want = B * D
		}
		if err := bagCheckI64("max_indices", *maxIdx, want); err != nil {
			return err
		}
		mi = bagI64(*maxIdx)
	}
	bs := bagI64(bagSize)
	if offset2bag != nil {
		if err := bagCheckI64("offset2bag", *offset2bag, n); err != nil {
			return err
		}
		o2b := bagI64(*offset2bag)
		clear(o2b)
		for b := int64(0); b < B; b++ {
			for j := l.start[b]; j < l.end[b]; j++ {
				o2b[j] = b
			}
		}
	}
	wcs, ocs := bagColStride(weight), bagColStride(out)
	ParallelFor(B, max(n/max(B, 1), 1)*D+D, func(lo, hi int64) {
		acc := make([]float32, D)
		row := make([]float32, D)
		arg := make([]int64, D)
		for b := lo; b < hi; b++ {
			clear(acc)
			cnt := int64(0)
			for j := l.start[b]; j < l.end[b]; j++ {
				k := l.ix[j]
				if k == p.PaddingIdx {
					continue
				}
				loadRowF32(row, bagRow(weight, k), wcs, weight.DType)
				switch {
				case p.Mode == BagMax:
					for d, v := range row {
						if cnt == 0 || v > acc[d] {
							acc[d], arg[d] = v, k
						}
					}
				case wts != nil:
					w := wts[j]
					for d, v := range row {
						acc[d] += w * v
					}
				default:
					for d, v := range row {
						acc[d] += v
					}
				}
				cnt++
			}
			if p.Mode == BagMean && cnt > 0 {
				inv := 1 / float32(cnt)
				for d := range acc {
					acc[d] *= inv
				}
			}
			storeRowF32(bagRow(out, b), ocs, out.DType, acc)
			if p.Mode == BagSum {
				cnt = 0
			}
			bs[b] = cnt
			switch {
			case mi == nil:
			case p.Mode == BagMax:
				dst := mi[b*D : (b+1)*D]
				if cnt == 0 {
					clear(dst)
				} else {
					copy(dst, arg)
				}
			default:
				mi[b] = cnt
			}
		}
	})
	return nil
}

// EmbeddingBagBackward writes gw [V, D], the gradient of the weight, from grad [B, D]:
// sum mode adds each position's bag gradient (times its per-sample weight) to its row,
// mean mode divides by the bag's size (bagSize from the forward), max mode routes each
// element of a non-empty bag's gradient to the row maxIdx names. Each worker owns a block
// of weight rows and adds in position order, so the result does not depend on timing.
func EmbeddingBagBackward(gw, grad, indices, offsets, bagSize Tensor, maxIdx, psw *Tensor, p EmbeddingBagParams) error {
	D := grad.Sizes[len(grad.Sizes)-1]
	if err := bagCheckRows("grad", grad, D); err != nil {
		return err
	}
	if err := bagCheckRows("grad_weight", gw, D); err != nil {
		return err
	}
	B, V := grad.Sizes[0], gw.Sizes[0]
	l, err := loadBags(indices, offsets, B)
	if err != nil {
		return err
	}
	if err := l.checkRange(V); err != nil {
		return err
	}
	n := int64(len(l.ix))
	if err := bagCheckI64("bag_size", bagSize, B); err != nil {
		return err
	}
	bs := bagI64(bagSize)
	var wts []float32
	if psw != nil {
		if psw.Dim() != 1 || psw.Sizes[0] != n {
			return fmt.Errorf("embedding_bag: expected per_sample_weights to be 1-D with %d elements", n)
		}
		wts = make([]float32, n)
		loadRowF32(wts, psw.Ptr, psw.Strides[0]*int64(psw.DType.Size()), psw.DType)
	}
	var mi []int64
	if p.Mode == BagMax {
		if maxIdx == nil {
			return fmt.Errorf("embedding_bag: max mode needs max_indices")
		}
		if err := bagCheckI64("max_indices", *maxIdx, B*D); err != nil {
			return err
		}
		mi = bagI64(*maxIdx)
		for i, k := range mi {
			if bs[int64(i)/D] > 0 && (k < 0 || k >= V) {
				return fmt.Errorf("embedding_bag: max_indices entry %d out of range for %d rows", k, V)
			}
		}
	}
	var freq []int64
	if p.ScaleByFreq && p.Mode != BagMax {
		freq = freqDivisors(l.ix, V)
	}
	// Positions are added in the order torch's CPU kernel visits them: indices sorted by
	// std::sort (its order of equal indices included), which decides bfloat16 roundings.
	order := make([]int64, 0, n)
	bagOf := make([]int64, n)
	if p.Mode != BagMax {
		keyed := make([]ixKeyed[int64], n)
		for j, k := range l.ix {
			keyed[j] = ixKeyed[int64]{k: k, i: int64(j)}
			bagOf[j] = -1
		}
		stdSort(keyed, ixLessI(false))
		for _, e := range keyed {
			order = append(order, e.i)
		}
		for b := int64(0); b < B; b++ {
			for j := l.start[b]; j < l.end[b]; j++ {
				bagOf[j] = b
			}
		}
	}
	gcs, wcs := bagColStride(grad), bagColStride(gw)
	bf16Acc := gw.DType == BFloat16
	ParallelFor(V, max(n/max(V, 1), 1)*D+D, func(lo, hi int64) {
		acc := make([]float32, (hi-lo)*D)
		row := make([]float32, D)
		if p.Mode == BagMax {
			for b := int64(0); b < B; b++ {
				if bs[b] == 0 {
					continue
				}
				loaded := false
				for d := int64(0); d < D; d++ {
					k := mi[b*D+d]
					if k < lo || k >= hi {
						continue
					}
					if !loaded {
						loadRowF32(row, bagRow(grad, b), gcs, grad.DType)
						loaded = true
					}
					if bf16Acc {
						acc[(k-lo)*D+d] = BF16ToF32(F32ToBF16(acc[(k-lo)*D+d] + row[d]))
					} else {
						acc[(k-lo)*D+d] += row[d]
					}
				}
			}
		} else {
			for _, j := range order {
				k, b := l.ix[j], bagOf[j]
				if k < lo || k >= hi || k == p.PaddingIdx || b < 0 {
					continue
				}
				loadRowF32(row, bagRow(grad, b), gcs, grad.DType)
				scale := 1.0
				if wts != nil {
					scale = float64(wts[j])
				}
				if freq != nil {
					scale /= float64(freq[k])
				}
				if p.Mode == BagMean && bs[b] > 0 {
					scale /= float64(bs[b])
				}
				dst := acc[(k-lo)*D : (k-lo+1)*D]
				if bf16Acc {
					// torch's CPU kernel adds into a bfloat16 gradient with a bfloat16 scale,
					// rounding the product and then the sum (bfloat16 operators): the same here.
					sc := BF16ToF32(F32ToBF16(float32(scale)))
					for d, v := range row {
						dst[d] = BF16ToF32(F32ToBF16(dst[d] + BF16ToF32(F32ToBF16(sc*v))))
					}
					continue
				}
				sc := float32(scale)
				for d, v := range row {
					dst[d] += sc * v
				}
			}
		}
		for k := lo; k < hi; k++ {
			storeRowF32(bagRow(gw, k), wcs, gw.DType, acc[(k-lo)*D:(k-lo+1)*D])
		}
	})
	return nil
}

// freqDivisors is, per weight row, what scale_grad_by_freq divides its gradient by, as
// torch's CPU kernel computes it: the distinct indices in ascending order are groups
// 0, 1, ...; group g is divided by the count of the g-th smallest index position (not of
// its own index: torch's CPU quirk, which its own tests and ours compare against).
func freqDivisors(ix []int64, V int64) []int64 {
	counts := make([]int64, V)
	for _, k := range ix {
		counts[k]++
	}
	sorted := slices.Clone(ix)
	slices.Sort(sorted)
	div := make([]int64, V)
	g := 0
	for i := 0; i < len(sorted); g++ {
		k := sorted[i]
		for i < len(sorted) && sorted[i] == k {
			i++
		}
		div[k] = counts[sorted[g]]
	}
	return div
}

// EmbeddingBagPerSampleWeightsBackward writes out [n], the gradient of sum mode's
// per-sample weights: the dot product of each position's bag gradient with its weight
// row (0 for padding and positions in no bag).
func EmbeddingBagPerSampleWeightsBackward(out, grad, weight, indices, offsets Tensor, paddingIdx int64) error {
	D := grad.Sizes[len(grad.Sizes)-1]
	if err := bagCheckRows("grad", grad, D); err != nil {
		return err
	}
	if err := bagCheckRows("weight", weight, D); err != nil {
		return err
	}
	B := grad.Sizes[0]
	l, err := loadBags(indices, offsets, B)
	if err != nil {
		return err
	}
	if err := l.checkRange(weight.Sizes[0]); err != nil {
		return err
	}
	n := int64(len(l.ix))
	if out.Dim() != 1 || out.Sizes[0] != n {
		return fmt.Errorf("embedding_bag: per-sample weight gradient must be 1-D with %d elements", n)
	}
	res := make([]float32, n)
	gcs, wcs := bagColStride(grad), bagColStride(weight)
	bf16 := grad.DType == BFloat16
	ParallelFor(B, max(n/max(B, 1), 1)*D+D, func(lo, hi int64) {
		g := make([]float32, D)
		w := make([]float32, D)
		for b := lo; b < hi; b++ {
			if l.end[b] > l.start[b] {
				loadRowF32(g, bagRow(grad, b), gcs, grad.DType)
			}
			for j := l.start[b]; j < l.end[b]; j++ {
				k := l.ix[j]
				if k == paddingIdx {
					continue
				}
				loadRowF32(w, bagRow(weight, k), wcs, weight.DType)
				var s float32
				if bf16 {
					// As torch's CPU dot for bfloat16: products rounded, summed in float32.
					for d := range g {
						s += BF16ToF32(F32ToBF16(g[d] * w[d]))
					}
				} else {
					for d := range g {
						s += g[d] * w[d]
					}
				}
				res[j] = s
			}
		}
	})
	storeRowF32(out.Ptr, out.Strides[0]*int64(out.DType.Size()), out.DType, res)
	return nil
}

// EmbeddingBagSumValid is the bridge's embedding_bag_sum (hpex EmbeddingBag.forward and,
// over the coalesced rows, .backward): out[b] = the sum of table rows indices[j] for j in
// [offsets[b], offsets[b+1]), offsets holding one entry more than out has rows. Only the
// first validBags bags are computed (the rest of out is zeroed) and only the first
// validIdx positions of indices are read (the buffers are preallocated at a maximum size).
func EmbeddingBagSumValid(out, table, indices, offsets Tensor, validBags, validIdx int64) error {
	D := table.Sizes[len(table.Sizes)-1]
	if err := bagCheckRows("input", table, D); err != nil {
		return err
	}
	if err := bagCheckRows("output", out, D); err != nil {
		return err
	}
	ix, err := loadIndices(indices)
	if err != nil {
		return err
	}
	off, err := loadIndices(offsets)
	if err != nil {
		return err
	}
	B := out.Sizes[0]
	if int64(len(off)) < B+1 {
		return fmt.Errorf("embedding_bag_sum: %d output rows need %d offsets, got %d", B, B+1, len(off))
	}
	validIdx = min(max(validIdx, 0), int64(len(ix)))
	validBags = min(max(validBags, 0), B)
	V := table.Sizes[0]
	for b := int64(0); b < validBags; b++ {
		s, e := off[b], off[b+1]
		if s < 0 || e < s || e > validIdx {
			return fmt.Errorf("embedding_bag_sum: bag %d spans [%d, %d), outside the %d valid indices", b, s, e, validIdx)
		}
		for _, k := range ix[s:e] {
			if k < 0 || k >= V {
				return fmt.Errorf("embedding_bag_sum: index %d out of range for %d rows", k, V)
			}
		}
	}
	tcs, ocs := bagColStride(table), bagColStride(out)
	ParallelFor(B, max(validIdx/max(B, 1), 1)*D+D, func(lo, hi int64) {
		acc := make([]float32, D)
		row := make([]float32, D)
		for b := lo; b < hi; b++ {
			clear(acc)
			if b < validBags {
				for _, k := range ix[off[b]:off[b+1]] {
					loadRowF32(row, bagRow(table, k), tcs, table.DType)
					for d, v := range row {
						acc[d] += v
					}
				}
			}
			storeRowF32(bagRow(out, b), ocs, out.DType, acc)
		}
	})
	return nil
}

// LoadIndexValues reads a 0-D or 1-D int32/int64 tensor (a count operand, say).
func LoadIndexValues(t Tensor) ([]int64, error) { return loadIndices(t) }
