package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// The closure-free reductions and fmaF give exactly vecReduce's and math.FMA's results.
func TestVecDotSumMatchVecReduce(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for n := 0; n < 140; n++ {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()*100)
		}
		for _, W := range []int{vecW32, vecW64} {
			want := vecReduce(n, W, func(i int) float32 { return float32(a[i] * b[i]) },
				func(i int) (float32, float32) { return a[i], b[i] })
			if got := vecDot(a, b, W); math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("vecDot n=%d W=%d: %v want %v", n, W, got, want)
			}
			want = vecReduce(n, W, func(i int) float32 { return a[i] }, nil)
			if got := vecSum(a, W); math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("vecSum n=%d W=%d: %v want %v", n, W, got, want)
			}
		}
	}
	for i := 0; i < 1000000; i++ {
		x, y, z := float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64()*1e-3)
		if got, want := fmaF(x, y, z), float32(math.FMA(float64(x), float64(y), float64(z))); got != want {
			t.Fatalf("fmaF(%v, %v, %v) = %v, want %v", x, y, z, got, want)
		}
	}
}

// The C layer norm rows give exactly the Go rows' bits.
func TestLayerNormCMatchesGo(t *testing.T) {
	defer func(v bool) { lnAVX2 = v }(lnAVX2)
	lnAVX2 = false // the portable C rows (layernorm_avx2_test.go checks the AVX2 ones)
	rng := rand.New(rand.NewSource(13))
	mk := func(v []float32, sizes ...int64) Tensor {
		st := []int64{1}
		if len(sizes) == 2 {
			st = []int64{sizes[1], 1}
		}
		return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Float32, Sizes: sizes, Strides: st}
	}
	rnd := func(n int64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64()*2 + 0.5)
		}
		return v
	}
	for _, D := range []int64{1, 5, 16, 17, 64, 100} {
		M := int64(23)
		x, dy, w, b := rnd(M*D), rnd(M*D), rnd(D), rnd(D)
		for _, withW := range []bool{false, true} {
			var res [2][][]float32
			for k, goOnly := range []bool{false, true} {
				noCNorm = goOnly
				out, mean, rstd := make([]float32, M*D), make([]float32, M), make([]float32, M)
				mt, rt := mk(mean, M), mk(rstd, M)
				var wt, bt *Tensor
				if withW {
					w1, b1 := mk(w, D), mk(b, D)
					wt, bt = &w1, &b1
				}
				if err := LayerNormForward(mk(out, M, D), &mt, &rt, mk(x, M, D), wt, bt, 1e-5); err != nil {
					t.Fatal(err)
				}
				gin, gw, gb := make([]float32, M*D), make([]float32, D), make([]float32, D)
				gi, gwt, gbt := mk(gin, M, D), mk(gw, D), mk(gb, D)
				if err := LayerNormBackward(&gi, &gwt, &gbt, mk(dy, M, D), mk(x, M, D), mt, rt, wt); err != nil {
					t.Fatal(err)
				}
				res[k] = [][]float32{out, mean, rstd, gin, gw, gb}
				noCNorm = false
			}
			for i := range res[0] {
				for j := range res[0][i] {
					if math.Float32bits(res[0][i][j]) != math.Float32bits(res[1][i][j]) {
						t.Fatalf("D=%d weight=%v output %d element %d: C %v, Go %v", D, withW, i, j, res[0][i][j], res[1][i][j])
					}
				}
			}
		}
	}
}

// The portable C batch norm channel loops give exactly the Go loops' bits (the AVX-512
// float32 kernels have their own test: TestBatchNormF32VecMatchesFloat64).
func TestBatchNormCMatchesGo(t *testing.T) {
	savedVec := bnF32Vec
	bnF32Vec = false
	defer func() { bnF32Vec = savedVec }()
	rng := rand.New(rand.NewSource(14))
	N, C, S := int64(5), int64(3), int64(37)
	mk := func(v []float32, sizes ...int64) Tensor {
		st := []int64{1}
		if len(sizes) == 3 {
			st = []int64{C * S, S, 1}
		}
		return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Float32, Sizes: sizes, Strides: st}
	}
	rnd := func(n int64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64()*2 + 0.5)
		}
		return v
	}
	x, g, w, b := rnd(N*C*S), rnd(N*C*S), rnd(C), rnd(C)
	for _, training := range []bool{true, false} {
		var res [2][][]float32
		for k, goOnly := range []bool{false, true} {
			noCNorm = goOnly
			out, sm, si := make([]float32, N*C*S), make([]float32, C), make([]float32, C)
			rm, rv := []float32{0.1, 0.2, 0.3}, []float32{1, 2, 3}
			smt, sit, rmt, rvt, wt, bt := mk(sm, C), mk(si, C), mk(rm, C), mk(rv, C), mk(w, C), mk(b, C)
			if err := BatchNormForward(mk(out, N, C, S), &smt, &sit, mk(x, N, C, S), &wt, &bt, &rmt, &rvt, training, 0.1, 1e-5); err != nil {
				t.Fatal(err)
			}
			if !training {
				sm, si = []float32{0.5, -0.5, 1}, []float32{1, 2, 0.5}
				smt, sit = mk(sm, C), mk(si, C)
			}
			gin, gw, gb := make([]float32, N*C*S), make([]float32, C), make([]float32, C)
			gi, gwt, gbt := mk(gin, N, C, S), mk(gw, C), mk(gb, C)
			if err := BatchNormBackward(&gi, &gwt, &gbt, mk(g, N, C, S), mk(x, N, C, S), &wt, &rmt, &rvt, &smt, &sit, training, 1e-5); err != nil {
				t.Fatal(err)
			}
			res[k] = [][]float32{out, sm, si, rm, rv, gin, gw, gb}
			noCNorm = false
		}
		for i := range res[0] {
			for j := range res[0][i] {
				if math.Float32bits(res[0][i][j]) != math.Float32bits(res[1][i][j]) {
					t.Fatalf("training=%v output %d element %d: C %v, Go %v", training, i, j, res[0][i][j], res[1][i][j])
				}
			}
		}
	}
}
