package kernels

import (
	"math"
	"testing"
	"unsafe"
)

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors).
func TestPhiloxKnownAnswers(t *testing.T) {
	cases := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff},
			[4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0},
			[4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		if got := Philox4x32(c.ctr, c.key); got != c.want {
			t.Errorf("Philox4x32(%x, %x) = %x, want %x", c.ctr, c.key, got, c.want)
		}
	}
}

// The batched (vectorized C) generator against Stream.Block, and the float32 Bernoulli and
// dropout fast paths against the per-element definition of the stream.
func TestPhiloxBlocksAndFastPaths(t *testing.T) {
	s := Stream{Seed: 0x123456789abcdef, Offset: 0xfedcba9876543210}
	for _, b0 := range []uint64{0, 1, 1<<32 - 3} {
		w := make([]uint32, 4*300)
		philoxBlocks(w, s, b0)
		for i := 0; i < 300; i++ {
			want := s.Block(b0 + uint64(i))
			for j := 0; j < 4; j++ {
				if w[4*i+j] != want[j] {
					t.Fatalf("block %d word %d: got %#x, want %#x", b0+uint64(i), j, w[4*i+j], want[j])
				}
			}
		}
	}
	const n = 100003 // split over workers, a partial last block
	o := make([]float32, n)
	bernoulliF32(o, s, 0.9)
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	out, mask := make([]float32, n), make([]uint8, n)
	mk := func(p unsafe.Pointer, dt DType) Tensor {
		return Tensor{Ptr: p, DType: dt, Sizes: []int64{n}, Strides: []int64{1}}
	}
	if err := Dropout(mk(unsafe.Pointer(&out[0]), Float32), mk(unsafe.Pointer(&mask[0]), Bool),
		mk(unsafe.Pointer(&x[0]), Float32), s, 0.1); err != nil {
		t.Fatal(err)
	}
	scale := float64(float32(1 / (1 - 0.1)))
	for e := 0; e < n; e++ {
		w := s.Block(uint64(e / 4))
		u := float64(w[e%4]) * 0x1p-32
		want := float32(0)
		if u < 0.9 {
			want = 1
		}
		if o[e] != want {
			t.Fatalf("bernoulli element %d: got %v, want %v", e, o[e], want)
		}
		k := 0.0
		if u < 1-0.1 {
			k = 1
		}
		if mask[e] != uint8(k) || out[e] != float32(float64(x[e])*k*scale) {
			t.Fatalf("dropout element %d: got %v/%v", e, out[e], mask[e])
		}
	}
}

// The float32 dropout fast path (AVX2 lanes where the CPU has them) against the per-element
// definition for keep probabilities at and near the ends, inputs with infinities, NaNs,
// signed zeros and subnormals, lengths with partial vectors, and 1 and 2 workers.
func TestDropoutF32EdgesMatchDefinition(t *testing.T) {
	s := Stream{Seed: 0xfeed, Offset: 0x1234}
	specials := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0,
		float32(math.Copysign(0, -1)), 1e-45, -3e-39, 3.4e38, -1.5}
	for _, n := range []int{1, 7, 37, 4096 + 13, 60001} {
		x := make([]float32, n)
		for i := range x {
			x[i] = specials[i%len(specials)] * float32(1+i%3)
		}
		for _, p := range []float64{0, 1e-9, 0.1, 0.5, 0.9999999, 1} {
			scale := 0.0
			if p < 1 {
				scale = float64(float32(1 / (1 - p)))
			}
			var prev []float32
			for _, w := range []int{1, 2} {
				out, mask := make([]float32, n), make([]uint8, n)
				mk := func(ptr unsafe.Pointer, dt DType) Tensor {
					return Tensor{Ptr: ptr, DType: dt, Sizes: []int64{int64(n)}, Strides: []int64{1}}
				}
				old := SetThreads(w)
				err := Dropout(mk(unsafe.Pointer(&out[0]), Float32), mk(unsafe.Pointer(&mask[0]), Bool),
					mk(unsafe.Pointer(&x[0]), Float32), s, p)
				SetThreads(old)
				if err != nil {
					t.Fatal(err)
				}
				for e := 0; e < n; e++ {
					u := float64(s.Block(uint64(e / 4))[e%4]) * 0x1p-32
					k := 0.0
					if u < 1-p {
						k = 1
					}
					want := float32(float64(x[e]) * k * scale)
					if mask[e] != uint8(k) || math.Float32bits(out[e]) != math.Float32bits(want) &&
						!(want != want && out[e] != out[e]) {
						t.Fatalf("n %d p %v element %d (x %v): got %v/%v, want %v/%v", n, p, e, x[e], out[e], mask[e], want, k)
					}
				}
				if prev != nil {
					for e := range out {
						if math.Float32bits(out[e]) != math.Float32bits(prev[e]) {
							t.Fatalf("n %d p %v: 1 and 2 workers differ at %d", n, p, e)
						}
					}
				}
				prev = out
			}
		}
	}
}
