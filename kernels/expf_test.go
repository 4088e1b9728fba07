package kernels

import (
	"math"
	"math/rand"
	"testing"
)

func TestExpPoly32(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	diff := 0
	check := func(x float32) {
		got, want := expPoly32(x), float32(math.Exp(float64(x)))
		if got == want || (got != got && want != want) {
			return
		}
		d := int64(math.Float32bits(got)) - int64(math.Float32bits(want))
		if d > 1 || d < -1 {
			t.Fatalf("expPoly32(%v) = %v, want %v", x, got, want)
		}
		diff++
	}
	for i := 0; i < 2000000; i++ {
		check(float32((rng.Float64()*2 - 1) * 110))
		check(float32(rng.NormFloat64()))
	}
	for _, x := range []float32{0, -0, 1, -1, 88.72283, 88.72284, 88.7229, -87.3, -103.97, -104, -150,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -1e-30} {
		check(x)
	}
	if diff > 40 {
		t.Fatalf("%d of 4M results differ by an ulp from the correctly rounded exp", diff)
	}
}

func BenchmarkExpPoly32(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%200) * -0.05
	}
	b.Run("fast", func(b *testing.B) {
		var s float32
		for i := 0; i < b.N; i++ {
			for _, v := range x {
				s += expPoly32(v)
			}
		}
		_ = s
	})
	b.Run("math", func(b *testing.B) {
		var s float32
		for i := 0; i < b.N; i++ {
			for _, v := range x {
				s += float32(math.Exp(float64(v)))
			}
		}
		_ = s
	})
}
