package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// The 2x2/2 fast path must pick exactly the generic kernel's maxima and indices, ties
// (first wins), NaNs (a later NaN takes over) and -inf windows included, with odd input
// sizes leaving a last row and column outside every window.
func TestMaxPool2x2MatchesGeneric(t *testing.T) {
	p := PoolParams{KH: 2, KW: 2, StrideH: 2, StrideW: 2, DilH: 1, DilW: 1}
	r := rand.New(rand.NewSource(3))
	for _, sh := range [][4]int64{{2, 3, 28, 28}, {1, 2, 7, 9}, {3, 1, 14, 14}, {1, 1, 2, 2}, {1, 2, 5, 70}, {2, 2, 6, 33}, {1, 1, 3, 64}} {
		n := sh[0] * sh[1] * sh[2] * sh[3]
		x := make([]float32, n)
		for i := range x {
			switch k := r.Intn(20); {
			case k == 0:
				x[i] = float32(math.NaN())
			case k == 1:
				x[i] = float32(math.Inf(-1))
			default:
				x[i] = float32(r.Intn(4)) // many ties
			}
		}
		oh, ow := sh[2]/2, sh[3]/2
		m := sh[0] * sh[1] * oh * ow
		in := Tensor{Ptr: unsafe.Pointer(&x[0]), DType: Float32, Sizes: sh[:], Strides: contiguousStrides(sh[:])}
		osz := []int64{sh[0], sh[1], oh, ow}
		y1, y2 := make([]float32, m), make([]float32, m)
		i1, i2 := make([]int64, m), make([]int64, m)
		mk := func(p unsafe.Pointer, dt DType) Tensor {
			return Tensor{Ptr: p, DType: dt, Sizes: osz, Strides: contiguousStrides(osz)}
		}
		maxPool2x2F32(mk(unsafe.Pointer(&y1[0]), Float32), mk(unsafe.Pointer(&i1[0]), Int64), in)
		maxPoolForwardNative[float32](mk(unsafe.Pointer(&y2[0]), Float32), mk(unsafe.Pointer(&i2[0]), Int64), in, p)
		for i := range y1 {
			if math.Float32bits(y1[i]) != math.Float32bits(y2[i]) || i1[i] != i2[i] {
				t.Fatalf("%v at %d: fast (%v, %d) generic (%v, %d)", sh, i, y1[i], i1[i], y2[i], i2[i])
			}
		}
		pool2x2PlanesGo(in, mk(unsafe.Pointer(&y1[0]), Float32), mk(unsafe.Pointer(&i1[0]), Int64), 0, sh[0]*sh[1])
		for i := range y1 {
			if math.Float32bits(y1[i]) != math.Float32bits(y2[i]) || i1[i] != i2[i] {
				t.Fatalf("%v at %d: Go fast path (%v, %d) generic (%v, %d)", sh, i, y1[i], i1[i], y2[i], i2[i])
			}
		}
	}
}

func contiguousStrides(sizes []int64) []int64 {
	st, s := make([]int64, len(sizes)), int64(1)
	for i := len(sizes) - 1; i >= 0; i-- {
		st[i] = s
		s *= sizes[i]
	}
	return st
}

// The bfloat16 fast paths give the generic kernels' bits: forward maxima and indices, and
// backward sums (overlapping windows' indices repeat, so some elements sum twice).
func TestMaxPoolBF16FastMatchesGeneric(t *testing.T) {
	p := PoolParams{KH: 2, KW: 2, StrideH: 2, StrideW: 2, DilH: 1, DilW: 1}
	r := rand.New(rand.NewSource(5))
	sh := []int64{2, 3, 9, 8}
	n := sh[0] * sh[1] * sh[2] * sh[3]
	x := make([]uint16, n)
	for i := range x {
		x[i] = F32ToBF16(float32(r.Intn(5)) - 2)
	}
	x[7] = 0x7fc0 // NaN
	osz := []int64{sh[0], sh[1], sh[2] / 2, sh[3] / 2}
	m := osz[0] * osz[1] * osz[2] * osz[3]
	in := Tensor{Ptr: unsafe.Pointer(&x[0]), DType: BFloat16, Sizes: sh, Strides: contiguousStrides(sh)}
	mk := func(p unsafe.Pointer, dt DType, sz []int64) Tensor {
		return Tensor{Ptr: p, DType: dt, Sizes: sz, Strides: contiguousStrides(sz)}
	}
	y1, y2 := make([]uint16, m), make([]uint16, m)
	i1, i2 := make([]int64, m), make([]int64, m)
	maxPool2x2BF16(mk(unsafe.Pointer(&y1[0]), BFloat16, osz), mk(unsafe.Pointer(&i1[0]), Int64, osz), in)
	noPoolBF16Fast = true
	defer func() { noPoolBF16Fast = false }()
	if err := MaxPool2d(mk(unsafe.Pointer(&y2[0]), BFloat16, osz), mk(unsafe.Pointer(&i2[0]), Int64, osz), in, p); err != nil {
		t.Fatal(err)
	}
	for i := range y1 {
		nan1, nan2 := BF16ToF32(y1[i]) != BF16ToF32(y1[i]), BF16ToF32(y2[i]) != BF16ToF32(y2[i])
		if (y1[i] != y2[i] && !(nan1 && nan2)) || i1[i] != i2[i] {
			t.Fatalf("forward at %d: fast (%x, %d) generic (%x, %d)", i, y1[i], i1[i], y2[i], i2[i])
		}
	}
	g := make([]uint16, m)
	for i := range g {
		g[i] = F32ToBF16(r.Float32()*4 - 2)
	}
	g[1], g[2], g[4] = 0x8000, 0xffc1, 0x7f80 // -0, a signalling-looking NaN, +inf
	check := func(what string) {
		g1, g2 := make([]uint16, n), make([]uint16, n)
		for i := range g1 {
			g1[i] = 0x1234 // every element is written
		}
		if err := maxPoolBackwardBF16(mk(unsafe.Pointer(&g1[0]), BFloat16, sh), mk(unsafe.Pointer(&g[0]), BFloat16, osz),
			mk(unsafe.Pointer(&i1[0]), Int64, osz)); err != nil {
			t.Fatal(err)
		}
		if err := MaxPool2dBackward(mk(unsafe.Pointer(&g2[0]), BFloat16, sh), mk(unsafe.Pointer(&g[0]), BFloat16, osz),
			mk(unsafe.Pointer(&i1[0]), Int64, osz)); err != nil {
			t.Fatal(err)
		}
		for i := range g1 {
			if g1[i] != g2[i] {
				t.Fatalf("%s backward at %d: fast %x generic %x", what, i, g1[i], g2[i])
			}
		}
	}
	check("distinct indices") // every plane scattered directly
	for i := range i1 {
		if i%3 == 0 {
			i1[i] = i1[i] - i1[i]%2 // some windows point at the same element as a neighbour
		}
	}
	check("repeated indices")
}
