package kernels

import (
	"math"
	"os"
	"testing"
)

// ulpDist is the distance in float32 steps between a and b (same sign or zero).
func ulpDist(a, b float32) int64 {
	ia, ib := int64(int32(math.Float32bits(a))), int64(int32(math.Float32bits(b)))
	if ia < 0 {
		ia = math.MinInt32 - ia
	}
	if ib < 0 {
		ib = math.MinInt32 - ib
	}
	if ia > ib {
		return ia - ib
	}
	return ib - ia
}

// expFloat32 against the correctly rounded exp (float64's, rounded once): at most one ulp
// off, exact at 0, inf at overflow, 0 at underflow, NaN kept. Every float32 input with
// HPUSIM_EXP_ALL=1 (about a minute), else every 61st bit pattern plus every input in the
// ranges where the result is subnormal or near overflow.
func TestExpF32AllFloats(t *testing.T) {
	worst, worstX, off, n := int64(0), float32(0), 0, 0
	check := func(x float32) {
		n++
		got := expFloat32(x)
		if x != x {
			if got == got {
				t.Fatalf("expFloat32(NaN) = %v", got)
			}
			return
		}
		want := float32(math.Exp(float64(x)))
		if got == want {
			return
		}
		off++
		if d := ulpDist(got, want); d > worst {
			worst, worstX = d, x
		}
	}
	step := uint64(61)
	if os.Getenv("HPUSIM_EXP_ALL") == "1" {
		step = 1
	}
	for b := uint64(0); b < 1<<32; b += step {
		check(math.Float32frombits(uint32(b)))
	}
	if step > 1 { // every input whose result is subnormal, or near overflow
		for _, r := range [][2]float32{{-104, -87}, {88, 89}} {
			for x := r[0]; x < r[1]; x = math.Nextafter32(x, r[1]) {
				check(x)
			}
		}
	}
	t.Logf("expFloat32: %d of %d inputs off the correctly rounded exp, worst %d ulp at %v", off, n, worst, worstX)
	if worst > 1 {
		t.Fatalf("expFloat32 is %d ulp off at %v: %v, want %v", worst, worstX, expFloat32(worstX),
			float32(math.Exp(float64(worstX))))
	}
	for x, want := range map[float32]float32{0: 1, float32(math.Inf(1)): float32(math.Inf(1)), 89: float32(math.Inf(1)),
		float32(math.Inf(-1)): 0, -104: 0, -200: 0} {
		if got := expFloat32(x); got != want {
			t.Errorf("expFloat32(%v) = %v, want %v", x, got, want)
		}
	}
}
