package kernels

import "math"

// BF16ToF32 widens a bfloat16 bit pattern exactly.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds to nearest-even and quiets NaNs, bit-exact with c10::BFloat16.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN
		return 0x7fc0
	}
	return uint16((u + 0x7fff + ((u >> 16) & 1)) >> 16)
}

// RoundBF16 rounds a float32 to the nearest bfloat16 value, returned as float32.
func RoundBF16(f float32) float32 { return BF16ToF32(F32ToBF16(f)) }

// F16ToF32 widens an IEEE binary16 bit pattern exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: value = man * 2^-24
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// F32ToF16 rounds to nearest-even (IEEE binary16), as c10::Half does.
func F32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	a := u & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7e00
	case a >= 0x477ff000: // rounds to >= 65520: overflow to inf
		return sign | 0x7c00
	case a >= 0x38800000: // normal half
		mant := a & 0x7fffff
		exp := int32(a>>23) - 127 + 15
		h := uint32(exp)<<10 | mant>>13
		rem := mant & 0x1fff
		if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	case a >= 0x33000000: // subnormal half (>= 2^-25 rounds to at least the smallest subnormal)
		mant := a&0x7fffff | 0x800000
		shift := uint32(126 - int32(a>>23)) // exponent distance to 2^-14, plus 13
		h := mant >> (shift)
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	return sign
}
