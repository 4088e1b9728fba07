package kernels

import "math/bits"

// Deterministic re-implementations of the GNU libstdc++ algorithms that torch's CPU sort
// (std::sort) and topk (std::partial_sort, std::nth_element followed by std::sort) use.
// These algorithms are unstable, so the order in which they leave equal elements is a
// property of the exact sequence of comparisons and moves; to give tied elements the
// same indices as CPU, every step below follows libstdc++'s behaviour: the introsort
// depth limit of 2*floor(log2 n), the 16-element threshold below which partitioning
// stops, the median-of-three of (first+1, middle, last-1) swapped into first, the
// unguarded Hoare partition, the final insertion sort (guarded over the first 16
// elements, unguarded after), the binary heap used for partial_sort / heap-sort
// fallback (sift down to a leaf, then sift up) and introselect for nth_element.
// less must be a strict weak ordering.

const stdSortThreshold = 16

// stdLg is floor(log2(n)) for n > 0.
func stdLg(n int) int { return bits.Len(uint(n)) - 1 }

// stdSort sorts s as std::sort(s.begin(), s.end(), less) does.
func stdSort[E any](s []E, less func(a, b *E) bool) {
	if len(s) < 2 {
		return
	}
	stdIntrosort(s, 0, len(s), 2*stdLg(len(s)), less)
	if len(s) > stdSortThreshold {
		stdInsertionSort(s, 0, stdSortThreshold, less)
		for i := stdSortThreshold; i < len(s); i++ {
			stdLinearInsert(s, i, less)
		}
	} else {
		stdInsertionSort(s, 0, len(s), less)
	}
}

// stdIntrosort partitions [first, last) until every unsorted run is at most
// stdSortThreshold long (finished by the caller's insertion sort), heap-sorting a run
// once depth partitions have not got it below the threshold.
func stdIntrosort[E any](s []E, first, last, depth int, less func(a, b *E) bool) {
	for last-first > stdSortThreshold {
		if depth == 0 {
			r := s[first:last]
			stdHeapSelect(r, len(r), less)
			stdSortHeap(r, len(r), less)
			return
		}
		depth--
		cut := stdPartitionPivot(s, first, last, less)
		stdIntrosort(s, cut, last, depth, less)
		last = cut
	}
}

// stdPartitionPivot moves the median of s[first+1], s[mid], s[last-1] to s[first] and
// partitions (first, last) around it; it returns the start of the right part.
func stdPartitionPivot[E any](s []E, first, last int, less func(a, b *E) bool) int {
	mid := first + (last-first)/2
	a, b, c := first+1, mid, last-1
	var m int
	if less(&s[a], &s[b]) {
		switch {
		case less(&s[b], &s[c]):
			m = b
		case less(&s[a], &s[c]):
			m = c
		default:
			m = a
		}
	} else {
		switch {
		case less(&s[a], &s[c]):
			m = a
		case less(&s[b], &s[c]):
			m = c
		default:
			m = b
		}
	}
	s[first], s[m] = s[m], s[first]
	// Unguarded Hoare partition of [first+1, last) around the pivot at first.
	lo, hi := first+1, last
	p := &s[first]
	for {
		for less(&s[lo], p) {
			lo++
		}
		hi--
		for less(p, &s[hi]) {
			hi--
		}
		if lo >= hi {
			return lo
		}
		s[lo], s[hi] = s[hi], s[lo]
		lo++
	}
}

// stdInsertionSort is the guarded insertion sort of [first, last): an element smaller
// than s[first] is moved to the front directly, any other one shifted in from the right.
func stdInsertionSort[E any](s []E, first, last int, less func(a, b *E) bool) {
	if first == last {
		return
	}
	for i := first + 1; i < last; i++ {
		if less(&s[i], &s[first]) {
			v := s[i]
			copy(s[first+1:i+1], s[first:i])
			s[first] = v
		} else {
			stdLinearInsert(s, i, less)
		}
	}
}

// stdLinearInsert shifts s[i] left past every greater element (unguarded: some element
// before it is not greater).
func stdLinearInsert[E any](s []E, i int, less func(a, b *E) bool) {
	v := s[i]
	j := i - 1
	for less(&v, &s[j]) {
		s[i] = s[j]
		i = j
		j--
	}
	s[i] = v
}

// stdAdjustHeap fills the hole at hole of the max-heap h[:n] by moving the larger child
// up until a leaf is reached, then sifts v up from there (no further than top = hole).
func stdAdjustHeap[E any](h []E, hole, n int, v E, less func(a, b *E) bool) {
	top := hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if less(&h[child], &h[child-1]) {
			child--
		}
		h[hole] = h[child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		h[hole] = h[child-1]
		hole = child - 1
	}
	parent := (hole - 1) / 2
	for hole > top && less(&h[parent], &v) {
		h[hole] = h[parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	h[hole] = v
}

// stdMakeHeap turns h[:n] into a max-heap, adjusting parents from the last one down.
func stdMakeHeap[E any](h []E, n int, less func(a, b *E) bool) {
	if n < 2 {
		return
	}
	for parent := (n - 2) / 2; ; parent-- {
		stdAdjustHeap(h, parent, n, h[parent], less)
		if parent == 0 {
			return
		}
	}
}

// stdPopHeap moves the heap top of h[:n] to h[result] and re-inserts the element that
// was at h[result] into the heap.
func stdPopHeap[E any](h []E, n, result int, less func(a, b *E) bool) {
	v := h[result]
	h[result] = h[0]
	stdAdjustHeap(h, 0, n, v, less)
}

// stdHeapSelect leaves the middle smallest elements of s, as a max-heap, in s[:middle].
func stdHeapSelect[E any](s []E, middle int, less func(a, b *E) bool) {
	stdMakeHeap(s, middle, less)
	for i := middle; i < len(s); i++ {
		if less(&s[i], &s[0]) {
			stdPopHeap(s, middle, i, less)
		}
	}
}

// stdSortHeap sorts the max-heap h[:n] ascending.
func stdSortHeap[E any](h []E, n int, less func(a, b *E) bool) {
	for ; n > 1; n-- {
		stdPopHeap(h, n-1, n-1, less)
	}
}

// stdPartialSort is std::partial_sort(s, s+middle, s+len(s), less).
func stdPartialSort[E any](s []E, middle int, less func(a, b *E) bool) {
	stdHeapSelect(s, middle, less)
	stdSortHeap(s, middle, less)
}

// stdNthElement is std::nth_element(s, s+nth, s+len(s), less) (introselect).
func stdNthElement[E any](s []E, nth int, less func(a, b *E) bool) {
	first, last := 0, len(s)
	if first == last || nth == last {
		return
	}
	depth := 2 * stdLg(last-first)
	for last-first > 3 {
		if depth == 0 {
			stdHeapSelect(s[first:last], nth+1-first, less)
			s[first], s[nth] = s[nth], s[first]
			return
		}
		depth--
		cut := stdPartitionPivot(s, first, last, less)
		if cut <= nth {
			first = cut
		} else {
			last = cut
		}
	}
	stdInsertionSort(s, first, last, less)
}
