package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// Fuzz targets for the stride handling of the grid sampler, the segment reductions and the
// integer convolution: each kernel runs on random views (permuted dims, steps, offsets,
// expanded dims, zero sizes) and on dense copies of the same values, and the two results
// must be bit-identical (these kernels read element by element, so the layout may not change
// the arithmetic). A kernel may reject a view with an error, never panic.

// denseCopy copies the view t into a fresh contiguous tensor of the same dtype.
func denseCopy(t Tensor) Tensor {
	n := int64(1)
	for _, s := range t.Sizes {
		n *= s
	}
	es := int64(t.DType.Size())
	buf := make([]byte, max(n, 1)*es)
	st := make([]int64, len(t.Sizes))
	acc := int64(1)
	for d := len(t.Sizes) - 1; d >= 0; d-- {
		st[d] = acc
		acc *= max(t.Sizes[d], 1)
	}
	d := Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: t.DType, Sizes: append([]int64(nil), t.Sizes...), Strides: st}
	eachIndex(t.Sizes, func(idx []int64) {
		ixCopyElem(fuzzElem(d, idx), fuzzElem(t, idx), int(es))
	})
	return d
}

// zeroDense is a zero-filled contiguous tensor.
func zeroDense(dt DType, sizes []int64) Tensor {
	z := fuzzView(rand.New(rand.NewSource(0)), dt, sizes, seqPerm(len(sizes)), onesSteps(len(sizes)), 0, nil)
	eachIndex(sizes, func(idx []int64) { ixSetF(fuzzElem(z, idx), dt, 0) })
	return z
}

func seqPerm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

func onesSteps(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func sameBits(t *testing.T, what string, a, b Tensor) {
	t.Helper()
	eachIndex(a.Sizes, func(idx []int64) {
		x, y := ixGetF(fuzzElem(a, idx), a.DType), ixGetF(fuzzElem(b, idx), b.DType)
		if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			t.Fatalf("%s at %v: strided %v, dense %v", what, idx, x, y)
		}
	})
}

func FuzzGridSample2dStrides(f *testing.F) {
	for _, s := range []int64{1, 2, 3, 17, 99} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		n, c := int64(r.Intn(3)), int64(r.Intn(3)+1)
		h, w, oh, ow := int64(r.Intn(4)+1), int64(r.Intn(4)+1), int64(r.Intn(4)), int64(r.Intn(4))
		dt := fuzzDTypes[r.Intn(2)]
		mode, pad, align := r.Intn(3), r.Intn(3), r.Intn(2) == 1
		in := randomView(r, dt, []int64{n, c, h, w}, true)
		grid := randomView(r, dt, []int64{n, oh, ow, 2}, true)
		out := zeroDense(dt, []int64{n, c, oh, ow})
		if err := GridSample2d(out, in, grid, mode, pad, align); err != nil {
			t.Fatalf("grid_sampler_2d %v %v: %v", in.Strides, grid.Strides, err)
		}
		ref := zeroDense(dt, out.Sizes)
		if err := GridSample2d(ref, denseCopy(in), denseCopy(grid), mode, pad, align); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "grid_sampler_2d", out, ref)
		gout := randomView(r, dt, out.Sizes, true)
		gin, ggrid := zeroDense(dt, in.Sizes), zeroDense(dt, grid.Sizes)
		if err := GridSample2dBackward(&gin, &ggrid, gout, in, grid, mode, pad, align); err != nil {
			t.Fatal(err)
		}
		rgin, rggrid := zeroDense(dt, in.Sizes), zeroDense(dt, grid.Sizes)
		if err := GridSample2dBackward(&rgin, &rggrid, denseCopy(gout), denseCopy(in), denseCopy(grid), mode, pad, align); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "grad_input", gin, rgin)
		sameBits(t, "grad_grid", ggrid, rggrid)
	})
}

func FuzzSegmentReduceStrides(f *testing.F) {
	for _, s := range []int64{1, 2, 3, 17, 99} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		outer, L, inner, S := int64(r.Intn(3)), int64(r.Intn(6)), int64(r.Intn(3)), int64(r.Intn(4))
		dt := fuzzDTypes[r.Intn(2)]
		reduce := r.Intn(5)
		offs := zeroDense(Int64, []int64{outer, S + 1})
		for o := int64(0); o < outer; o++ {
			v := int64(0)
			for i := int64(0); i <= S; i++ {
				*(*int64)(fuzzElem(offs, []int64{o, i})) = v
				v = min(L, v+int64(r.Intn(3)))
			}
		}
		data := randomView(r, dt, []int64{outer, L, inner}, true)
		out := zeroDense(dt, []int64{outer, S, inner})
		hasInit, init := r.Intn(2) == 1, r.NormFloat64()
		if err := SegmentReduce(out, data, offs, reduce, hasInit, init); err != nil {
			t.Fatalf("segment_reduce %v: %v", data.Strides, err)
		}
		ref := zeroDense(dt, out.Sizes)
		if err := SegmentReduce(ref, denseCopy(data), offs, reduce, hasInit, init); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "segment_reduce", out, ref)
		grad := randomView(r, dt, out.Sizes, true)
		gin, rgin := zeroDense(dt, data.Sizes), zeroDense(dt, data.Sizes)
		if err := SegmentReduceBackward(gin, grad, out, data, offs, reduce, hasInit, init); err != nil {
			t.Fatal(err)
		}
		if err := SegmentReduceBackward(rgin, denseCopy(grad), ref, denseCopy(data), offs, reduce, hasInit, init); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "segment_reduce backward", gin, rgin)
		// offsets past the data or out of order are errors, never reads out of bounds
		if L > 0 && S > 0 && outer > 0 {
			*(*int64)(fuzzElem(offs, []int64{0, S})) = L + 1
			if err := SegmentReduce(out, data, offs, reduce, hasInit, init); err == nil {
				t.Fatal("offsets past the data accepted")
			}
		}
	})
}

func FuzzConvIntStrides(f *testing.F) {
	for _, s := range []int64{1, 2, 3, 17, 99} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		g := 1 + r.Intn(2)
		n, cg, og := int64(r.Intn(3)), int64(r.Intn(2)+1), int64(r.Intn(2)+1)
		h, w, kh, kw := int64(r.Intn(4)+1), int64(r.Intn(4)+1), int64(r.Intn(3)+1), int64(r.Intn(3)+1)
		p := ConvParams{StrideH: 1 + r.Intn(2), StrideW: 1 + r.Intn(2), PadH: r.Intn(2), PadW: r.Intn(2),
			DilH: 1 + r.Intn(2), DilW: 1 + r.Intn(2), Groups: g}
		oh := (h+2*int64(p.PadH)-int64(p.DilH)*(kh-1)-1)/int64(p.StrideH) + 1
		ow := (w+2*int64(p.PadW)-int64(p.DilW)*(kw-1)-1)/int64(p.StrideW) + 1
		if oh < 1 || ow < 1 {
			return
		}
		in := randomView(r, Int64, []int64{n, cg * int64(g), h, w}, true)
		wt := randomView(r, Int64, []int64{og * int64(g), cg, kh, kw}, true)
		out, ref := zeroDense(Int64, []int64{n, og * int64(g), oh, ow}), zeroDense(Int64, []int64{n, og * int64(g), oh, ow})
		if err := ConvIntForward(out, in, wt, nil, p); err != nil {
			t.Fatalf("conv int %v: %v", p, err)
		}
		if err := ConvIntForward(ref, denseCopy(in), denseCopy(wt), nil, p); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "conv int", out, ref)
		gin, rgin := zeroDense(Int64, in.Sizes), zeroDense(Int64, in.Sizes)
		if err := ConvIntBackwardInput(gin, out, wt, p); err != nil {
			t.Fatal(err)
		}
		if err := ConvIntBackwardInput(rgin, ref, denseCopy(wt), p); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "conv int backward input", gin, rgin)
	})
}
