package kernels

import "math"

// expPoly32 is exp(x) rounded to float32: a float64 evaluation rounded once, accurate to
// ~3e-13 relative, so it equals float32(math.Exp(float64(x))) except within 3e-13 of a
// rounding boundary (then it may be one ulp off). exp(x) = 2^k * e^r, k = round(x/ln 2),
// |r| <= ln2/2, e^r by its degree-10 Taylor polynomial; k is read from the bits of the
// rounded value. softmax_cgo.go evaluates the very same operations in C (vectorized), so
// both give identical bits.
func expPoly32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.72284:
		return float32(math.Inf(1))
	case x < -104:
		return 0
	}
	const (
		log2e    = 1.4426950408889634
		ln2Hi    = 6.93147180369123816490e-01
		ln2Lo    = 1.90821492927058770002e-10
		roundMag = 1 << 52 * 1.5 // adding it rounds to an integer, kept in the low bits
	)
	xd := float64(x)
	kr := xd*log2e + roundMag
	k := int64(math.Float64bits(kr) - math.Float64bits(roundMag))
	kd := kr - roundMag
	r := (xd - kd*ln2Hi) - kd*ln2Lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320+r*(1.0/362880+r*(1.0/3628800))))))))))
	return float32(p * math.Float64frombits(uint64(k+1023)<<52))
}
