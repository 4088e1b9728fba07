package kernels

import (
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// Counting and sampling kernels (python/.../_ops/selection_ops.py): unique and
// unique_consecutive, histogramdd (histc, histogram), bincount and multinomial, with the
// rules of torch's CPU kernels.

// Unique writes the distinct elements of in (1-D, any stride) to vals[:n], each element's
// slot to inverse (1-D, in's length) and the run lengths to counts[:n], and n to
// count[0] (a host int64 scalar the caller reads to size the result). sorted: ascending
// with NaN last (std::sort order of the CPU kernel; NaNs are never equal, so each is its
// own slot); consecutive: runs of equal neighbours in input order (unique_consecutive).
func Unique(vals, inverse, counts, count, in Tensor, consecutive bool) error {
	if in.Dim() != 1 || vals.Dim() != 1 || inverse.Dim() != 1 || counts.Dim() != 1 || count.Numel() != 1 {
		return fmt.Errorf("expected 1-D vals, inverse, counts, in and a one-element count, got %v %v %v %v %v",
			vals.Sizes, inverse.Sizes, counts.Sizes, in.Sizes, count.Sizes)
	}
	n := in.Sizes[0]
	if vals.DType != in.DType || inverse.DType != Int64 || counts.DType != Int64 || count.DType != Int64 {
		return fmt.Errorf("dtypes: vals %v (in %v), inverse %v, counts %v, count %v (want int64)",
			vals.DType, in.DType, inverse.DType, counts.DType, count.DType)
	}
	if vals.Sizes[0] < n || inverse.Sizes[0] != n || counts.Sizes[0] < n {
		return fmt.Errorf("vals %v and counts %v need room for %d elements, inverse %v exactly", vals.Sizes, counts.Sizes, n, inverse.Sizes)
	}
	es := int64(in.DType.Size())
	src := func(i int64) unsafe.Pointer { return at(in.Ptr, i*in.Strides[0]*es) }
	// CPU sorts the flattened input with sort(stable=false), libstdc++'s std::sort with NaN
	// last: the order NaNs take decides their inverse indices.
	order := make([]int64, n)
	var same func(a, b int64) bool
	if in.DType.IsFloat() {
		keys := make([]ixKeyed[float64], n)
		for i := range keys {
			keys[i] = ixKeyed[float64]{ixGetF(src(int64(i)), in.DType), int64(i)}
		}
		if !consecutive {
			stdSort(keys, ixLessF(false))
		}
		for k := range keys {
			order[k] = keys[k].i
		}
		vals := make([]float64, n)
		for _, kv := range keys {
			vals[kv.i] = kv.k
		}
		same = func(a, b int64) bool { return vals[a] == vals[b] }
	} else {
		keys := make([]ixKeyed[int64], n)
		for i := range keys {
			keys[i] = ixKeyed[int64]{ixGetI(src(int64(i)), in.DType), int64(i)}
		}
		if !consecutive {
			stdSort(keys, ixLessI(false))
		}
		for k := range keys {
			order[k] = keys[k].i
		}
		vals := make([]int64, n)
		for _, kv := range keys {
			vals[kv.i] = kv.k
		}
		same = func(a, b int64) bool { return vals[a] == vals[b] }
	}
	slot := int64(-1)
	for k, i := range order {
		if k == 0 || !same(order[k-1], i) {
			slot++
			ixCopyElem(at(vals.Ptr, slot*vals.Strides[0]*es), src(i), int(es))
			*(*int64)(at(counts.Ptr, slot*counts.Strides[0]*8)) = 0
		}
		*(*int64)(at(inverse.Ptr, i*inverse.Strides[0]*8)) = slot
		*(*int64)(at(counts.Ptr, slot*counts.Strides[0]*8))++
	}
	*(*int64)(count.Ptr) = slot + 1
	return nil
}

// Histogram algorithms (aten/src/ATen/native/cpu/HistogramKernel.cpp).
const (
	HistBinarySearch     = iota // bin edges of any spacing: upper_bound on the edges
	HistLinear                  // evenly spaced edges: the division alone (histc)
	HistLinearLocalCheck        // the division, then upper_bound over the neighbouring edges
	histAlgorithms
)

// histArith rounds one arithmetic step as torch's input_t does: float32 in float,
// bfloat16/half in float then back to the 16-bit type.
func histArith(dt DType) func(float64) float64 {
	switch dt {
	case Float32:
		return func(v float64) float64 { return float64(float32(v)) }
	case BFloat16:
		return func(v float64) float64 { return float64(BF16ToF32(F32ToBF16(float32(v)))) }
	case Float16:
		return func(v float64) float64 { return float64(F16ToF32(F32ToF16(float32(v)))) }
	}
	return func(v float64) float64 { return v }
}

// Histogramdd writes to hist (D-dim) the count (or total weight) of the rows of in [N, D]
// in each bin, the bin along dim d given by edges[d] (1-D, increasing, in's dtype); rows
// with an element outside the edges or NaN are skipped, and the last bin includes its right
// edge. The rows are split into the chunks torch's CPU kernel gives its threads (threads =
// at::get_num_threads()), each chunk's sums round in hist's dtype, and the chunks are
// added in float at the end, as CPU's thread-local histograms are.
func Histogramdd(hist, in Tensor, weight *Tensor, edges []Tensor, algorithm int, threads int64) error {
	if algorithm < 0 || algorithm >= histAlgorithms {
		return fmt.Errorf("unknown histogram algorithm %d", algorithm)
	}
	if in.Dim() != 2 || int64(len(edges)) != in.Sizes[1] || hist.Dim() != len(edges) || len(edges) == 0 {
		return fmt.Errorf("expected in [N, D], D > 0 edge tensors and a D-dim hist, got in %v, %d edges, hist %v",
			in.Sizes, len(edges), hist.Sizes)
	}
	dt := in.DType
	if !dt.IsFloat() || hist.DType != dt {
		return fmt.Errorf("histogram needs a floating input and a hist of its dtype, got %v, %v", dt, hist.DType)
	}
	N := in.Sizes[0]
	if weight != nil && (weight.Dim() != 1 || weight.Sizes[0] != N || weight.DType != dt) {
		return fmt.Errorf("weight must be [%d] of dtype %v, got %v %v", N, dt, weight.Sizes, weight.DType)
	}
	D := len(edges)
	seqs := make([][]float64, D)
	for d, e := range edges {
		if e.Dim() != 1 || e.DType != dt || e.Sizes[0] != hist.Sizes[d]+1 || e.Sizes[0] < 2 {
			return fmt.Errorf("edges %d must be 1-D of %d %v elements, got %v %v", d, hist.Sizes[d]+1, dt, e.Sizes, e.DType)
		}
		s := make([]float64, e.Sizes[0])
		for j := range s {
			s[j] = ixGetF(at(e.Ptr, int64(j)*e.Strides[0]*int64(dt.Size())), dt)
		}
		seqs[d] = s
	}
	bins := hist.Numel()
	es := int64(dt.Size())
	rnd := histArith(dt)
	// at::parallel_for(0, N, max(1, 200/D)) under OpenMP: min(threads, ceil(N/grain))
	// chunks of ceil(N/chunks) rows.
	grain := max(1, 200/int64(D))
	chunks := max(1, min(threads, (N+grain-1)/grain))
	size := max(1, (N+chunks-1)/chunks)
	total := make([]float64, bins)
	part := make([]float64, bins)
	for lo := int64(0); lo < N; lo += size {
		clear(part)
		for i := lo; i < min(lo+size, N); i++ {
			lin, ok := histBin(in, i, seqs, algorithm, rnd, es)
			if !ok {
				continue
			}
			w := 1.0
			if weight != nil {
				w = ixGetF(at(weight.Ptr, i*weight.Strides[0]*es), dt)
			}
			part[lin] = rnd(part[lin] + w)
		}
		for b := range total {
			total[b] += part[b]
		}
	}
	idx := make([]int64, D)
	for b := int64(0); b < bins; b++ {
		off := int64(0)
		for d := 0; d < D; d++ {
			off += idx[d] * hist.Strides[d]
		}
		ixSetF(at(hist.Ptr, off*es), dt, total[b])
		for d := D - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < hist.Sizes[d] {
				break
			}
			idx[d] = 0
		}
	}
	return nil
}

// histBin returns the row-major bin of row i of in, or false when the row is skipped.
func histBin(in Tensor, i int64, seqs [][]float64, algorithm int, rnd func(float64) float64, es int64) (int64, bool) {
	lin := int64(0)
	for d, s := range seqs {
		nbe := int64(len(s))
		left, right := s[0], s[nbe-1]
		elt := ixGetF(at(in.Ptr, (i*in.Strides[0]+int64(d)*in.Strides[1])*es), in.DType)
		if !(elt >= left && elt <= right) {
			return 0, false
		}
		var pos int64
		if algorithm == HistBinarySearch {
			pos = histUpperBound(s, 0, nbe, elt) - 1
		} else {
			// (elt - left) * (nbe - 1) / (right - left), each step rounded in input_t
			pos = int64(rnd(rnd(rnd(elt-left)*rnd(float64(nbe-1))) / rnd(right-left)))
			if algorithm == HistLinearLocalCheck {
				lo, hi := max(0, pos-1), min(pos+2, nbe)
				pos = histUpperBound(s, lo, hi, elt) - 1
			}
		}
		if pos == nbe-1 {
			pos--
		}
		if pos < 0 || pos >= nbe-1 { // a rounded division out of range: never index outside hist
			return 0, false
		}
		lin = lin*(nbe-1) + pos
	}
	return lin, true
}

// histUpperBound is std::upper_bound over s[lo:hi]: the first position whose edge is > v.
func histUpperBound(s []float64, lo, hi int64, v float64) int64 {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if !(v < s[mid]) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Bincount adds 1 (or weights[i]) to out[in[i]] for the non-negative integers of in (1-D);
// out (int64 without weights, else the weights' float dtype) is zeroed by the caller and
// sized past the largest element. Sums run in input order, as CPU's do.
func Bincount(out, in Tensor, weights *Tensor) error {
	if in.Dim() != 1 || out.Dim() != 1 || in.DType.IsFloat() {
		return fmt.Errorf("bincount only supports 1-d non-negative integral inputs.")
	}
	n := in.Sizes[0]
	if weights != nil && (weights.Dim() != 1 || weights.Sizes[0] != n) {
		return fmt.Errorf("weights should be 1-d and have the same length as input")
	}
	if weights == nil && out.DType != Int64 {
		return fmt.Errorf("unweighted bincount counts in int64, got %v", out.DType)
	}
	es := int64(in.DType.Size())
	var rnd func(float64) float64
	if weights != nil {
		rnd = histArith(out.DType)
	}
	L := out.Sizes[0]
	oes := int64(out.DType.Size())
	for i := int64(0); i < n; i++ {
		v := ixGetI(at(in.Ptr, i*in.Strides[0]*es), in.DType)
		if v < 0 {
			return fmt.Errorf("bincount only supports 1-d non-negative integral inputs.")
		}
		if v >= L {
			return fmt.Errorf("bincount: element %d past the %d bins", v, L)
		}
		p := at(out.Ptr, v*out.Strides[0]*oes)
		if weights == nil {
			*(*int64)(p)++
			continue
		}
		w := ixGetF(at(weights.Ptr, i*weights.Strides[0]*int64(weights.DType.Size())), weights.DType)
		ixSetF(p, out.DType, rnd(ixGetF(p, out.DType)+w))
	}
	return nil
}

// Multinomial draws out [M, S] category indices from the rows of probs [M, C] (unnormalised
// non-negative weights). With replacement each draw inverts the row's cumulative sum at a
// uniform variate; without, the S largest of p/q with q ~ Exp(1) (the Gumbel-max trick
// torch's CPU kernel uses). Draws depend only on (seed, offset, row, position).
func Multinomial(out, probs Tensor, s Stream, replacement bool) error {
	if probs.Dim() != 2 || out.Dim() != 2 || out.Sizes[0] != probs.Sizes[0] || out.DType != Int64 || !probs.DType.IsFloat() {
		return fmt.Errorf("expected int64 out [M, S] and floating probs [M, C], got %v %v, %v %v",
			out.DType, out.Sizes, probs.DType, probs.Sizes)
	}
	M, C, S := probs.Sizes[0], probs.Sizes[1], out.Sizes[1]
	if !replacement && S > C {
		return fmt.Errorf("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
	}
	es := int64(probs.DType.Size())
	// CPU's value checks, with its messages (they differ between the two modes).
	negMsg, infMsg := "invalid multinomial distribution (encountering probability entry < 0)",
		"invalid multinomial distribution (encountering probability entry = infinity or NaN)"
	if !replacement {
		negMsg = "probability tensor contains either `inf`, `nan` or element < 0"
		infMsg = negMsg
	}
	p := make([]float64, M*C)
	for r := int64(0); r < M; r++ {
		sum := 0.0
		for c := int64(0); c < C; c++ {
			v := ixGetF(at(probs.Ptr, (r*probs.Strides[0]+c*probs.Strides[1])*es), probs.DType)
			if !(v >= 0) { // NaN fails this check first, as on CPU
				return fmt.Errorf("%s", negMsg)
			}
			if math.IsInf(v, 0) || math.IsNaN(v) {
				return fmt.Errorf("%s", infMsg)
			}
			p[r*C+c] = v
			sum += v
		}
		if !(sum > 0) {
			return fmt.Errorf("invalid multinomial distribution (sum of probabilities <= 0)")
		}
	}
	unit := func(e int64) float64 { // uniform on [0, 1) from element e's two words
		w := s.Block(uint64(e / 2))
		return float64(rndW64(&w, e%2)>>11) * 0x1p-53
	}
	put := func(r, j, c int64) { *(*int64)(at(out.Ptr, (r*out.Strides[0]+j*out.Strides[1])*8)) = c }
	ParallelFor(M, C+S*int64(max(1, ixBitsLen(C))), func(lo, hi int64) {
		cdf := make([]float64, C)
		keys := make([]selPair[float64], C)
		for r := lo; r < hi; r++ {
			row := p[r*C : (r+1)*C]
			if replacement {
				acc := 0.0
				for c, v := range row {
					acc += v
					cdf[c] = acc
				}
				for j := int64(0); j < S; j++ {
					u := unit(r*S+j) * acc
					c := min(histUpperBound(cdf, 0, C, u), C-1) // u rounded up to the total: the last
					for c > 0 && row[c] == 0 {                  // never a zero-weight category
						c--
					}
					put(r, j, c)
				}
				continue
			}
			for c, v := range row {
				q := -math.Log(1 - unit(r*C+int64(c))) // Exp(1); 1-u is in (0, 1]
				k := -1.0                              // zero weights rank last
				if v > 0 {
					k = v / q
				}
				keys[c] = selPair[float64]{k, int64(c)}
			}
			slices.SortStableFunc(keys, func(a, b selPair[float64]) int {
				switch {
				case a.v > b.v:
					return -1
				case a.v < b.v:
					return 1
				}
				return 0
			})
			for j := int64(0); j < S; j++ {
				put(r, j, keys[j].i)
			}
		}
	})
	return nil
}
