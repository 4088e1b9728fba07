package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// The C softmax rows, the Go rows and (for NaN-free rows) the reference row function give
// the same bits up to the summation order, which the C and Go rows share exactly.
func TestSoftmaxCMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, N := range []int64{1, 2, 7, 15, 16, 17, 33, 64, 128, 200} {
		M := int64(37)
		x := make([]float32, M*N)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 3)
		}
		x[5*N] = float32(math.NaN())
		x[7*N+N-1] = float32(math.Inf(1))
		x[9*N] = float32(math.Inf(-1))
		x[11*N+N/2] = -200
		mk := func(v []float32) Tensor {
			return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Float32, Sizes: []int64{M, N}, Strides: []int64{N, 1}}
		}
		for _, log := range []bool{false, true} {
			for _, last := range []bool{false, true} {
				o := SoftmaxOpts{LastDim: last, Inner: 3}
				a, b := make([]float32, M*N), make([]float32, M*N)
				if err := Softmax(log, mk(a), mk(x), o); err != nil {
					t.Fatal(err)
				}
				noCSoftmax = true
				err := Softmax(log, mk(b), mk(x), o)
				noCSoftmax = false
				if err != nil {
					t.Fatal(err)
				}
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
						t.Fatalf("N=%d log=%v last=%v element %d: C %v, Go %v", N, log, last, i, a[i], b[i])
					}
				}
				// in place equals out of place
				c := append([]float32(nil), x...)
				if err := Softmax(log, mk(c), mk(c), o); err != nil {
					t.Fatal(err)
				}
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(c[i]) && !(a[i] != a[i] && c[i] != c[i]) {
						t.Fatalf("N=%d log=%v last=%v element %d: in place %v, out of place %v", N, log, last, i, c[i], a[i])
					}
				}
			}
		}
	}
}

func TestSoftmaxBackwardCMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	for _, N := range []int64{1, 5, 16, 17, 64, 128, 131} {
		M := int64(29)
		g, y := make([]float32, M*N), make([]float32, M*N)
		for i := range g {
			g[i], y[i] = float32(rng.NormFloat64()), float32(-rng.ExpFloat64())
		}
		mk := func(v []float32) Tensor {
			return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Float32, Sizes: []int64{M, N}, Strides: []int64{N, 1}}
		}
		for _, log := range []bool{false, true} {
			a, b := make([]float32, M*N), make([]float32, M*N)
			if err := SoftmaxBackward(log, mk(a), mk(g), mk(y), true); err != nil {
				t.Fatal(err)
			}
			noCSoftmax = true
			err := SoftmaxBackward(log, mk(b), mk(g), mk(y), true)
			noCSoftmax = false
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("N=%d log=%v element %d: C %v, Go %v", N, log, i, a[i], b[i])
				}
			}
		}
	}
}
