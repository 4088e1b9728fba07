package kernels

import "math"

// The two 8-bit float formats PyTorch stores (torch.float8_e5m2 and torch.float8_e4m3fn),
// converted from float32 the way PyTorch's CPU casts round them: to nearest, ties to even.
// e5m2 is IEEE-like (infinities, NaN) and overflows to infinity; e4m3fn has no infinities,
// its only NaN is S.1111.111, and anything that rounds past 448 becomes that NaN.
const (
	Float8E5M2   DType = 23
	Float8E4M3FN DType = 24
)

// IsFloat8 reports the 8-bit float dtypes (stored as one byte, computed as float32).
func (d DType) IsFloat8() bool { return d == Float8E5M2 || d == Float8E4M3FN }

type fp8Format struct {
	mbits   uint  // mantissa bits
	bias    int   // exponent bias
	ovfCode uint8 // the first code past the largest finite value: infinity or the NaN
	nanCode uint8
}

var (
	fmtE5M2   = fp8Format{mbits: 2, bias: 15, ovfCode: 0x7C, nanCode: 0x7F}
	fmtE4M3FN = fp8Format{mbits: 3, bias: 7, ovfCode: 0x7F, nanCode: 0x7F}
)

func (f fp8Format) encode(v float32) uint8 {
	var sign uint8
	if math.Signbit(float64(v)) {
		sign = 0x80
	}
	a := math.Abs(float64(v))
	switch {
	case math.IsNaN(a):
		return sign | f.nanCode
	case math.IsInf(a, 0):
		return sign | f.ovfCode
	case a == 0:
		return sign
	}
	minNormalExp := 1 - f.bias
	frac, exp := math.Frexp(a) // a = frac * 2^exp, frac in [0.5, 1)
	e := exp - 1               // a = (2*frac) * 2^e, 2*frac in [1, 2)
	var code int
	if e < minNormalExp {
		// Subnormal: integer multiples of 2^(minNormalExp - mbits); a result of 1<<mbits
		// is the smallest normal number, which has that very code.
		code = int(math.RoundToEven(math.Ldexp(a, int(f.mbits)-minNormalExp)))
	} else {
		m := math.RoundToEven(math.Ldexp(2*frac, int(f.mbits))) // in [2^mbits, 2^(mbits+1)]
		if m == float64(int(1)<<(f.mbits+1)) {
			m /= 2
			e++
		}
		if e+f.bias > 31 { // far past the range: keep the shift below from wrapping
			return sign | f.ovfCode
		}
		code = (e+f.bias)<<f.mbits | (int(m) - 1<<f.mbits)
	}
	if code >= int(f.ovfCode) {
		// Rounded past the largest finite value: infinity (e5m2) or the NaN (e4m3fn).
		return sign | f.ovfCode
	}
	return sign | uint8(code)
}

func (f fp8Format) decode(b uint8) float32 {
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	b &= 0x7F
	if b == f.nanCode || (f.ovfCode != f.nanCode && b > f.ovfCode) {
		return float32(math.NaN())
	}
	if f.ovfCode != f.nanCode && b == f.ovfCode {
		return float32(math.Inf(int(sign)))
	}
	e := int(b >> f.mbits)
	m := float64(b & (1<<f.mbits - 1))
	if e == 0 {
		return float32(sign * math.Ldexp(m, 1-f.bias-int(f.mbits)))
	}
	return float32(sign * math.Ldexp(1+m/float64(int(1)<<f.mbits), e-f.bias))
}

func fp8Fmt(d DType) fp8Format {
	if d == Float8E5M2 {
		return fmtE5M2
	}
	return fmtE4M3FN
}

// F32ToFloat8 converts a float32 to the 8-bit format d, as PyTorch's CPU cast does.
func F32ToFloat8(d DType, v float32) uint8 { return fp8Fmt(d).encode(v) }

// Float8ToF32 widens an 8-bit float of format d exactly.
func Float8ToF32(d DType, b uint8) float32 { return fp8Fmt(d).decode(b) }
