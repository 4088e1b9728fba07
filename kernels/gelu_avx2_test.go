//go:build cgo

package kernels

import (
	"math"
	"testing"
)

// geluRef64 is gelu or its derivative (bwd) of the float32 x in float64, in forms without
// cancellation: x Phi(x) with Phi = erfc(-x/sqrt2)/2, x / (1 + e^(-2u)) for the tanh form.
// scale is the magnitude of the terms a result sums (the derivative's Phi and x phi), the
// unit its errors are measured in.
func geluRef64(x float32, bwd, tanhForm bool) (ref, scale float64) {
	v := float64(x)
	if tanhForm {
		c, k := math.Sqrt(2/math.Pi), 0.044715
		u := c * (v + k*v*v*v)
		e := math.Exp(-2 * u)
		s := 1 / (1 + e)
		if !bwd {
			return v * s, math.Abs(v * s)
		}
		if s == 0 {
			return 0, 0
		}
		es := e * s
		if e >= 1 {
			es = 1 - s
		}
		term := 2 * c * v * es * (1 + 3*k*v*v)
		if es == 0 {
			term = 0
		}
		return s + s*term, math.Max(math.Abs(s), math.Abs(s*term))
	}
	phi := 0.5 * math.Erfc(-v/math.Sqrt2)
	if !bwd {
		return v * phi, math.Abs(v * phi)
	}
	xp := v * math.Exp(-v*v/2) / math.Sqrt(2*math.Pi)
	return phi + xp, math.Max(phi, math.Abs(xp))
}

// ulpsOf is |got - ref| in float32 ulps at scale (subnormal spacing below the normals).
func ulpsOf(got float32, ref, scale float64) float64 {
	if math.IsNaN(ref) {
		if math.IsNaN(float64(got)) {
			return 0
		}
		return math.Inf(1)
	}
	if math.IsInf(ref, 0) {
		if float64(got) == ref {
			return 0
		}
		return math.Inf(1)
	}
	s := float32(math.Min(scale, math.MaxFloat32))
	u := float64(math.Nextafter32(s, float32(math.Inf(1))) - s)
	if s == 0 || u < 0x1p-149 {
		u = 0x1p-149
	}
	return math.Abs(float64(got)-ref) / u
}

// geluSweep runs gelu (or its derivative with gradient 1) over float32 values spread over the
// whole range (every step-th bit pattern, both signs, plus specials) and returns the largest
// error in ulps at each result's scale, with the x where it occurs.
func geluSweep(t *testing.T, bwd, tanhForm bool, step uint32) (float64, float32) {
	xs := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-40, -1e-40, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32, 0.7, -0.7, 14.5, -14.5, -13.2, -9.9}
	for b := uint32(0); b < 0x7f800000; b += step {
		f := math.Float32frombits(b)
		xs = append(xs, f, -f)
	}
	p := []float64{0, 0, 0, 0}
	if tanhForm {
		p[0] = 1
	}
	out := make([]float32, len(xs))
	if bwd {
		ones := make([]float32, len(xs))
		for i := range ones {
			ones[i] = 1
		}
		EWOps["gelu_backward"].F32(out, [][]float32{ones, xs}, p)
	} else {
		EWOps["gelu"].F32(out, [][]float32{xs}, p)
	}
	worst, at := 0.0, float32(0)
	for i, x := range xs {
		ref, sc := geluRef64(x, bwd, tanhForm)
		if math.IsInf(float64(x), 0) && bwd {
			ref = math.NaN() // torch: 1 + inf*0, inf*0
		}
		if math.IsInf(float64(x), -1) && !bwd && !tanhForm {
			ref = math.NaN()
		}
		if math.IsInf(float64(x), -1) && !bwd && tanhForm {
			ref = math.NaN()
		}
		if e := ulpsOf(out[i], ref, sc); e > worst || math.IsNaN(e) {
			worst, at = e, x
		}
	}
	return worst, at
}

// Dense sweep of the float32 range (huge, tiny, subnormal, +-inf, NaN): the AVX2 lanes (both
// forms, both on by default) stay within a few ulps of float64 everywhere,
// where the portable loops (torch's formulas: the erf of Abramowitz-Stegun, 1 + tanh) lose
// the negative tail entirely.
func TestGeluAVX2UlpSweep(t *testing.T) {
	prev := geluAVX2(3)
	defer geluAVX2(prev)
	if geluAVX2(3) != 3 {
		t.Skip("no AVX2+FMA (or HPUSIM_ISA=generic)")
	}
	step := uint32(997)
	if testing.Short() {
		step = 9973
	}
	for _, c := range []struct {
		name          string
		bwd, tanhForm bool
		limit         float64
	}{{"gelu", false, false, 8}, {"gelu_backward", true, false, 8},
		// tanh form: the float32 rounding of u = sqrt(2/pi)(x + kappa x^3) moves e^(-2u) by up
		// to |2u| x 2^-24 relative (~200 ulp at x = -10, where |2u| ~ 88)
		{"gelu_tanh", false, true, 256}, {"gelu_tanh_backward", true, true, 256}} {
		geluAVX2(3)
		e, at := geluSweep(t, c.bwd, c.tanhForm, step)
		geluAVX2(0)
		ep, atp := geluSweep(t, c.bwd, c.tanhForm, step)
		t.Logf("%s: AVX2 max %.3g ulp (x=%g), portable %.3g ulp (x=%g)", c.name, e, at, ep, atp)
		if !(e <= c.limit) || !(e <= ep || math.IsNaN(ep)) {
			t.Errorf("%s: AVX2 lanes %.3g ulp from float64 at x=%g (limit %v)", c.name, e, at, c.limit)
		}
	}
}

// The transformer's gelu ([16*64, 256]) on one worker: AVX2 lanes against the portable loops.
func BenchmarkGeluAVX2(b *testing.B) {
	n := 16 * 64 * 256
	x, g, o := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(i%2001-1000) / 250
		g[i] = 1
	}
	defer geluAVX2(geluAVX2(3))
	for _, tf := range []float64{0, 1} {
		for _, on := range []bool{false, true} {
			name := map[bool]string{false: "portable", true: "avx2"}[on]
			if tf != 0 {
				name += "_tanh"
			}
			b.Run("fwd_"+name, func(b *testing.B) {
				geluAVX2(map[bool]int{false: 0, true: 3}[on])
				for i := 0; i < b.N; i++ {
					EWOps["gelu"].F32(o, [][]float32{x}, []float64{tf, 0, 0, 0})
				}
			})
			b.Run("bwd_"+name, func(b *testing.B) {
				geluAVX2(map[bool]int{false: 0, true: 3}[on])
				for i := 0; i < b.N; i++ {
					EWOps["gelu_backward"].F32(o, [][]float32{g, x}, []float64{tf, 0, 0, 0})
				}
			})
		}
	}
}
