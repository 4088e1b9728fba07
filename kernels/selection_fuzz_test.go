package kernels

import (
	"math"
	"math/rand"
	"slices"
	"testing"
	"unsafe"
)

// Fuzz targets for the layout handling of the selection and counting kernels
// (selection.go, counting.go): random [M, N] views (transposed, stepped, offset, expanded,
// zero-size) against plain reference loops; a kernel may reject a view with an error,
// never panic or compute it wrong. Tie and NaN rules are checked against torch's CPU
// kernels by tests/test_ops_selection.py.

func newOut(dt DType, sizes ...int64) Tensor {
	n := int64(1)
	for _, s := range sizes {
		n *= s
	}
	buf := make([]byte, max(n, 1)*int64(dt.Size()))
	st := make([]int64, len(sizes))
	acc := int64(1)
	for i := len(sizes) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= max(sizes[i], 1)
	}
	return Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: dt, Sizes: sizes, Strides: st}
}

func rowValues(t Tensor, r int64) []float64 {
	v := make([]float64, t.Sizes[1])
	for j := range v {
		v[j] = getF64(t, []int64{r, int64(j)})
	}
	return v
}

// FuzzLineSelectStrided: median, nanmedian, kthvalue and mode of every row of a random
// view pick an element of the row whose rank (or count) is the right one.
func FuzzLineSelectStrided(f *testing.F) {
	for _, s := range []int64{1, 2, 3, 42, 1001} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		sizes := randomSizes(r, 2, 9)
		dt := []DType{Float32, BFloat16, Int64}[r.Intn(3)]
		in := randomView(r, dt, sizes, true)
		M, N := sizes[0], sizes[1]
		kind := r.Intn(selKinds)
		k := int64(1)
		if N > 0 {
			k = 1 + r.Int63n(N)
		}
		vals, idx := newOut(dt, M), newOut(Int64, M)
		err := LineSelect(kind, k, vals, idx, in)
		if N == 0 && M > 0 {
			if err == nil {
				t.Fatalf("empty rows accepted")
			}
			return
		}
		if err != nil {
			t.Fatalf("kind %d %v %v: %v", kind, in.Sizes, in.Strides, err)
		}
		for row := int64(0); row < M; row++ {
			line := rowValues(in, row)
			pos := *(*int64)(fuzzElem(idx, []int64{row}))
			if pos < 0 || pos >= N || line[pos] != getF64(vals, []int64{row}) {
				t.Fatalf("kind %d row %d: index %d value %v of %v", kind, row, pos, getF64(vals, []int64{row}), line)
			}
			sorted := slices.Clone(line)
			slices.Sort(sorted)
			switch kind {
			case SelMedian, SelNanMedian:
				if line[pos] != sorted[(N-1)/2] {
					t.Fatalf("median of %v: %v", line, line[pos])
				}
			case SelKth:
				if line[pos] != sorted[k-1] {
					t.Fatalf("kth %d of %v: %v", k, line, line[pos])
				}
			default:
				cnt := func(v float64) (c int) {
					for _, x := range line {
						if x == v {
							c++
						}
					}
					return
				}
				for _, x := range line {
					if c, best := cnt(x), cnt(line[pos]); c > best || (c == best && x < line[pos]) {
						t.Fatalf("mode of %v: %v (count %d), %v has %d", line, line[pos], best, x, c)
					}
				}
			}
		}
	})
}

// FuzzSearchSortedStrided: insertion points in sorted rows of random views equal a linear
// count of the smaller (or not larger) elements.
func FuzzSearchSortedStrided(f *testing.F) {
	for _, s := range []int64{1, 2, 3, 42, 1001} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		M, N, K := int64(r.Intn(4)), int64(r.Intn(8)), int64(r.Intn(6))
		dt := []DType{Float32, Int64}[r.Intn(2)]
		seq := randomView(r, dt, []int64{M, N}, true)
		// sort each row of seq in place (an expanded row is constant along it)
		for row := int64(0); row < M; row++ {
			line := rowValues(seq, row)
			slices.Sort(line)
			for j, v := range line {
				p := fuzzElem(seq, []int64{row, int64(j)})
				if dt == Float32 {
					*(*float32)(p) = float32(v)
				} else {
					*(*int64)(p) = int64(v)
				}
			}
		}
		vals := randomView(r, dt, []int64{M, K}, true)
		out := newOut(Int64, M, K)
		right := r.Intn(2) == 1
		if err := SearchSorted(out, seq, vals, nil, right); err != nil {
			t.Fatalf("%v %v / %v %v: %v", seq.Sizes, seq.Strides, vals.Sizes, vals.Strides, err)
		}
		eachIndex([]int64{M, K}, func(ix []int64) {
			v := getF64(vals, ix)
			want := int64(0)
			for _, x := range rowValues(seq, ix[0]) {
				if x < v || (right && x == v) {
					want++
				}
			}
			if got := *(*int64)(fuzzElem(out, ix)); got != want {
				t.Fatalf("searchsorted(right=%v) %v in %v: %d, want %d", right, v, rowValues(seq, ix[0]), got, want)
			}
		})
	})
}

// FuzzUniqueHistStrided: unique of a random 1-D view reproduces the input through its
// inverse and counts; a histogram of it counts every in-range element once.
func FuzzUniqueHistStrided(f *testing.F) {
	for _, s := range []int64{1, 2, 3, 42, 1001} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		n := int64(r.Intn(40))
		in := randomView(r, Int64, []int64{n}, true)
		for _, consecutive := range []bool{false, true} {
			vals, inv, cnt, count := newOut(Int64, n), newOut(Int64, n), newOut(Int64, n), newOut(Int64, 1)
			if err := Unique(vals, inv, cnt, count, in, consecutive); err != nil {
				t.Fatal(err)
			}
			k := *(*int64)(count.Ptr)
			total := int64(0)
			for s := int64(0); s < k; s++ {
				total += *(*int64)(fuzzElem(cnt, []int64{s}))
				if !consecutive && s > 0 && getF64(vals, []int64{s - 1}) >= getF64(vals, []int64{s}) {
					t.Fatalf("unique values not increasing")
				}
			}
			if total != n {
				t.Fatalf("counts sum to %d, want %d", total, n)
			}
			for i := int64(0); i < n; i++ {
				s := *(*int64)(fuzzElem(inv, []int64{i}))
				if s < 0 || s >= k || getF64(vals, []int64{s}) != getF64(in, []int64{i}) {
					t.Fatalf("inverse %d of element %d", s, i)
				}
			}
		}
		x := randomView(r, Float32, []int64{n, 1}, true)
		bins := int64(1 + r.Intn(6))
		edges := newOut(Float32, bins+1)
		if err := LinspaceCPU(edges, -1, 1, 16); err != nil {
			t.Fatal(err)
		}
		hist := newOut(Float32, bins)
		if err := Histogramdd(hist, x, nil, []Tensor{edges}, r.Intn(histAlgorithms), 2); err != nil {
			t.Fatal(err)
		}
		want, got := 0.0, 0.0
		for i := int64(0); i < n; i++ {
			if v := getF64(x, []int64{i, 0}); v >= -1 && v <= 1 {
				want++
			}
		}
		for b := int64(0); b < bins; b++ {
			got += getF64(hist, []int64{b})
		}
		if got != want {
			t.Fatalf("histogram of %d in-range elements holds %v", int(want), got)
		}
	})
}

func TestLinspaceCPUEnds(t *testing.T) {
	lin := newOut(Float32, 100)
	if err := LinspaceCPU(lin, -2.5, 7, 16); err != nil {
		t.Fatal(err)
	}
	if getF64(lin, []int64{0}) != -2.5 || getF64(lin, []int64{99}) != 7 {
		t.Fatalf("linspace ends %v %v", getF64(lin, []int64{0}), getF64(lin, []int64{99}))
	}
	for i := int64(1); i < 100; i++ {
		if d := getF64(lin, []int64{i}) - getF64(lin, []int64{i - 1}); math.Abs(d-9.5/99) > 1e-5 {
			t.Fatalf("linspace step %d: %v", i, d)
		}
	}
}

func TestCountingRejectsBadInput(t *testing.T) {
	bc := newOut(Int64, 2)
	in := newOut(Int64, 1)
	*(*int64)(in.Ptr) = 5
	if err := Bincount(bc, in, nil); err == nil {
		t.Fatal("bincount wrote past its bins")
	}
	probs := newOut(Float32, 1, 2)
	*(*float32)(probs.Ptr) = float32(math.NaN())
	if err := Multinomial(newOut(Int64, 1, 1), probs, Stream{Seed: 1}, true); err == nil {
		t.Fatal("NaN probability accepted")
	}
}
