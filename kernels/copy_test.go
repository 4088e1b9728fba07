package kernels

import (
	"math"
	"testing"
	"unsafe"
)

func TestBF16RoundNearestEven(t *testing.T) {
	cases := map[uint32]uint16{
		0x3f800000: 0x3f80, // 1.0
		0x3f808000: 0x3f80, // tie, even stays
		0x3f818000: 0x3f82, // tie, odd rounds up
		0x3f808001: 0x3f81, // above tie
		0x7f800000: 0x7f80, // inf
		0x7fc00001: 0x7fc0, // nan quieted
		0x7f7fffff: 0x7f80, // max float rounds to inf
	}
	for in, want := range cases {
		if got := F32ToBF16(math.Float32frombits(in)); got != want {
			t.Errorf("%#x: got %#x want %#x", in, got, want)
		}
	}
}

func TestF16RoundTripAllPatterns(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f {
			continue
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("%#x -> %v -> %#x", h, f, back)
		}
	}
	if F32ToF16(65520) != 0x7c00 || F32ToF16(65519) != 0x7bff {
		t.Fatal("overflow rounding")
	}
	if F32ToF16(float32(math.Ldexp(1, -25))) != 0 || F32ToF16(float32(math.Ldexp(1.5, -25))) != 1 {
		t.Fatal("subnormal rounding")
	}
}

func tensorOf[T any](v []T, dt DType, sizes, strides []int64) Tensor {
	return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: dt, Sizes: sizes, Strides: strides}
}

func TestCopyTransposeAndConvert(t *testing.T) {
	src := []float32{1, 2, 3, 4, 5, 6} // 2x3
	dst := make([]int64, 6)            // 3x2 = transpose
	err := Copy(tensorOf(dst, Int64, []int64{2, 3}, []int64{1, 2}), tensorOf(src, Float32, []int64{2, 3}, []int64{3, 1}))
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{1, 4, 2, 5, 3, 6}
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("got %v", dst)
		}
	}
}

func TestCopyLargeParallelBF16(t *testing.T) {
	n := 200000
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i) * 0.001
	}
	dst := make([]uint16, n)
	if err := Copy(tensorOf(dst, BFloat16, []int64{int64(n)}, []int64{1}), tensorOf(src, Float32, []int64{int64(n)}, []int64{1})); err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if dst[i] != F32ToBF16(src[i]) {
			t.Fatalf("element %d", i)
		}
	}
}

func TestFillAndIntegerExactness(t *testing.T) {
	dst := make([]int64, 5)
	big := int64(1)<<62 + 1
	if err := Fill(tensorOf(dst, Int64, []int64{5}, []int64{1}), 0, big, true); err != nil {
		t.Fatal(err)
	}
	if dst[4] != big {
		t.Fatal("int64 fill lost precision")
	}
	f := make([]float32, 4)
	Fill(tensorOf(f, Float32, []int64{2, 2}, []int64{2, 1}), 2.5, 0, false)
	if f[3] != 2.5 {
		t.Fatal("fill")
	}
}

func TestParallelForPanicPropagates(t *testing.T) {
	defer func() {
		r := recover()
		if _, ok := r.(KernelPanic); !ok {
			t.Fatalf("expected KernelPanic, got %v", r)
		}
	}()
	ParallelFor(1<<20, 1, func(lo, hi int64) {
		if lo > 0 {
			panic("boom")
		}
	})
}

// Permuted copies with short contiguous rows (copyShortRows) against an element loop,
// for shapes large enough to be split over workers.
func TestCopyShortRows(t *testing.T) {
	for _, c := range []struct {
		sizes []int64
		perm  []int
	}{
		{[]int64{16, 4, 64, 16}, []int{0, 2, 1, 3}},
		{[]int64{3, 5, 7, 8}, []int{2, 0, 1, 3}},
		{[]int64{40, 33, 9, 3}, []int{1, 0, 2, 3}},
		{[]int64{257, 129, 32}, []int{1, 0, 2}},
		{[]int64{5, 300, 66}, []int{1, 0, 2}},
	} {
		n := int64(1)
		for _, s := range c.sizes {
			n *= s
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(i)
		}
		d := len(c.sizes)
		st := make([]int64, d)
		acc := int64(1)
		for i := d - 1; i >= 0; i-- {
			st[i] = acc
			acc *= c.sizes[i]
		}
		ps, pst := make([]int64, d), make([]int64, d)
		for i, p := range c.perm {
			ps[i], pst[i] = c.sizes[p], st[p]
		}
		out := make([]float32, n)
		ost := make([]int64, d)
		acc = 1
		for i := d - 1; i >= 0; i-- {
			ost[i] = acc
			acc *= ps[i]
		}
		src := Tensor{Ptr: unsafe.Pointer(&data[0]), DType: Float32, Sizes: ps, Strides: pst}
		dst := Tensor{Ptr: unsafe.Pointer(&out[0]), DType: Float32, Sizes: ps, Strides: ost}
		if err := Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		idx := make([]int64, d)
		for e := int64(0); e < n; e++ {
			var so, do int64
			for k := 0; k < d; k++ {
				so += idx[k] * pst[k]
				do += idx[k] * ost[k]
			}
			if out[do] != data[so] {
				t.Fatalf("%v perm %v: element %v = %v, want %v", c.sizes, c.perm, idx, out[do], data[so])
			}
			for k := d - 1; k >= 0; k-- {
				if idx[k]++; idx[k] < ps[k] {
					break
				}
				idx[k] = 0
			}
		}
	}
}
