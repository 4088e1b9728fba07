package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// setF32Dot turns the float32 micro-kernel on or off until the returned function is called.
func setF32Dot(on bool) func() {
	prev := f32DotOn
	f32DotOn = on
	return func() { f32DotOn = prev }
}

func needF32Dot(t testing.TB) {
	if !f32DotCPU {
		t.Skip("the CPU has no AVX-512F (or the build no cgo)")
	}
}

type f32DotCase struct {
	tA, tB      bool
	m, n, k     int
	alpha, beta float32
}

// f32DotRun multiplies random operands (leading dimensions padded by 3) into a C that
// holds NaN where beta is 0 (it must not be read) and returns C and a float64 reference
// with an error bound per element.
func f32DotRun(c f32DotCase, gemm func(tA, tB bool, m, n, k int, alpha float32, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta float32, c unsafe.Pointer, ldc int)) (got []float32, want, bound []float64) {
	r := rand.New(rand.NewSource(int64(c.m*131 + c.n*17 + c.k)))
	ar, ac := c.m, c.k
	if c.tA {
		ar, ac = c.k, c.m
	}
	br, bc := c.k, c.n
	if c.tB {
		br, bc = c.n, c.k
	}
	lda, ldb, ldc := ac+3, bc+3, c.n+3
	a, b := randF32(r, ar*lda+1), randF32(r, br*ldb+1)
	out := make([]float32, c.m*ldc+1)
	for i := range out {
		out[i] = float32(r.NormFloat64())
		if c.beta == 0 {
			out[i] = float32(math.NaN())
		}
	}
	A := func(i, kk int) float64 {
		if c.tA {
			return float64(a[kk*lda+i])
		}
		return float64(a[i*lda+kk])
	}
	B := func(kk, j int) float64 {
		if c.tB {
			return float64(b[j*ldb+kk])
		}
		return float64(b[kk*ldb+j])
	}
	want, bound = make([]float64, c.m*c.n), make([]float64, c.m*c.n)
	for i := 0; i < c.m; i++ {
		for j := 0; j < c.n; j++ {
			s, sa := 0.0, 0.0
			for kk := 0; kk < c.k; kk++ {
				s += A(i, kk) * B(kk, j)
				sa += math.Abs(A(i, kk) * B(kk, j))
			}
			v := float64(c.alpha) * s
			if c.beta != 0 {
				v += float64(c.beta) * float64(out[i*ldc+j])
			}
			want[i*c.n+j] = v
			// float32 sums of k terms, the alpha and beta roundings
			bound[i*c.n+j] = (float64(c.k)+4)*0x1p-24*(math.Abs(float64(c.alpha))*sa+math.Abs(v)) + 1e-30
		}
	}
	gemm(c.tA, c.tB, c.m, c.n, c.k, c.alpha, unsafe.Pointer(&a[0]), lda, unsafe.Pointer(&b[0]), ldb, c.beta,
		unsafe.Pointer(&out[0]), ldc)
	got = make([]float32, c.m*c.n)
	for i := 0; i < c.m; i++ {
		copy(got[i*c.n:(i+1)*c.n], out[i*ldc:i*ldc+c.n])
	}
	return got, want, bound
}

func f32DotCases() []f32DotCase {
	var cs []f32DotCase
	for _, s := range [][3]int{{1, 1, 1}, {11, 31, 5}, {12, 32, 256}, {13, 33, 257}, {25, 65, 600}, {32, 196, 144},
		{144, 196, 32}, {7, 300, 64}, {300, 7, 64}, {40, 40, 0}} {
		for _, t := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, ab := range [][2]float32{{1, 0}, {-0.5, 1}, {2.5, -1.25}, {0, 0.5}} {
				cs = append(cs, f32DotCase{t[0], t[1], s[0], s[1], s[2], ab[0], ab[1]})
			}
		}
	}
	return cs
}

// TestF32DotMatchesFloat64Reference: every shape (edges of the 12x32 tile and of the
// 256-deep k blocks), transposition, alpha and beta against a float64 product, within
// float32's error bound for k-term sums; beta 0 never reads C (it holds NaN) and alpha 0
// gives beta*C.
func TestF32DotMatchesFloat64Reference(t *testing.T) {
	needF32Dot(t)
	for _, c := range f32DotCases() {
		for name, gemm := range map[string]func(bool, bool, int, int, int, float32, unsafe.Pointer, int, unsafe.Pointer,
			int, float32, unsafe.Pointer, int){"serial": f32DotSerial, "split": f32DotGemm} {
			got, want, bound := f32DotRun(c, gemm)
			for i := range got {
				if d := math.Abs(float64(got[i]) - want[i]); !(d <= bound[i]) {
					t.Fatalf("%s %+v: element %d = %v, want %v (bound %g)", name, c, i, got[i], want[i], bound[i])
				}
			}
		}
	}
}

// TestF32DotSplitIsBitExact: the split over workers (by rows or by columns) gives the
// serial kernel's results bit for bit.
func TestF32DotSplitIsBitExact(t *testing.T) {
	needF32Dot(t)
	if Workers() < 2 {
		t.Skip("needs 2 workers")
	}
	for _, c := range []f32DotCase{{false, false, 300, 200, 300, 1, 0}, {true, true, 257, 96, 700, 1.5, 1},
		{false, true, 1024, 20, 64, 1, 0}, {false, false, 64, 1024, 1024, 1, 0}, {true, false, 100, 400, 90, 1, 0.5}} {
		s, _, _ := f32DotRun(c, f32DotSerial)
		p, _, _ := f32DotRun(c, f32DotGemm)
		for i := range s {
			if math.Float32bits(s[i]) != math.Float32bits(p[i]) {
				t.Fatalf("%+v: element %d: split %v, serial %v", c, i, p[i], s[i])
			}
		}
	}
}

// TestBLASRoutesFloat32ToF32Dot: with the switch on, float32 products through blasGemm
// are the micro-kernel's (bit for bit); float64 ones stay on BLAS.
func TestBLASRoutesFloat32ToF32Dot(t *testing.T) {
	needF32Dot(t)
	defer setF32Dot(true)()
	c := f32DotCase{false, true, 100, 70, 90, 1, 0}
	via, _, _ := f32DotRun(c, func(tA, tB bool, m, n, k int, alpha float32, a unsafe.Pointer, lda int,
		b unsafe.Pointer, ldb int, beta float32, c unsafe.Pointer, ldc int) {
		blasGemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	})
	direct, _, _ := f32DotRun(c, f32DotSerial)
	for i := range via {
		if math.Float32bits(via[i]) != math.Float32bits(direct[i]) {
			t.Fatalf("element %d: blasGemm %v, f32DotSerial %v", i, via[i], direct[i])
		}
	}
}

// BenchmarkF32DotVsBLAS: one core, the reference models' shapes (conv per-sample products
// and their gradients, the transformer's linear layers) and 256^3.
func BenchmarkF32DotVsBLAS(b *testing.B) {
	needF32Dot(b)
	for _, s := range []f32DotCase{{false, false, 32, 196, 144, 1, 0}, {false, true, 32, 144, 196, 1, 0},
		{true, false, 144, 196, 32, 1, 0}, {false, false, 1024, 256, 64, 1, 0}, {false, false, 1024, 64, 256, 1, 0},
		{false, true, 1024, 192, 64, 1, 0}, {false, false, 256, 256, 256, 1, 0}} {
		r := rand.New(rand.NewSource(1))
		x, y, out := randF32(r, s.m*s.k), randF32(r, s.k*s.n), make([]float32, s.m*s.n)
		lda, ldb := s.k, s.n
		if s.tA {
			lda = s.m
		}
		if s.tB {
			ldb = s.k
		}
		name := fmt.Sprintf("%dx%dx%d_t%v%v", s.m, s.n, s.k, s.tA, s.tB)
		run := func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				blasGemmSerial(s.tA, s.tB, s.m, s.n, s.k, float32(1), unsafe.Pointer(&x[0]), lda, unsafe.Pointer(&y[0]), ldb,
					0, unsafe.Pointer(&out[0]), s.n)
			}
			b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		}
		b.Run(name+"/f32dot", func(b *testing.B) {
			defer setF32Dot(true)()
			run(b)
		})
		b.Run(name+"/openblas", func(b *testing.B) {
			defer setF32Dot(false)()
			run(b)
		})
	}
}

// TestF32DotRouting: narrow, short and huge products and float64 stay on BLAS.
func TestF32DotRouting(t *testing.T) {
	defer setF32Dot(true)()
	for _, c := range []struct {
		m, n, k int
		want    bool
	}{{64, 64, 64, true}, {8, 16, 1, true}, {7, 64, 64, false}, {64, 15, 64, false}, {4096, 4096, 2048, true},
		{4096, 4096, 2049, false}} {
		if got := useF32Dot[float32](c.m, c.n, c.k); got != c.want {
			t.Errorf("%dx%dx%d: %v, want %v", c.m, c.n, c.k, got, c.want)
		}
	}
	if useF32Dot[float64](64, 64, 64) {
		t.Error("float64 routed to the float32 kernel")
	}
}
