package kernels

import (
	"math"
	"testing"
)

// erfF32 against math.Erf: absolute error below 1e-12 everywhere, relative below 1e-12
// for tiny arguments, and the float32 roundings agreeing to 1 ULP.
func TestErfF32(t *testing.T) {
	var worst float64
	for i := -800000; i <= 800000; i++ {
		x := float64(i) * 1e-5
		got, want := erfF32(x), math.Erf(x)
		worst = max(worst, math.Abs(got-want))
		if d := math.Abs(float64(float32(got)) - float64(float32(want))); d > 1.2e-7*math.Abs(want)+1e-45 {
			t.Fatalf("erf(%g): %g vs %g", x, float32(got), float32(want))
		}
	}
	if worst > 1e-12 {
		t.Fatalf("max abs error %g", worst)
	}
	for _, x := range []float64{1e-30, -1e-8, 3e-3, 0.06} {
		if r := math.Abs(erfF32(x)/math.Erf(x) - 1); r > 1e-12 {
			t.Fatalf("erf(%g) relative error %g", x, r)
		}
	}
	if !math.IsNaN(erfF32(math.NaN())) || erfF32(math.Inf(1)) != 1 || erfF32(math.Inf(-1)) != -1 {
		t.Fatal("special values")
	}
	t.Logf("max abs error %g", worst)
}
