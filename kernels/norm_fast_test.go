package kernels

import (
	"math"
	"math/rand"
	"testing"
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
