package kernels

import "math"

// expF32 is exp(x) rounded to float32: a float64 evaluation rounded once, accurate to
// ~1e-12 relative, so it equals float32(math.Exp(float64(x))) except within 1e-12 of a
// rounding boundary (then it may be one ulp off). exp(x) = 2^(k/32) * e^u with k =
// round(x*32/ln2), |u| <= ln2/64: a 32-entry table and a degree-4 polynomial, a much
// shorter dependency chain than math.Exp's.
func expF32(x float32) float32 {
	const (
		n32      = 32 / math.Ln2
		ln2by32  = math.Ln2 / 32
		roundMag = 1 << 52 * 1.5 // adding and subtracting it rounds to an integer
	)
	switch {
	case x != x:
		return x
	case x > 88.72284:
		return float32(math.Inf(1))
	case x < -104:
		return 0
	}
	z := float64(x) * n32
	kd := (z + roundMag) - roundMag
	u := (z - kd) * ln2by32
	k := int64(kd)
	p := 1 + u*(1+u*(1.0/2+u*(1.0/6+u*(1.0/24))))
	scale := math.Float64frombits(exp2Tab[k&31] + uint64(k>>5)<<52)
	return float32(p * scale)
}

// exp2Tab holds the bits of 2^(j/32).
var exp2Tab = func() (t [32]uint64) {
	for j := range t {
		t[j] = math.Float64bits(math.Exp2(float64(j) / 32))
	}
	return
}()
