package kernels

import (
	"math"
	"math/rand"
	"runtime"
	"testing"
	"unsafe"
)

// bf16At reads element idx of the 3-D bfloat16 t as float64.
func bf16At(t Tensor, i, j, k int64) float64 {
	off := i*t.Strides[0] + j*t.Strides[1] + k*t.Strides[2]
	return float64(BF16ToF32(*(*uint16)(unsafe.Add(t.Ptr, off*2))))
}

// TestGemmBF16Dot checks the VDPBF16PS GEMM against a float64 reference of the same
// bfloat16 operands: every element within bfloat16 rounding plus float32 accumulation
// error (a packing or tiling mistake is off by O(1)), over odd k, partial tiles,
// transposed and broadcast operands, both parallel paths and the epilogue, and bit for
// bit the same on one worker as on all.
func TestGemmBF16Dot(t *testing.T) {
	if !bf16DotCPU {
		t.Skip("this CPU has no AVX512-BF16")
	}
	r := rand.New(rand.NewSource(11))
	for _, c := range []struct {
		B, m, n, k     int64
		ta, tb, bcastA bool
		bias           bool
		alpha, beta    float64
	}{
		{1, 1, 1, 1, false, false, false, false, 1, 0},
		{1, 9, 33, 3, false, false, false, false, 1, 0},
		{1, 33, 17, 29, true, false, false, false, 1, 0},
		{1, 64, 64, 157, false, true, false, true, 1, 1},
		{3, 8, 9, 10, true, true, false, false, 0.5, 0},
		{4, 16, 70, 7, false, true, true, true, 2, 0.25},
		{5, 17, 40, 33, false, false, false, false, 1, 0},    // batches per worker
		{2, 70, 200, 301, true, false, false, true, 1, 1},    // columns split per batch
		{3, 64, 256, 64, false, false, true, false, 1, 0},    // columns split, broadcast A
		{1, 64, 1024, 1024, false, true, false, false, 1, 0}, // the linear layer
		{1, 300, 260, 270, true, true, false, true, 1, 1},
	} {
		mk := func(rows, cols int64, tr bool) Tensor {
			if tr {
				return transposed(benchTensor(r, BFloat16, c.B, cols, rows))
			}
			return benchTensor(r, BFloat16, c.B, rows, cols)
		}
		a := mk(c.m, c.k, c.ta)
		if c.bcastA {
			a.Strides[0] = 0
		}
		b := mk(c.k, c.n, c.tb)
		var self *Tensor
		if c.bias {
			s := benchTensor(r, BFloat16, c.n)
			self = &Tensor{Ptr: s.Ptr, DType: BFloat16, Sizes: []int64{c.B, c.m, c.n}, Strides: []int64{0, 0, 1}}
		}
		out := benchTensor(r, BFloat16, c.B, c.m, c.n)
		if err := BatchedGemm(out, a, b, self, c.alpha, c.beta); err != nil {
			t.Fatal(err)
		}
		got := append([]uint16(nil), unsafe.Slice((*uint16)(out.Ptr), c.B*c.m*c.n)...)
		for bi := int64(0); bi < c.B; bi++ {
			for i := int64(0); i < c.m; i++ {
				for j := int64(0); j < c.n; j++ {
					var sum, mag float64
					for k := int64(0); k < c.k; k++ {
						p := bf16At(a, bi, i, k) * bf16At(b, bi, k, j)
						sum += p
						mag += math.Abs(p)
					}
					want := c.alpha * sum
					bound := math.Abs(c.alpha) * mag * float64(c.k+2) * 0x1p-24
					if self != nil {
						sv := c.beta * bf16At(*self, bi, i, j)
						want += sv
						bound += math.Abs(sv) * 0x1p-23
					}
					bound += math.Abs(want)*0x1p-8 + 1e-30
					v := float64(BF16ToF32(got[(bi*c.m+i)*c.n+j]))
					if math.Abs(v-want) > bound {
						t.Fatalf("%+v [%d,%d,%d]: %g, want %g (bound %g)", c, bi, i, j, v, want, bound)
					}
				}
			}
		}
		// The same bits on one worker: the split never changes a sum's order.
		prev := runtime.GOMAXPROCS(1)
		err := BatchedGemm(out, a, b, self, c.alpha, c.beta)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range unsafe.Slice((*uint16)(out.Ptr), len(got)) {
			if v != got[i] {
				t.Fatalf("%+v: element %d is %x on one worker, %x on %d", c, i, v, got[i], prev)
			}
		}
	}
}

// TestGemmBF16DotSpecials: infinities and NaNs propagate as in float32 arithmetic.
func TestGemmBF16DotSpecials(t *testing.T) {
	if !bf16DotCPU {
		t.Skip("this CPU has no AVX512-BF16")
	}
	const m, n, k = 3, 35, 5
	a := make([]uint16, m*k)
	b := make([]uint16, k*n)
	for i := range a {
		a[i] = F32ToBF16(1)
	}
	for i := range b {
		b[i] = F32ToBF16(0.5)
	}
	a[0*k+2] = F32ToBF16(float32(math.Inf(1)))   // row 0: +inf
	a[1*k+1] = F32ToBF16(float32(math.NaN()))    // row 1: NaN
	b[4*n+33] = F32ToBF16(float32(math.Inf(-1))) // column 33: -inf
	ta := Tensor{Ptr: unsafe.Pointer(&a[0]), DType: BFloat16, Sizes: []int64{1, m, k}, Strides: []int64{0, k, 1}}
	tb := Tensor{Ptr: unsafe.Pointer(&b[0]), DType: BFloat16, Sizes: []int64{1, k, n}, Strides: []int64{0, n, 1}}
	out := make([]uint16, m*n)
	to := Tensor{Ptr: unsafe.Pointer(&out[0]), DType: BFloat16, Sizes: []int64{1, m, n}, Strides: []int64{0, n, 1}}
	if err := BatchedGemm(to, ta, tb, nil, 1, 0); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < n; j++ {
		r0, r1, r2 := BF16ToF32(out[j]), BF16ToF32(out[n+j]), BF16ToF32(out[2*n+j])
		switch {
		case j == 33 && !(math.IsNaN(float64(r0)) && math.IsNaN(float64(r1)) && math.IsInf(float64(r2), -1)):
			t.Fatalf("column 33: %v %v %v, want NaN (inf-inf) NaN -inf", r0, r1, r2)
		case j != 33 && !(math.IsInf(float64(r0), 1) && math.IsNaN(float64(r1)) && r2 == 2.5):
			t.Fatalf("column %d: %v %v %v, want +inf NaN 2.5", j, r0, r1, r2)
		}
	}
}
