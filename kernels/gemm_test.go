package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

func f32Tensor(p []float32, sizes, strides []int64) Tensor {
	return Tensor{Ptr: unsafe.Pointer(&p[0]), DType: Float32, Sizes: sizes, Strides: strides}
}

func randF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// refGemm computes C = A@B for row-major contiguous A (m×k) and B (k×n) with gonum.
func refGemm(a, b []float32, m, n, k int) []float32 {
	c := make([]float32, m*n)
	gonumGemm(false, false, m, n, k, float32(1), unsafe.Pointer(&a[0]), max(k, 1),
		unsafe.Pointer(&b[0]), max(n, 1), 0, unsafe.Pointer(&c[0]), max(n, 1))
	return c
}

func closeF32(t *testing.T, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		d := math.Abs(float64(got[i] - want[i]))
		if d > tol*(1+math.Abs(float64(want[i]))) || math.IsNaN(float64(got[i])) {
			t.Fatalf("element %d: got %v want %v", i, got[i], want[i])
		}
	}
}

func TestGemmLayouts(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	// {128, 96, 200}, {40, 300, 50} and {300, 41, 30} are large enough for blasGemm to split
	// them over workers, by rows and by columns.
	for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 7}, {64, 33, 17}, {128, 96, 200}, {1, 40, 9}, {9, 1, 40},
		{40, 300, 50}, {300, 41, 30}} {
		m, n, k := sh[0], sh[1], sh[2]
		a, b := randF32(r, m*k), randF32(r, k*n)
		want := refGemm(a, b, m, n, k)
		// Transposed copies so A can be passed as a transposed view.
		at := make([]float32, m*k)
		for i := 0; i < m; i++ {
			for j := 0; j < k; j++ {
				at[j*m+i] = a[i*k+j]
			}
		}
		bt := make([]float32, k*n)
		for i := 0; i < k; i++ {
			for j := 0; j < n; j++ {
				bt[j*k+i] = b[i*n+j]
			}
		}
		// Strided (every other element) copy of B.
		bs := make([]float32, 2*k*n)
		for i := range b {
			bs[2*i] = b[i]
		}
		aViews := []Tensor{
			f32Tensor(a, []int64{1, int64(m), int64(k)}, []int64{0, int64(k), 1}),
			f32Tensor(at, []int64{1, int64(m), int64(k)}, []int64{0, 1, int64(m)}),
		}
		bViews := []Tensor{
			f32Tensor(b, []int64{1, int64(k), int64(n)}, []int64{0, int64(n), 1}),
			f32Tensor(bt, []int64{1, int64(k), int64(n)}, []int64{0, 1, int64(k)}),
			f32Tensor(bs, []int64{1, int64(k), int64(n)}, []int64{0, 2 * int64(n), 2}),
		}
		for ai, av := range aViews {
			for bi, bv := range bViews {
				out := make([]float32, m*n)
				ot := f32Tensor(out, []int64{1, int64(m), int64(n)}, []int64{0, int64(n), 1})
				if err := BatchedGemm(ot, av, bv, nil, 1, 0); err != nil {
					t.Fatal(err)
				}
				t.Logf("shape %v a%d b%d", sh, ai, bi)
				closeF32(t, out, want, 1e-6*float64(k+10))
			}
		}
		// Transposed output plus alpha/beta with a broadcast bias row.
		outT := make([]float32, m*n)
		bias := randF32(r, n)
		self := f32Tensor(bias, []int64{1, int64(m), int64(n)}, []int64{0, 0, 1})
		ot := f32Tensor(outT, []int64{1, int64(m), int64(n)}, []int64{0, 1, int64(m)})
		if err := BatchedGemm(ot, aViews[0], bViews[0], &self, 0.5, 2); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, m*n)
		w2 := make([]float32, m*n)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				got[i*n+j] = outT[j*m+i]
				w2[i*n+j] = 0.5*want[i*n+j] + 2*bias[j]
			}
		}
		closeF32(t, got, w2, 1e-6*float64(k+10))
	}
}

func TestGemmBF16(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	m, n, k := 37, 29, 300
	a, b := randF32(r, m*k), randF32(r, k*n)
	ab, bb := make([]uint16, m*k), make([]uint16, k*n)
	for i := range a {
		ab[i] = F32ToBF16(a[i])
		a[i] = BF16ToF32(ab[i])
	}
	for i := range b {
		bb[i] = F32ToBF16(b[i])
		b[i] = BF16ToF32(bb[i])
	}
	want := refGemm(a, b, m, n, k)
	out := make([]uint16, m*n)
	mk := func(p []uint16, r, c int64) Tensor {
		return Tensor{Ptr: unsafe.Pointer(&p[0]), DType: BFloat16, Sizes: []int64{1, r, c}, Strides: []int64{0, c, 1}}
	}
	if err := BatchedGemm(mk(out, int64(m), int64(n)), mk(ab, int64(m), int64(k)), mk(bb, int64(k), int64(n)), nil, 1, 0); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		// f32 accumulation then one RNE rounding: equal to rounding the f32 reference,
		// up to one bf16 ulp where the f32 sums differ in their last bits.
		w := F32ToBF16(want[i])
		if d := int(out[i]) - int(w); d > 1 || d < -1 {
			t.Fatalf("element %d: got %v want %v", i, BF16ToF32(out[i]), BF16ToF32(w))
		}
	}
}

func TestGemmBatchedAndErrors(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	B, m, n, k := 4, 5, 6, 7
	a, b := randF32(r, B*m*k), randF32(r, B*k*n)
	out := make([]float32, B*m*n)
	ta := f32Tensor(a, []int64{int64(B), int64(m), int64(k)}, []int64{int64(m * k), int64(k), 1})
	tb := f32Tensor(b, []int64{int64(B), int64(k), int64(n)}, []int64{int64(k * n), int64(n), 1})
	to := f32Tensor(out, []int64{int64(B), int64(m), int64(n)}, []int64{int64(m * n), int64(n), 1})
	if err := BatchedGemm(to, ta, tb, nil, 1, 0); err != nil {
		t.Fatal(err)
	}
	for bi := 0; bi < B; bi++ {
		want := refGemm(a[bi*m*k:], b[bi*k*n:], m, n, k)
		closeF32(t, out[bi*m*n:(bi+1)*m*n], want, 1e-5)
	}
	bad := f32Tensor(b, []int64{int64(B), int64(k + 1), int64(n)}, []int64{int64(k * n), int64(n), 1})
	if err := BatchedGemm(to, ta, bad, nil, 1, 0); err == nil {
		t.Fatal("shape mismatch not reported")
	}
}

func BenchmarkSgemm(b *testing.B) {
	for _, sh := range [][3]int{{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {64, 1024, 1024}} {
		m, n, k := sh[0], sh[1], sh[2]
		r := rand.New(rand.NewSource(1))
		x, y, out := randF32(r, m*k), randF32(r, k*n), make([]float32, m*n)
		tx := f32Tensor(x, []int64{1, int64(m), int64(k)}, []int64{0, int64(k), 1})
		ty := f32Tensor(y, []int64{1, int64(k), int64(n)}, []int64{0, int64(n), 1})
		to := f32Tensor(out, []int64{1, int64(m), int64(n)}, []int64{0, int64(n), 1})
		b.Run(BLASName+"/"+itoa(m)+"x"+itoa(n)+"x"+itoa(k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = BatchedGemm(to, tx, ty, nil, 1, 0)
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func itoa(i int) string {
	s := ""
	for {
		s = string(rune('0'+i%10)) + s
		i /= 10
		if i == 0 {
			return s
		}
	}
}

// TestGemmBiasIntoOut checks addmm's float32 path that copies the broadcast self into out
// and lets BLAS accumulate onto it (beta), including self aliasing out (addmm_).
func TestGemmBiasIntoOut(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, sh := range [][3]int{{5, 7, 3}, {64, 96, 80}} {
		m, n, k := sh[0], sh[1], sh[2]
		a, b, bias := randF32(r, m*k), randF32(r, k*n), randF32(r, n)
		ab := refGemm(a, b, m, n, k)
		want := make([]float32, m*n)
		for i := range want {
			want[i] = 0.5*ab[i] + 2*bias[i%n]
		}
		ta := f32Tensor(a, []int64{1, int64(m), int64(k)}, []int64{0, int64(k), 1})
		tb := f32Tensor(b, []int64{1, int64(k), int64(n)}, []int64{0, int64(n), 1})
		self := f32Tensor(bias, []int64{1, int64(m), int64(n)}, []int64{0, 0, 1})
		out := make([]float32, m*n)
		to := f32Tensor(out, []int64{1, int64(m), int64(n)}, []int64{0, int64(n), 1})
		if err := BatchedGemm(to, ta, tb, &self, 0.5, 2); err != nil {
			t.Fatal(err)
		}
		closeF32(t, out, want, 1e-5)
		// In place: self is out.
		for i := range out {
			out[i] = bias[i%n]
		}
		if err := BatchedGemm(to, ta, tb, &to, 0.5, 2); err != nil {
			t.Fatal(err)
		}
		closeF32(t, out, want, 1e-5)
	}
	// addmm_(x, x, y): out is also mat1 and self, so the GEMM must not read partial results.
	n := 48
	x, y := randF32(r, n*n), randF32(r, n*n)
	xy := refGemm(x, y, n, n, n)
	want := make([]float32, n*n)
	for i := range want {
		want[i] = xy[i] + x[i]
	}
	tx := f32Tensor(x, []int64{1, int64(n), int64(n)}, []int64{0, int64(n), 1})
	ty := f32Tensor(y, []int64{1, int64(n), int64(n)}, []int64{0, int64(n), 1})
	if err := BatchedGemm(tx, tx, ty, &tx, 1, 1); err != nil {
		t.Fatal(err)
	}
	closeF32(t, x, want, 1e-5)
}
