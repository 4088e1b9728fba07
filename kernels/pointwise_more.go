package kernels

import "math"

// Pointwise ops of the float/int bit level: nextafter (in the storage dtype's own
// spacing), frexp's mantissa and exponent, gcd/lcm, the bit shifts, round to decimals,
// angle of a real number.

func init() {
	// nextafter: p[0] = the storage dtype code; bfloat16 steps to the neighbouring
	// bfloat16 (the float32 class would step by a float32 ulp and round back).
	defEW("nextafter", 2, func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		bf := DType(p[0]) == BFloat16
		for i := range o {
			if bf {
				o[i] = nextafterBF16(a[i], b[i])
			} else {
				o[i] = math.Nextafter32(a[i], b[i])
			}
		}
	}, func(o []float64, in [][]float64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = math.Nextafter(a[i], b[i])
		}
	}, nil)
	// frexp: x = m * 2^e with 0.5 <= |m| < 1 (m = x, e = 0 for 0, inf and NaN).
	defEW("frexp_mantissa", 1, ewFrexpM[float32], ewFrexpM[float64], nil)
	defEW("frexp_exponent", 1, ewFrexpE[float32], ewFrexpE[float64], nil)
	defEW("gcd", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = gcd(a[i], b[i])
		}
	})
	defEW("lcm", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			g := gcd(a[i], b[i])
			if g == 0 {
				o[i] = 0
				continue
			}
			l := a[i] / g * b[i]
			if l < 0 {
				l = -l
			}
			o[i] = l
		}
	})
	// Shifts: p[0] = the bit width of the storage dtype. torch gives 0 for a shift by
	// the width or more (or a negative one) to the left, and the sign fill to the right.
	defEW("bitwise_left_shift", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		w := int64(p[0])
		for i := range o {
			if s := b[i]; s < 0 || s >= w {
				o[i] = 0
			} else {
				o[i] = int64(uint64(a[i]) << uint(s))
			}
		}
	})
	defEW("bitwise_right_shift", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		w := int64(p[0])
		for i := range o {
			if s := b[i]; s < 0 || s >= w {
				if a[i] < 0 {
					o[i] = -1
				} else {
					o[i] = 0
				}
			} else {
				o[i] = a[i] >> uint(s)
			}
		}
	})
	// round_decimals: p[0] = decimals; torch scales by 10^d (or divides by 10^-d),
	// rounds half to even and scales back, in the compute precision.
	defEW("round_decimals", 1, ewRoundDecimals[float32], ewRoundDecimals[float64], nil)
	// angle of a real number: pi for negatives, 0 otherwise, NaN kept.
	defEW("angle", 1, ewAngle[float32], ewAngle[float64], nil)
}

func nextafterBF16(a, b float32) float32 {
	switch {
	case a != a || b != b:
		return a + b
	case a == b:
		return b
	case a == 0:
		return math.Float32frombits(math.Float32bits(b)&0x80000000 | 1<<16)
	}
	bits := math.Float32bits(a)
	if (a < b) == (a > 0) {
		bits += 1 << 16
	} else {
		bits -= 1 << 16
	}
	return math.Float32frombits(bits)
}

func ewFrexpM[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		m, _ := math.Frexp(float64(a[i]))
		o[i] = T(m)
	}
}

func ewFrexpE[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		x := float64(a[i])
		if math.IsInf(x, 0) || x != x {
			o[i] = 0
			continue
		}
		_, e := math.Frexp(x)
		o[i] = T(e)
	}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	if a < 0 {
		a = -a
	}
	return a
}

func ewRoundDecimals[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	d := int(p[0])
	neg := d < 0
	if neg {
		d = -d
	}
	ten := T(math.Pow(10, float64(d)))
	for i := range o {
		x := a[i]
		if neg {
			o[i] = T(math.RoundToEven(float64(x/ten))) * ten
		} else {
			o[i] = T(math.RoundToEven(float64(x*ten))) / ten
		}
	}
}

func ewAngle[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		switch x := a[i]; {
		case x != x:
			o[i] = x
		case x < 0:
			o[i] = math.Pi
		default:
			o[i] = 0
		}
	}
}

func init() {
	// div_floor_reduced / div_trunc_reduced: p[0] = the storage dtype code (bfloat16 or
	// float16). torch's CPU kernels run c10::div_floor_floating in that dtype, every
	// operation rounding to it; trunc rounds the quotient before truncating.
	defEW("div_floor_reduced", 2, func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		dt := DType(p[0])
		for i := range o {
			o[i] = divFloorRounded(dt, a[i], b[i])
		}
	}, nil, nil)
	defEW("div_trunc_reduced", 2, func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		dt := DType(p[0])
		for i := range o {
			o[i] = float32(math.Trunc(float64(roundTo(dt, a[i]/b[i]))))
		}
	}, nil, nil)
	// Integer power by squaring, wrapping on overflow as C does; negative exponents give
	// 1/a truncated (0 unless |a| == 1), as torch's integer pow.
	defEW("ipow", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = ipow(a[i], b[i])
		}
	})
	// prelu: x > 0 ? x : w x, and its gradients (inputs g, x[, w]).
	defEW("prelu", 2, ewPrelu[float32], ewPrelu[float64], nil)
	defEW("prelu_bwd_input", 3, ewPreluBwdInput[float32], ewPreluBwdInput[float64], nil)
	defEW("prelu_bwd_weight", 2, ewPreluBwdWeight[float32], ewPreluBwdWeight[float64], nil)
}

func divFloorRounded(dt DType, a, b float32) float32 {
	r := func(v float32) float32 { return roundTo(dt, v) }
	if b == 0 {
		return r(a / b)
	}
	mod := r(float32(math.Mod(float64(a), float64(b))))
	div := r(r(a-mod) / b)
	if mod != 0 && (b < 0) != (mod < 0) {
		div = r(div - 1)
	}
	if div == 0 {
		return float32(math.Copysign(0, float64(r(a/b))))
	}
	fd := float32(math.Floor(float64(div)))
	if r(div-fd) > 0.5 {
		fd = r(fd + 1)
	}
	return fd
}

func ipow(a, b int64) int64 {
	if b < 0 {
		switch a {
		case 1:
			return 1
		case -1:
			if b%2 == 0 {
				return 1
			}
			return -1
		}
		return 0
	}
	r := int64(1)
	for b > 0 {
		if b&1 != 0 {
			r *= a
		}
		b >>= 1
		a *= a
	}
	return r
}

func ewPrelu[T flt](o []T, in [][]T, p []float64) {
	x, w := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		if v := x[i]; v > 0 {
			o[i] = v
		} else {
			o[i] = w[i] * v
		}
	}
}

func ewPreluBwdInput[T flt](o []T, in [][]T, p []float64) {
	g, x, w := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	for i := range o {
		if x[i] > 0 {
			o[i] = g[i]
		} else {
			o[i] = w[i] * g[i]
		}
	}
}

func ewPreluBwdWeight[T flt](o []T, in [][]T, p []float64) {
	g, x := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		if x[i] > 0 {
			o[i] = 0
		} else {
			o[i] = x[i] * g[i]
		}
	}
}
