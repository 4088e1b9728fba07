package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// Fuzz targets for the shape and stride handling of the copy, reduction, pooling, gather
// and GEMM kernels: each builds views with random sizes (zero included), dimension orders,
// steps, storage offsets and expanded (0-stride) dims from the fuzzer's seed, runs the
// kernel and compares every element with a plain loop over the same view. A kernel may
// reject a view with an error, never panic or compute it wrong.

// fuzzView is a view over a fresh buffer of random values of dtype dt (Float32,
// BFloat16 or Int64): dims stored in the order perm (outermost first), each stepping by
// step[d] storage lines, after a storage offset; expand[d] makes dim d 0-stride.
func fuzzView(r *rand.Rand, dt DType, sizes []int64, perm []int, step []int64, off int64, expand []bool) Tensor {
	st := make([]int64, len(sizes))
	acc := int64(1)
	for i := len(perm) - 1; i >= 0; i-- {
		d := perm[i]
		if expand != nil && expand[d] {
			continue
		}
		st[d] = acc * step[d]
		acc *= max(sizes[d], 1) * step[d]
	}
	n := off + acc + 1
	es := int64(dt.Size())
	buf := make([]byte, n*es)
	for i := int64(0); i < n; i++ {
		p := unsafe.Pointer(&buf[i*es])
		switch dt {
		case Float32:
			*(*float32)(p) = float32(r.NormFloat64())
		case BFloat16:
			*(*uint16)(p) = F32ToBF16(float32(r.NormFloat64()))
		case Int64:
			*(*int64)(p) = int64(r.Intn(1000))
		}
	}
	return Tensor{Ptr: unsafe.Pointer(&buf[off*es]), DType: dt, Sizes: append([]int64(nil), sizes...), Strides: st}
}

// randomView draws a view of the given sizes: a random dim order, steps of 1 or 2, an
// offset, and (if mayExpand) some dims expanded.
func randomView(r *rand.Rand, dt DType, sizes []int64, mayExpand bool) Tensor {
	perm := r.Perm(len(sizes))
	step := make([]int64, len(sizes))
	expand := make([]bool, len(sizes))
	for d := range step {
		step[d] = int64(1 + r.Intn(2))
		expand[d] = mayExpand && r.Intn(4) == 0
	}
	return fuzzView(r, dt, sizes, perm, step, int64(r.Intn(5)), expand)
}

func randomSizes(r *rand.Rand, rank int, maxSize int) []int64 {
	s := make([]int64, rank)
	for d := range s {
		s[d] = int64(r.Intn(maxSize + 1))
		if r.Intn(6) != 0 && s[d] == 0 {
			s[d] = 1 // zero-size dims, but not most of the time
		}
	}
	return s
}

func fuzzElem(t Tensor, idx []int64) unsafe.Pointer {
	var off int64
	for d, i := range idx {
		off += i * t.Strides[d]
	}
	return unsafe.Add(t.Ptr, off*int64(t.DType.Size()))
}

func getF64(t Tensor, idx []int64) float64 {
	p := fuzzElem(t, idx)
	switch t.DType {
	case Float32:
		return float64(*(*float32)(p))
	case BFloat16:
		return float64(BF16ToF32(*(*uint16)(p)))
	case Int64:
		return float64(*(*int64)(p))
	}
	panic("getF64: dtype")
}

// eachIndex calls fn with every index of sizes, last dim fastest.
func eachIndex(sizes []int64, fn func(idx []int64)) {
	for _, s := range sizes {
		if s == 0 {
			return
		}
	}
	idx := make([]int64, len(sizes))
	for {
		fn(idx)
		d := len(sizes) - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < sizes[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

var fuzzDTypes = []DType{Float32, BFloat16}

// FuzzCopyStrided: Copy between arbitrary views (the destination never expanded), with a
// dtype conversion or not.
func FuzzCopyStrided(f *testing.F) {
	for _, s := range []int64{1, 2, 3, 42, 1001} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		sizes := randomSizes(r, 1+r.Intn(4), 5)
		sdt, ddt := fuzzDTypes[r.Intn(2)], fuzzDTypes[r.Intn(2)]
		src := randomView(r, sdt, sizes, true)
		dst := randomView(r, ddt, sizes, false)
		if err := Copy(dst, src); err != nil {
			t.Fatalf("copy %v %v -> %v %v: %v", src.Sizes, src.Strides, dst.Sizes, dst.Strides, err)
		}
		eachIndex(sizes, func(idx []int64) {
			want := getF64(src, idx)
			if ddt == BFloat16 {
				want = float64(BF16ToF32(F32ToBF16(float32(want))))
			}
			if got := getF64(dst, idx); got != want {
				t.Fatalf("copy %v strides %v -> %v at %v: %v, want %v", sizes, src.Strides, dst.Strides, idx, got, want)
			}
		})
	})
}

// FuzzSumStrided: Sum (and mean) over any subset of dims of an arbitrary view, into an
// output view with its own layout.
func FuzzSumStrided(f *testing.F) {
	for _, s := range []int64{1, 5, 77, 1234} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		rank := 1 + r.Intn(4)
		sizes := randomSizes(r, rank, 6)
		dt := fuzzDTypes[r.Intn(2)]
		in := randomView(r, dt, sizes, true)
		reduced := make([]bool, rank)
		osz := append([]int64(nil), sizes...)
		for d := range reduced {
			reduced[d] = r.Intn(2) == 0
			if reduced[d] {
				osz[d] = 1
			}
		}
		out := randomView(r, Float32, osz, false)
		mean := r.Intn(2) == 0
		if err := Sum(out, in, reduced, SumOpts{Mean: mean, Threads: 2}); err != nil {
			t.Fatalf("sum %v %v over %v: %v", sizes, in.Strides, reduced, err)
		}
		want := make(map[int64]float64)
		count := make(map[int64]int)
		key := func(idx []int64) int64 {
			var k int64
			for d, i := range idx {
				if !reduced[d] {
					k = k*7 + i
				} else {
					k *= 7
				}
			}
			return k
		}
		eachIndex(sizes, func(idx []int64) {
			want[key(idx)] += getF64(in, idx)
			count[key(idx)]++
		})
		eachIndex(osz, func(idx []int64) {
			w := want[key(idx)]
			if mean {
				w /= float64(count[key(idx)]) // 0/0 is NaN, as torch's mean of nothing
			}
			got := getF64(out, idx)
			if math.IsNaN(w) && math.IsNaN(got) {
				return
			}
			if math.Abs(got-w) > 1e-4*(1+math.Abs(w))*float64(1+count[key(idx)]) {
				t.Fatalf("sum %v %v over %v (mean %v) at %v: %v, want %v", sizes, in.Strides, reduced, mean, idx, got, w)
			}
		})
	})
}

// FuzzMaxPool2dLayout: max pooling of any geometry torch accepts, input and output in
// arbitrary layouts, against the window loop (first maximum wins).
func FuzzMaxPool2dLayout(f *testing.F) {
	for _, s := range []int64{1, 9, 31, 2024} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		p := PoolParams{KH: 1 + r.Intn(3), KW: 1 + r.Intn(3), StrideH: 1 + r.Intn(3), StrideW: 1 + r.Intn(3),
			DilH: 1 + r.Intn(2), DilW: 1 + r.Intn(2)}
		p.PadH, p.PadW = r.Intn(p.KH/2+1), r.Intn(p.KW/2+1)
		N, C, H, W := int64(r.Intn(3)), int64(1+r.Intn(3)), int64(1+r.Intn(7)), int64(1+r.Intn(7))
		OH := (H+2*int64(p.PadH)-int64(p.DilH*(p.KH-1))-1)/int64(p.StrideH) + 1
		OW := (W+2*int64(p.PadW)-int64(p.DilW*(p.KW-1))-1)/int64(p.StrideW) + 1
		if OH <= 0 || OW <= 0 {
			return // torch rejects it
		}
		dt := fuzzDTypes[r.Intn(2)]
		in := randomView(r, dt, []int64{N, C, H, W}, false)
		out := randomView(r, dt, []int64{N, C, OH, OW}, false)
		idx := randomView(r, Int64, []int64{N, C, OH, OW}, false)
		if err := MaxPool2d(out, idx, in, p); err != nil {
			t.Fatalf("maxpool %+v %v %v: %v", p, in.Sizes, in.Strides, err)
		}
		eachIndex(out.Sizes, func(o []int64) {
			best, bi := math.Inf(-1), int64(-1)
			for kh := 0; kh < p.KH; kh++ {
				for kw := 0; kw < p.KW; kw++ {
					h := o[2]*int64(p.StrideH) - int64(p.PadH) + int64(kh*p.DilH)
					w := o[3]*int64(p.StrideW) - int64(p.PadW) + int64(kw*p.DilW)
					if h < 0 || h >= H || w < 0 || w >= W {
						continue
					}
					if v := getF64(in, []int64{o[0], o[1], h, w}); v > best || bi < 0 {
						best, bi = v, h*W+w
					}
				}
			}
			if got, gi := getF64(out, o), getF64(idx, o); got != best || int64(gi) != bi {
				t.Fatalf("maxpool %+v %v strides %v at %v: %v@%v, want %v@%v", p, in.Sizes, in.Strides, o, got, gi, best, bi)
			}
		})
	})
}

// FuzzIndexSelectStrided: index_select along any dim of an arbitrary view, into an
// output of any layout, with repeated indices.
func FuzzIndexSelectStrided(f *testing.F) {
	for _, s := range []int64{1, 4, 99, 4321} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		rank := 1 + r.Intn(3)
		sizes := randomSizes(r, rank, 5)
		dim := r.Intn(rank)
		if sizes[dim] == 0 {
			sizes[dim] = 1
		}
		dt := fuzzDTypes[r.Intn(2)]
		self := randomView(r, dt, sizes, true)
		ni := r.Intn(6)
		ix := make([]int64, ni)
		for i := range ix {
			ix[i] = int64(r.Intn(int(sizes[dim])))
		}
		index := Tensor{Ptr: unsafe.Pointer(&append(ix, 0)[0]), DType: Int64, Sizes: []int64{int64(ni)}, Strides: []int64{1}}
		osz := append([]int64(nil), sizes...)
		osz[dim] = int64(ni)
		out := randomView(r, dt, osz, false)
		if err := IndexSelect(out, self, index, dim); err != nil {
			t.Fatalf("index_select %v %v dim %d: %v", sizes, self.Strides, dim, err)
		}
		eachIndex(osz, func(o []int64) {
			src := append([]int64(nil), o...)
			src[dim] = ix[o[dim]]
			if got, want := getF64(out, o), getF64(self, src); got != want {
				t.Fatalf("index_select %v %v dim %d at %v: %v, want %v", sizes, self.Strides, dim, o, got, want)
			}
		})
	})
}

// FuzzGemmStrides: BatchedGemm (with a bias or not) on operands of any layout, float32
// and bfloat16, against a float64 loop.
func FuzzGemmStrides(f *testing.F) {
	for _, s := range []int64{1, 3, 8, 64, 777} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		B, M, K, N := int64(1+r.Intn(3)), int64(r.Intn(20)), int64(r.Intn(70)), int64(r.Intn(140))
		dt := fuzzDTypes[r.Intn(2)]
		a := randomView(r, dt, []int64{B, M, K}, true)
		b := randomView(r, dt, []int64{B, K, N}, true)
		out := randomView(r, dt, []int64{B, M, N}, false)
		var self *Tensor
		alpha, beta := 1.0, 0.0
		if r.Intn(2) == 0 {
			s := randomView(r, dt, []int64{B, M, N}, true)
			self, alpha, beta = &s, float64(r.Intn(3))-0.5, 1.5
		}
		if err := BatchedGemm(out, a, b, self, alpha, beta); err != nil {
			t.Fatalf("gemm %v %v: %v", a.Sizes, b.Sizes, err)
		}
		eachIndex(out.Sizes, func(o []int64) {
			var sum, mag float64
			for k := int64(0); k < K; k++ {
				p := getF64(a, []int64{o[0], o[1], k}) * getF64(b, []int64{o[0], k, o[2]})
				sum, mag = sum+p, mag+math.Abs(p)
			}
			want, bound := alpha*sum, math.Abs(alpha)*mag*float64(K+2)*0x1p-23
			if self != nil {
				want += beta * getF64(*self, o)
				bound += math.Abs(beta*getF64(*self, o)) * 0x1p-22
			}
			if dt == BFloat16 {
				bound += math.Abs(want) * 0x1p-8
			}
			if got := getF64(out, o); math.Abs(got-want) > bound+1e-6 {
				t.Fatalf("gemm %s a %v/%v b %v/%v out %v at %v: %v, want %v", dt, a.Sizes, a.Strides, b.Sizes, b.Strides,
					out.Strides, o, got, want)
			}
		})
	})
}
