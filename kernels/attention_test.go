package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// The tile exp is within a few ulp of exp, and the build's row kernels (C under cgo)
// agree with the Go loops.
func TestAttentionRowKernels(t *testing.T) {
	for _, x := range []float32{-87, -20, -1.5, -1e-3, 0, 0.5, 3, 40, 88} {
		want := math.Exp(float64(x))
		if got := float64(attExpf(x)); math.Abs(got-want) > 4e-7*want {
			t.Fatalf("attExpf(%v) = %v, want %v", x, got, want)
		}
	}
	if attExpf(negInf) != 0 {
		t.Fatal("exp(-inf) must be 0")
	}
	r := rand.New(rand.NewSource(1))
	rows, cols := int64(21), int64(37) // two chunks of 16 rows in the AVX-512 step
	s := make([]float32, rows*cols)
	for i := range s {
		s[i] = float32(r.NormFloat64() * 3)
	}
	s[cols+2] = negInf
	for j := int64(0); j < cols; j++ {
		s[3*cols+j] = negInf // a fully masked row
	}
	a, b := append([]float32(nil), s...), append([]float32(nil), s...)
	m1, l1, al1 := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	m2, l2, al2 := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	for i := range m1 {
		m1[i], m2[i] = -1, -1
		if i%2 == 1 { // a first key block: no earlier maximum (row 3 stays all -inf)
			m1[i], m2[i] = negInf, negInf
		}
		l1[i], l2[i] = 0.5, 0.5
	}
	attOnlineSoftmax(a, rows, cols, m1, l1, al1)
	attOnlineSoftmaxGo(b, rows, cols, m2, l2, al2)
	// The same operations in the same order: equal to the bit.
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("element %d: %v vs %v", i, a[i], b[i])
		}
	}
	for i := range m1 {
		if m1[i] != m2[i] || l1[i] != l2[i] || al1[i] != al2[i] {
			t.Fatalf("row %d statistics differ: %v/%v/%v vs %v/%v/%v", i, m1[i], l1[i], al1[i], m2[i], l2[i], al2[i])
		}
	}
	lse := make([]float32, rows)
	for i := range lse {
		lse[i] = float32(r.NormFloat64())
	}
	lse[4] = negInf
	a, b = append([]float32(nil), s...), append([]float32(nil), s...)
	attProbs(a, rows, cols, lse)
	attProbsGo(b, rows, cols, lse)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("probabilities, element %d: %v vs %v", i, a[i], b[i])
		}
	}
}

// The AVX-512 attention products agree with the sgemm path on every operand layout,
// partial block and causal kind (the products the kinds skip are zero in A, as the
// probabilities are; under attQueryKey only visible scores are compared).
func TestAttentionGemm(t *testing.T) {
	if !attGemmFast {
		t.Skip("no AVX-512 products in this build or on this CPU")
	}
	r := rand.New(rand.NewSource(3))
	for _, c := range []struct{ m, n, k, off int64 }{{96, 96, 64, 0}, {96, 64, 96, -30}, {37, 45, 13, 5}, {5, 7, 96, 40}, {96, 96, 96, -95}, {13, 33, 29, 96}} {
		for kind := attNoCausal; kind <= attKeyByQuery; kind++ {
			for _, trans := range []bool{false, true} {
				for _, accum := range []bool{false, true} {
					ars, acs := c.k+3, int64(1)
					if trans {
						ars, acs = 1, c.m+2
					}
					a := make([]float32, (c.m-1)*ars+(c.k-1)*acs+1+attSlack)
					for i := int64(0); i < c.m; i++ {
						for kk := int64(0); kk < c.k; kk++ {
							x := float32(r.NormFloat64())
							if (kind == attQueryByKey && kk > i+c.off) || (kind == attKeyByQuery && kk < i-c.off) {
								x = 0
							}
							a[i*ars+kk*acs] = x
						}
					}
					ldb, ldc := c.n+5, c.n+1
					bm := randF32(r, int(c.k*ldb))
					c0 := randF32(r, int(c.m*ldc))
					rs := randF32(r, int(c.m))
					if !accum {
						rs = nil
					}
					got, want := append([]float32(nil), c0...), append([]float32(nil), c0...)
					attGemm(c.m, c.n, c.k, f32p(a), ars, acs, f32p(bm), ldb, f32p(got), ldc, 0.5, accum, rs, kind, c.off)
					attGemmFast = false
					attGemm(c.m, c.n, c.k, f32p(a), ars, acs, f32p(bm), ldb, f32p(want), ldc, 0.5, accum, rs, kind, c.off)
					attGemmFast = true
					for i := int64(0); i < c.m; i++ {
						for j := int64(0); j < c.n; j++ {
							if kind == attQueryKey && j > i+c.off {
								continue
							}
							g, w := got[i*ldc+j], want[i*ldc+j]
							if math.Abs(float64(g-w)) > 1e-4*(1+math.Abs(float64(w))) {
								t.Fatalf("%+v kind %d trans %v accum %v: C[%d,%d] = %v, want %v", c, kind, trans, accum, i, j, g, w)
							}
						}
					}
				}
			}
		}
	}
}

// The fused C block loops give the Go loops' values to the bit (the same operations in
// the same order; the forward's taller query blocks do not change a row's arithmetic):
// causal and not, GQA, partial blocks, fewer and more queries than keys.
func TestAttentionFusedLoops(t *testing.T) {
	if !attFused() {
		t.Skip("no fused loops in this build or on this CPU")
	}
	r := rand.New(rand.NewSource(5))
	for _, c := range []struct{ Hq, Hkv, L, S, D, Dv int64 }{{2, 1, 130, 250, 32, 32}, {2, 2, 250, 130, 16, 24}, {4, 2, 400, 400, 64, 64}, {1, 1, 5, 7, 8, 8}} {
		for _, causal := range []bool{false, true} {
			mk := func(h, n, d int64) Tensor {
				return f32Tensor(randF32(r, int(2*h*n*d)), []int64{2, h, n, d}, []int64{h * n * d, n * d, d, 1})
			}
			q, k, v, dout := mk(c.Hq, c.L, c.D), mk(c.Hkv, c.S, c.D), mk(c.Hkv, c.S, c.Dv), mk(c.Hq, c.L, c.Dv)
			prm := AttnParams{Scale: 1 / math.Sqrt(float64(c.D)), Causal: causal}
			run := func(off bool) [][]float32 {
				attFuseOff = off
				defer func() { attFuseOff = false }()
				out, dq, dk, dv := mk(c.Hq, c.L, c.Dv), mk(c.Hq, c.L, c.D), mk(c.Hkv, c.S, c.D), mk(c.Hkv, c.S, c.Dv)
				mx := f32Tensor(make([]float32, 2*c.Hq*c.L), []int64{2, c.Hq, c.L}, []int64{c.Hq * c.L, c.L, 1})
				linv := f32Tensor(make([]float32, 2*c.Hq*c.L), []int64{2, c.Hq, c.L}, []int64{c.Hq * c.L, c.L, 1})
				if err := AttentionForward(out, mx, linv, q, k, v, nil, prm); err != nil {
					t.Fatal(err)
				}
				if err := AttentionBackward(dq, dk, dv, dout, q, k, v, out, mx, linv, nil, prm); err != nil {
					t.Fatal(err)
				}
				var res [][]float32
				for _, x := range []Tensor{out, mx, linv, dq, dk, dv} {
					res = append(res, append([]float32(nil), unsafe.Slice((*float32)(x.Ptr), x.Numel())...))
				}
				return res
			}
			got, want := run(false), run(true)
			for i := range got {
				for j := range got[i] {
					if got[i][j] != want[i][j] && !(got[i][j] != got[i][j] && want[i][j] != want[i][j]) {
						t.Fatalf("%+v causal %v: result %d element %d: fused %v, Go loops %v", c, causal, i, j, got[i][j], want[i][j])
					}
				}
			}
		}
	}
}
