package kernels

import (
	"math"
	"math/rand"
	"runtime"
	"testing"
	"unsafe"
)

func TestConvertBF16MatchesScalar(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	src := make([]float32, 4099)
	for i := range src {
		switch i % 7 {
		case 0:
			src[i] = math.Float32frombits(r.Uint32()) // any bits: NaNs, infs, subnormals
		case 1:
			src[i] = float32(math.NaN())
		default:
			src[i] = float32(r.NormFloat64())
		}
	}
	h := make([]uint16, len(src))
	f32ToBF16s(h, src)
	back := make([]float32, len(src))
	bf16ToF32s(back, h)
	for i, v := range src {
		if h[i] != F32ToBF16(v) {
			t.Fatalf("f32ToBF16s[%d] of %x = %x, want %x", i, math.Float32bits(v), h[i], F32ToBF16(v))
		}
		if math.Float32bits(back[i]) != math.Float32bits(BF16ToF32(h[i])) {
			t.Fatalf("bf16ToF32s[%d] mismatch", i)
		}
	}
}

// TestGemmHalfMatchesGeneric checks the half-precision GEMM against the generic
// convert-while-packing path bit for bit, over transposed, broadcast and biased operands.
func TestGemmHalfMatchesGeneric(t *testing.T) {
	if BLASName == "gonum" {
		// OpenBLAS sums each element in the same order whatever the operands' layout;
		// gonum's order depends on the transposition flags, which the two paths choose
		// differently, so bit equality only holds in the OpenBLAS (cgo) build.
		t.Skip("bit equality of the two paths needs OpenBLAS")
	}
	// The VDPBF16PS path sums in its own order; TestGemmBF16Dot checks it.
	// So does the AVX2 kernel; TestGemmB2MatchesReference checks it.
	oldDot, oldB2 := gemmBF16Dot, gemmB2
	gemmBF16Dot, gemmB2 = false, false
	defer func() { gemmBF16Dot, gemmB2 = oldDot, oldB2 }()
	r := rand.New(rand.NewSource(5))
	for _, dt := range []DType{BFloat16, Float16} {
		for _, c := range []struct {
			B, m, n, k     int64
			ta, tb, bcastA bool
			bias           bool
			alpha, beta    float64
		}{
			{1, 33, 17, 29, false, false, false, false, 1, 0},
			{1, 64, 64, 157, false, true, false, true, 1, 1},
			{3, 8, 9, 10, true, false, false, false, 0.5, 0},
			{4, 16, 5, 7, true, true, true, true, 2, 0.25},
			{2, 1, 7, 5, false, true, false, false, 1, 0},
			{2, 6, 1, 5, false, false, false, true, 1, 1},
			{1, 5, 6, 0, false, false, false, true, 1, 1},
			{1, 64, 1024, 1024, false, true, false, false, 1, 0},
			{1, 300, 260, 270, true, true, false, true, 1, 1},
		} {
			mk := func(rows, cols int64, tr bool) Tensor {
				if tr {
					return transposed(benchTensor(r, dt, c.B, cols, rows))
				}
				return benchTensor(r, dt, c.B, rows, cols)
			}
			if dt == Float16 {
				mk = func(rows, cols int64, tr bool) Tensor {
					x := benchTensor(r, BFloat16, c.B, rows, cols) // small values are valid f16 bits too
					x.DType = Float16
					if tr {
						x = transposed(Tensor{Ptr: x.Ptr, DType: dt, Sizes: []int64{c.B, cols, rows}, Strides: []int64{rows * cols, rows, 1}})
					}
					return x
				}
			}
			a := mk(c.m, c.k, c.ta)
			if c.bcastA {
				a.Strides[0] = 0
			}
			b := mk(c.k, c.n, c.tb)
			o1 := benchTensor(r, dt, c.B, c.m, c.n)
			o2 := benchTensor(r, dt, c.B, c.m, c.n)
			var self *Tensor
			if c.bias {
				s := benchTensor(r, dt, c.n)
				self = &Tensor{Ptr: s.Ptr, DType: dt, Sizes: []int64{c.B, c.m, c.n}, Strides: []int64{0, 0, 1}}
			}
			bgemm[float32](o1, a, b, self, c.alpha, c.beta)
			if err := BatchedGemm(o2, a, b, self, c.alpha, c.beta); err != nil {
				t.Fatal(err)
			}
			n := int(c.B * c.m * c.n)
			x1 := unsafe.Slice((*uint16)(o1.Ptr), n)
			x2 := unsafe.Slice((*uint16)(o2.Ptr), n)
			// Both paths end in OpenBLAS's sgemm on float32 panels, but with the operands
			// transposed differently; some OpenBLAS kernel sets (seen on an AMD EPYC with
			// AVX-512) sum a k-block in a layout-dependent order, which can move a half-
			// precision result by one unit in the last place. Anything more is a packing bug.
			for i := range x1 {
				if d := int(x1[i]) - int(x2[i]); d > 1 || d < -1 || (d != 0 && x1[i]&0x7fff == 0) {
					t.Fatalf("%v %+v: element %d: %x vs generic %x", dt, c, i, x2[i], x1[i])
				}
			}
		}
	}
}

func TestGemmHalfKeepsPanelsAcrossGC(t *testing.T) {
	// The float32 panels of a bf16 GEMM come back from the scratch free list after a
	// garbage collection (a sync.Pool would drop them and the next call would allocate
	// and zero the 4 MB weight panel again).
	r := rand.New(rand.NewSource(7))
	x := benchTensor(r, BFloat16, 1, 64, 1024)
	w := transposed(benchTensor(r, BFloat16, 1, 1024, 1024))
	out := benchTensor(r, BFloat16, 1, 64, 1024)
	if err := BatchedGemm(out, x, w, nil, 1, 0); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 5; i++ {
		runtime.GC()
		if err := BatchedGemm(out, x, w, nil, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("5 bf16 GEMMs after GCs allocated %d bytes; the panels (4 MB) were not reused", grew)
	}
}
