package kernels

import "math"

// The elementwise op table. Formulas follow torch's CPU kernels (aten/src/ATen/native/cpu)
// so results agree to rounding.

// EWOps maps an op name to its implementations.
var EWOps = map[string]*EWOp{}

func defEW(name string, nin int, f32 EWFunc[float32], f64 EWFunc[float64], i64 EWFunc[int64]) {
	EWOps[name] = &EWOp{Name: name, NIn: nin, F32: f32, F64: f64, I64: i64}
}

func b2f[T flt](b bool) T {
	if b {
		return 1
	}
	return 0
}

// ewMaxI64/ewMinI64: maximum/minimum (and fmax/fmin) of integers, which have no NaN.
func ewMaxI64(o []int64, in [][]int64, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = max(a[i], b[i])
	}
}

func ewMinI64(o []int64, in [][]int64, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = min(a[i], b[i])
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func init() {
	// Binary arithmetic. add/sub: p[0] = alpha.
	defEW("add", 2, ewAdd[float32], ewAdd[float64], func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		al := int64(p[0])
		for i := range o {
			o[i] = a[i] + al*b[i]
		}
	})
	defEW("mul", 2, ewMul[float32], ewMul[float64], func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = a[i] * b[i]
		}
	})
	defEW("div", 2, ewDiv[float32], ewDiv[float64], nil)
	defEW("div_trunc", 2, ewDivTrunc[float32], ewDivTrunc[float64], nil)
	defEW("div_floor", 2, ewDivFloor[float32], ewDivFloor[float64], nil)
	defEW("pow", 2, ewPow[float32], ewPow[float64], nil)
	defEW("maximum", 2, ewMaximum[float32], ewMaximum[float64], ewMaxI64)
	defEW("minimum", 2, ewMinimum[float32], ewMinimum[float64], ewMinI64)

	// Comparisons and logical ops: 1/0 in the compute class, stored as bool by the caller's output dtype.
	defCmp("eq", func(a, b float64) bool { return a == b })
	defCmp("ne", func(a, b float64) bool { return a != b })
	defCmp("lt", func(a, b float64) bool { return a < b })
	defCmp("le", func(a, b float64) bool { return a <= b })
	defCmp("gt", func(a, b float64) bool { return a > b })
	defCmp("ge", func(a, b float64) bool { return a >= b })
	defCmp("logical_and", func(a, b float64) bool { return a != 0 && b != 0 })
	defCmp("logical_or", func(a, b float64) bool { return a != 0 || b != 0 })
	defCmp("logical_xor", func(a, b float64) bool { return (a != 0) != (b != 0) })
	defEW("bitwise_and", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = a[i] & b[i]
		}
	})
	defEW("bitwise_or", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = a[i] | b[i]
		}
	})
	defEW("bitwise_xor", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = a[i] ^ b[i]
		}
	})
	// bitwise_not: p[0] != 0 means bool (logical not).
	defEW("bitwise_not", 1, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		if p[0] != 0 {
			for i := range o {
				o[i] = b2i(a[i] == 0)
			}
			return
		}
		for i := range o {
			o[i] = ^a[i]
		}
	})
	defEW("logical_not", 1, ewLogicalNot[float32], ewLogicalNot[float64], func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = b2i(a[i] == 0)
		}
	})

	// Ternary.
	defEW("where", 3, ewWhereF32, ewWhere[float64], func(o []int64, in [][]int64, p []float64) {
		c, a, b := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
		for i := range o {
			if c[i] != 0 {
				o[i] = a[i]
			} else {
				o[i] = b[i]
			}
		}
	})
	defEW("addcmul", 3, ewAddcmul[float32], ewAddcmul[float64], func(o []int64, in [][]int64, p []float64) {
		s, a, b := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
		v := int64(p[0])
		for i := range o {
			o[i] = s[i] + v*a[i]*b[i]
		}
	})
	defEW("addcdiv", 3, ewAddcdiv[float32], ewAddcdiv[float64], nil)
	defEW("lerp", 3, ewLerp[float32], ewLerp[float64], nil)
	// clamp with tensor bounds: in = (x, lo, hi); p[0], p[1] != 0 say whether lo/hi apply.
	defEW("clamp_t", 3, ewClampT[float32], ewClampT[float64], func(o []int64, in [][]int64, p []float64) {
		x, lo, hi := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
		for i := range o {
			v := x[i]
			if p[0] != 0 {
				v = max(v, lo[i])
			}
			if p[1] != 0 {
				v = min(v, hi[i])
			}
			o[i] = v
		}
	})

	// Unary.
	defEW("neg", 1, ewNeg[float32], ewNeg[float64], func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = -a[i]
		}
	})
	defEW("abs", 1, ewAbs[float32], ewAbs[float64], func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			if a[i] < 0 {
				o[i] = -a[i]
			} else {
				o[i] = a[i]
			}
		}
	})
	defEW("sign", 1, ewSign[float32], ewSign[float64], func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = b2i(a[i] > 0) - b2i(a[i] < 0)
		}
	})
	defMath("exp", math.Exp)
	defMath("log", math.Log)
	defMath("log2", math.Log2)
	defMath("log1p", math.Log1p)
	defMath("expm1", math.Expm1)
	defMath("sqrt", math.Sqrt)
	defMath("rsqrt", func(x float64) float64 { return 1 / math.Sqrt(x) })
	defMath("sin", math.Sin)
	defMath("cos", math.Cos)
	defEW("erf", 1, func(o []float32, in [][]float32, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = float32(erfF32(float64(a[i])))
		}
	}, func(o []float64, in [][]float64, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = math.Erf(a[i])
		}
	}, nil)
	defMath("floor", math.Floor)
	defMath("ceil", math.Ceil)
	defMath("trunc", math.Trunc)
	defMath("round", math.RoundToEven)
	defMath("tanh", math.Tanh)
	defEW("reciprocal", 1, ewReciprocal[float32], ewReciprocal[float64], nil)
	defEW("sigmoid", 1, ewSigmoid[float32], ewSigmoid[float64], nil)
	defEW("relu", 1, ewRelu[float32], ewRelu[float64], func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = max(a[i], 0)
		}
	})
	defEW("silu", 1, ewSilu[float32], ewSilu[float64], nil)
	defEW("gelu", 1, ewGeluF32, ewGelu[float64], nil)
	defEW("leaky_relu", 1, ewLeakyReluF32, ewLeakyRelu[float64], nil)
	defEW("elu", 1, ewElu[float32], ewElu[float64], nil)
	defEW("softplus", 1, ewSoftplus[float32], ewSoftplus[float64], nil)
	defEW("pow_scalar", 1, ewPowScalar[float32], ewPowScalar[float64], nil)
	defEW("isnan", 1, ewIsNaN[float32], ewIsNaN[float64], func(o []int64, in [][]int64, p []float64) {
		clear(o)
	})
	defEW("isfinite", 1, ewIsFinite[float32], ewIsFinite[float64], func(o []int64, in [][]int64, p []float64) {
		for i := range o {
			o[i] = 1
		}
	})
	// clamp with scalar bounds: p = (lo, hi, hasLo, hasHi).
	defEW("clamp", 1, ewClampF32, ewClamp[float64], func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		lo, hi := int64(p[0]), int64(p[1])
		for i := range o {
			v := a[i]
			if p[2] != 0 {
				v = max(v, lo)
			}
			if p[3] != 0 {
				v = min(v, hi)
			}
			o[i] = v
		}
	})

	// Activation backward: in = (grad, x) unless noted.
	defEW("threshold_backward", 2, ewThresholdBwdF32, ewThresholdBwdF64, func(o []int64, in [][]int64, p []float64) {
		g, x := in[0][:len(o)], in[1][:len(o)]
		th := int64(p[0])
		for i := range o {
			if x[i] <= th {
				o[i] = 0
			} else {
				o[i] = g[i]
			}
		}
	})
	defEW("sigmoid_backward", 2, ewSigmoidBwd[float32], ewSigmoidBwd[float64], nil)
	defEW("tanh_backward", 2, ewTanhBwd[float32], ewTanhBwd[float64], nil)
	defEW("gelu_backward", 2, ewGeluBwdF32, ewGeluBwd[float64], nil)
	defEW("silu_backward", 2, ewSiluBwd[float32], ewSiluBwd[float64], nil)
	defEW("leaky_relu_backward", 2, ewLeakyReluBwdF32, ewLeakyReluBwd[float64], nil)
	defEW("elu_backward", 2, ewEluBwd[float32], ewEluBwd[float64], nil)
	defEW("softplus_backward", 2, ewSoftplusBwd[float32], ewSoftplusBwd[float64], nil)
	defEW("hardtanh_backward", 2, ewHardtanhBwdF32, ewHardtanhBwd[float64], nil)
	// mse_backward: in = (grad, x, target); p[0] = scale (2 or 2/n).
	defEW("mse_backward", 3, ewMseBwd[float32], ewMseBwd[float64], nil)
	// sqdiff: (a - b)^2, the elementwise part of mse_loss.
	defEW("sqdiff", 2, ewSqdiff[float32], ewSqdiff[float64], nil)
	installFast()
}

func defCmp(name string, f func(a, b float64) bool) {
	// The comparison closures are small; specialise the common ones as tight loops.
	var f32 EWFunc[float32]
	var f64 EWFunc[float64]
	var i64 EWFunc[int64]
	switch name {
	case "eq":
		f32, f64, i64 = ewCmpEq[float32], ewCmpEq[float64], ewCmpEq[int64]
	case "lt":
		f32, f64, i64 = ewCmpLt[float32], ewCmpLt[float64], ewCmpLt[int64]
	case "gt":
		f32, f64, i64 = ewCmpGt[float32], ewCmpGt[float64], ewCmpGt[int64]
	default:
		f32 = func(o []float32, in [][]float32, p []float64) {
			a, b := in[0][:len(o)], in[1][:len(o)]
			for i := range o {
				o[i] = b2f[float32](f(float64(a[i]), float64(b[i])))
			}
		}
		f64 = func(o []float64, in [][]float64, p []float64) {
			a, b := in[0][:len(o)], in[1][:len(o)]
			for i := range o {
				o[i] = b2f[float64](f(a[i], b[i]))
			}
		}
		// int64 -> float64 is exact up to 2^53; compare exactly for the ordered ones.
		i64 = func(o []int64, in [][]int64, p []float64) {
			a, b := in[0][:len(o)], in[1][:len(o)]
			for i := range o {
				var r bool
				switch name {
				case "ne":
					r = a[i] != b[i]
				case "le":
					r = a[i] <= b[i]
				case "ge":
					r = a[i] >= b[i]
				default:
					r = f(float64(a[i]), float64(b[i]))
				}
				o[i] = b2i(r)
			}
		}
	}
	if fast := cmpF32[name]; fast != nil {
		f32 = fast
	}
	defEW(name, 2, f32, f64, i64)
}

type ordered interface {
	~float32 | ~float64 | ~int64
}

// cmpF32 holds branch-free float32 comparisons (1 or 0 through sel32): comparisons of
// random data mispredict half their branches.
var cmpF32 = map[string]EWFunc[float32]{
	"eq": func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = sel32(a[i] == b[i], 1, 0)
		}
	},
	"ne": func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = sel32(a[i] != b[i], 1, 0)
		}
	},
	"lt": func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = sel32(a[i] < b[i], 1, 0)
		}
	},
	"le": func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = sel32(a[i] <= b[i], 1, 0)
		}
	},
	"gt": func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = sel32(a[i] > b[i], 1, 0)
		}
	},
	"ge": func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = sel32(a[i] >= b[i], 1, 0)
		}
	},
}

func ewCmpEq[T ordered](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		if a[i] == b[i] {
			o[i] = 1
		} else {
			o[i] = 0
		}
	}
}

func ewCmpLt[T ordered](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		if a[i] < b[i] {
			o[i] = 1
		} else {
			o[i] = 0
		}
	}
}

func ewCmpGt[T ordered](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		if a[i] > b[i] {
			o[i] = 1
		} else {
			o[i] = 0
		}
	}
}

func defMath(name string, f func(float64) float64) {
	defEW(name, 1, func(o []float32, in [][]float32, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = float32(f(float64(a[i])))
		}
	}, func(o []float64, in [][]float64, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = f(a[i])
		}
	}, nil)
}

func ewAdd[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	al := T(p[0])
	if al == 1 {
		for i := range o {
			o[i] = a[i] + b[i]
		}
		return
	}
	// torch's vectorized add is a fused multiply-add.
	for i := range o {
		o[i] = T(math.FMA(float64(al), float64(b[i]), float64(a[i])))
	}
}

func ewMul[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = a[i] * b[i]
	}
}

func ewDiv[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = a[i] / b[i]
	}
}

func ewDivTrunc[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = T(math.Trunc(float64(a[i] / b[i])))
	}
}

// divFloor is c10::div_floor_floating.
func divFloor[T flt](a, b T) T {
	if b == 0 {
		return a / b
	}
	mod := T(math.Mod(float64(a), float64(b)))
	div := (a - mod) / b
	if mod != 0 && (b < 0) != (mod < 0) {
		div -= 1
	}
	var fd T
	if div != 0 {
		fd = T(math.Floor(float64(div)))
		if div-fd > 0.5 {
			fd += 1
		}
	} else {
		fd = T(math.Copysign(0, float64(a/b)))
	}
	return fd
}

func ewDivFloor[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = divFloor(a[i], b[i])
	}
}

func ewPow[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = T(math.Pow(float64(a[i]), float64(b[i])))
	}
}

// ewPowScalar: p[0] is the exponent; the special cases are torch's pow_tensor_scalar_optimized_kernel.
func ewPowScalar[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	e := p[0]
	switch e {
	case 2:
		for i := range o {
			o[i] = a[i] * a[i]
		}
	case 3:
		for i := range o {
			o[i] = a[i] * a[i] * a[i]
		}
	case 0.5:
		for i := range o {
			o[i] = T(math.Sqrt(float64(a[i])))
		}
	case -0.5:
		for i := range o {
			o[i] = 1 / T(math.Sqrt(float64(a[i])))
		}
	case -1:
		for i := range o {
			o[i] = 1 / a[i]
		}
	case -2:
		for i := range o {
			o[i] = 1 / (a[i] * a[i])
		}
	default:
		et := float64(T(e))
		for i := range o {
			o[i] = T(math.Pow(float64(a[i]), et))
		}
	}
}

func ewMaximum[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		x, y := a[i], b[i]
		switch {
		case x != x:
			o[i] = x
		case y != y:
			o[i] = y
		case x > y:
			o[i] = x
		default:
			o[i] = y
		}
	}
}

func ewMinimum[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		x, y := a[i], b[i]
		switch {
		case x != x:
			o[i] = x
		case y != y:
			o[i] = y
		case x < y:
			o[i] = x
		default:
			o[i] = y
		}
	}
}

func ewLogicalNot[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = b2f[T](a[i] == 0)
	}
}

// sel32 is c ? a : b without a data-dependent branch: on random conditions a branch
// mispredicts half the time, which made these loops 5-10x slower than plain arithmetic.
func sel32(c bool, a, b float32) float32 {
	m := uint32(0)
	if c {
		m = ^uint32(0)
	}
	return math.Float32frombits(math.Float32bits(a)&m | math.Float32bits(b)&^m)
}

func ewWhereF32(o []float32, in [][]float32, p []float64) {
	c, a, b := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	for i := range o {
		o[i] = sel32(c[i] != 0, a[i], b[i])
	}
}

func ewWhere[T flt](o []T, in [][]T, p []float64) {
	c, a, b := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	for i := range o {
		if c[i] != 0 {
			o[i] = a[i]
		} else {
			o[i] = b[i]
		}
	}
}

func ewAddcmul[T flt](o []T, in [][]T, p []float64) {
	s, a, b := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	v := T(p[0])
	for i := range o {
		o[i] = s[i] + v*a[i]*b[i]
	}
}

func ewAddcdiv[T flt](o []T, in [][]T, p []float64) {
	s, a, b := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	v := T(p[0])
	for i := range o {
		o[i] = s[i] + v*a[i]/b[i]
	}
}

// ewLerp is torch's lerp: weight < 0.5 ? self + w*(end-self) : end - (end-self)*(1-w).
func ewLerp[T flt](o []T, in [][]T, p []float64) {
	s, e, w := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	for i := range o {
		d := e[i] - s[i]
		wi := w[i]
		// Fused multiply-adds, as torch's vectorized lerp (fmadd / fnmadd).
		if wi < 0.5 && wi > -0.5 {
			o[i] = T(math.FMA(float64(wi), float64(d), float64(s[i])))
		} else {
			o[i] = T(math.FMA(-float64(d), float64(1-wi), float64(e[i])))
		}
	}
}

func ewClampT[T flt](o []T, in [][]T, p []float64) {
	x, lo, hi := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	for i := range o {
		v := x[i]
		if v != v {
			o[i] = v
			continue
		}
		if p[0] != 0 {
			if l := lo[i]; l != l || v < l {
				v = l
			}
		}
		if p[1] != 0 {
			if h := hi[i]; h != h || v > h {
				v = h
			}
		}
		o[i] = v
	}
}

// ewClampF32 is ewClamp with branch-free selects when both bounds are numbers (NaN x stays
// NaN: it compares false both ways); NaN bounds take the generic loop.
func ewClampF32(o []float32, in [][]float32, p []float64) {
	lo, hi := float32(p[0]), float32(p[1])
	if lo != lo || hi != hi {
		ewClamp(o, in, p)
		return
	}
	a := in[0][:len(o)]
	hasLo, hasHi := p[2] != 0, p[3] != 0
	switch {
	case hasLo && hasHi:
		for i := range o {
			v := sel32(a[i] < lo, lo, a[i])
			o[i] = sel32(v > hi, hi, v)
		}
	case hasLo:
		for i := range o {
			o[i] = sel32(a[i] < lo, lo, a[i])
		}
	case hasHi:
		for i := range o {
			o[i] = sel32(a[i] > hi, hi, a[i])
		}
	default:
		copy(o, a)
	}
}

func ewClamp[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	lo, hi := T(p[0]), T(p[1])
	hasLo, hasHi := p[2] != 0, p[3] != 0
	for i := range o {
		v := a[i]
		if v != v {
			o[i] = v
			continue
		}
		if hasLo && (v < lo || lo != lo) {
			v = lo
		}
		if hasHi && (v > hi || hi != hi) {
			v = hi
		}
		o[i] = v
	}
}

func ewNeg[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = -a[i]
	}
}

func ewAbs[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = T(math.Abs(float64(a[i])))
	}
}

// ewSign is (x > 0) - (x < 0), as torch's CPU kernel: 0 for zeros and NaN.
func ewSign[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		x := a[i]
		switch {
		case x > 0:
			o[i] = 1
		case x < 0:
			o[i] = -1
		default:
			o[i] = 0
		}
	}
}

func ewReciprocal[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = 1 / a[i]
	}
}

func ewSigmoid[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = 1 / (1 + T(math.Exp(float64(-a[i]))))
	}
}

// ewRelu uses max, which is branch-free (a data-dependent branch mispredicts on half of
// random inputs: 8x slower) and has torch's semantics: NaN propagates, -0 gives +0.
func ewRelu[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = max(a[i], 0)
	}
}

func ewSilu[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		x := a[i]
		o[i] = x / (1 + T(math.Exp(float64(-x))))
	}
}

const (
	sqrt1_2   = 0.70710678118654752440
	twoSqrtPi = 1.12837916709551257390 // M_2_SQRTPI
	geluKappa = 0.044715
)

// ewGelu: p[0] != 0 selects the tanh approximation.
func ewGelu[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	if p[0] != 0 {
		kBeta := T(math.Sqrt2 * twoSqrtPi * 0.5)
		kKappa := T(geluKappa)
		for i := range o {
			x := a[i]
			inner := kBeta * (x + kKappa*x*x*x)
			o[i] = T(0.5) * x * (T(1) + T(math.Tanh(float64(inner))))
		}
		return
	}
	for i := range o {
		x := a[i]
		o[i] = x * T(0.5) * (T(1) + T(math.Erf(float64(x*T(sqrt1_2)))))
	}
}

func ewGeluBwd[T flt](o []T, in [][]T, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	if p[0] != 0 {
		kBeta := T(math.Sqrt2 * twoSqrtPi * 0.5)
		kKappa := T(geluKappa)
		for i := range o {
			x := a[i]
			xSq := x * x
			xCube := xSq * x
			inner := kBeta * (x + kKappa*xCube)
			th := T(math.Tanh(float64(inner)))
			left := T(0.5) * x
			right := T(1) + th
			leftD := T(0.5) * right
			rightD := left * (T(1) - th*th) * kBeta * (T(1) + T(3)*kKappa*xSq)
			o[i] = g[i] * (leftD + rightD)
		}
		return
	}
	kAlpha := T(sqrt1_2)
	kBeta := T(twoSqrtPi * sqrt1_2 * 0.5)
	for i := range o {
		x := a[i]
		cdf := T(0.5) * (T(1) + T(math.Erf(float64(x*kAlpha))))
		pdf := kBeta * T(math.Exp(float64(T(-0.5)*x*x)))
		o[i] = g[i] * (cdf + x*pdf)
	}
}

func ewLeakyReluF32(o []float32, in [][]float32, p []float64) {
	a := in[0][:len(o)]
	s := float32(p[0])
	for i := range o {
		x := a[i]
		o[i] = sel32(x > 0, x, x*s)
	}
}

func ewLeakyRelu[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	s := T(p[0])
	for i := range o {
		if x := a[i]; x > 0 {
			o[i] = x
		} else {
			o[i] = x * s
		}
	}
}

// ewElu: p = (alpha, scale, input_scale).
func ewElu[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	negcoef, poscoef, negipt := T(p[0]*p[1]), T(p[1]), T(p[2])
	for i := range o {
		if x := a[i]; x <= 0 {
			o[i] = T(math.Expm1(float64(x*negipt))) * negcoef
		} else {
			o[i] = x * poscoef
		}
	}
}

// ewEluBwd: in = (grad, self_or_result); p = (alpha, scale, input_scale, is_result).
func ewEluBwd[T flt](o []T, in [][]T, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	negcoef, poscoef, negipt := T(p[0]*p[1]), T(p[1]), T(p[2])
	isResult := p[3] != 0
	for i := range o {
		x := a[i]
		switch {
		case x > 0:
			o[i] = g[i] * poscoef
		case isResult:
			o[i] = g[i] * negipt * (x + negcoef)
		default:
			o[i] = g[i] * negipt * negcoef * T(math.Exp(float64(x*negipt)))
		}
	}
}

// ewSoftplus: p = (beta, threshold).
func ewSoftplus[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	beta, th := T(p[0]), T(p[1])
	for i := range o {
		x := a[i]
		if x*beta > th {
			o[i] = x
		} else {
			o[i] = T(math.Log1p(math.Exp(float64(x*beta)))) / beta
		}
	}
}

func ewSoftplusBwd[T flt](o []T, in [][]T, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	beta, th := T(p[0]), T(p[1])
	for i := range o {
		x := a[i]
		z := T(math.Exp(float64(x * beta)))
		if x*beta > th {
			o[i] = g[i]
		} else {
			o[i] = g[i] * z / (z + 1)
		}
	}
}

func ewHardtanhBwdF32(o []float32, in [][]float32, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	lo, hi := float32(p[0]), float32(p[1])
	for i := range o {
		x := a[i]
		o[i] = sel32(x <= lo || x >= hi, 0, g[i])
	}
}

func ewHardtanhBwd[T flt](o []T, in [][]T, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	lo, hi := T(p[0]), T(p[1])
	for i := range o {
		if x := a[i]; x <= lo || x >= hi {
			o[i] = 0
		} else {
			o[i] = g[i]
		}
	}
}

func ewIsNaN[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = b2f[T](a[i] != a[i])
	}
}

func ewIsFinite[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		x := a[i]
		o[i] = b2f[T](x == x && x-x == 0)
	}
}

// threshold_backward: grad where x > th, else 0 (NaN x keeps grad, as torch). The select is
// a bit mask so the loop has no data-dependent branch (8x faster on random signs).
func ewThresholdBwdF32(o []float32, in [][]float32, p []float64) {
	g, x := in[0][:len(o)], in[1][:len(o)]
	th := float32(p[0])
	for i := range o {
		keep := uint32(0)
		if !(x[i] <= th) {
			keep = ^uint32(0)
		}
		o[i] = math.Float32frombits(math.Float32bits(g[i]) & keep)
	}
}

func ewThresholdBwdF64(o []float64, in [][]float64, p []float64) {
	g, x := in[0][:len(o)], in[1][:len(o)]
	th := p[0]
	for i := range o {
		keep := uint64(0)
		if !(x[i] <= th) {
			keep = ^uint64(0)
		}
		o[i] = math.Float64frombits(math.Float64bits(g[i]) & keep)
	}
}

func ewSigmoidBwd[T flt](o []T, in [][]T, p []float64) {
	g, y := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = g[i] * (1 - y[i]) * y[i]
	}
}

func ewTanhBwd[T flt](o []T, in [][]T, p []float64) {
	g, y := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = g[i] * (1 - y[i]*y[i])
	}
}

func ewSiluBwd[T flt](o []T, in [][]T, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		x := a[i]
		s := 1 / (1 + T(math.Exp(float64(-x))))
		o[i] = g[i] * s * (1 + x*(1-s))
	}
}

func ewLeakyReluBwdF32(o []float32, in [][]float32, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	s := float32(p[0])
	for i := range o {
		o[i] = sel32(a[i] > 0, g[i], g[i]*s)
	}
}

func ewLeakyReluBwd[T flt](o []T, in [][]T, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	s := T(p[0])
	for i := range o {
		if a[i] > 0 {
			o[i] = g[i]
		} else {
			o[i] = g[i] * s
		}
	}
}

func ewMseBwd[T flt](o []T, in [][]T, p []float64) {
	g, x, y := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	s := T(p[0])
	for i := range o {
		o[i] = s * (x[i] - y[i]) * g[i]
	}
}

func ewSqdiff[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		d := a[i] - b[i]
		o[i] = d * d
	}
}

// erf for the float32 kernels: piecewise degree-5 Taylor expansions about the midpoints
// of |x| in steps of 1/32 up to 6 (erf rounds to 1 beyond), an odd Taylor series at 0
// below 1/16 so tiny arguments keep their relative accuracy. Absolute error is about
// 3e-13 (float64 arithmetic), far below float32's half-ULP, so the rounded float32 result
// matches math.Erf's except on the rare ties within that margin (1 ULP then).
const (
	erfTabStep = 32
	erfTabMax  = 6
	erfTabN    = erfTabStep * erfTabMax
)

var erfTab [erfTabN][6]float64

func init() {
	c := 2 / math.Sqrt(math.Pi)
	fact := [6]float64{1, 1, 2, 6, 24, 120}
	for i := range erfTab {
		m := (float64(i) + 0.5) / erfTabStep
		e := c * math.Exp(-m*m)
		// f^(n+1)(m) = c (-1)^n H_n(m) exp(-m^2), H the physicists' Hermite polynomials.
		h := [5]float64{1, 2 * m}
		for n := 1; n < 4; n++ {
			h[n+1] = 2*m*h[n] - 2*float64(n)*h[n-1]
		}
		erfTab[i][0] = math.Erf(m)
		sign := 1.0
		for k := 1; k < 6; k++ {
			erfTab[i][k] = sign * h[k-1] * e / fact[k]
			sign = -sign
		}
	}
}

// erfF32 is erf(x) in float64 to ~3e-13 absolute, for results rounded to float32.
func erfF32(x float64) float64 {
	y := math.Abs(x)
	var r float64
	switch {
	case y < 1.0/16:
		y2 := y * y
		r = y * (1.1283791670955126 + y2*(-0.37612638903183754+y2*(0.11283791670955126+
			y2*(-0.026866170645131252+y2*0.005223977625442188))))
	case y < erfTabMax:
		i := int(y * erfTabStep)
		t := y - (float64(i)+0.5)/erfTabStep
		k := &erfTab[i]
		r = k[0] + t*(k[1]+t*(k[2]+t*(k[3]+t*(k[4]+t*k[5]))))
	case y >= erfTabMax:
		r = 1
	default: // NaN
		return x
	}
	if math.Signbit(x) {
		return -r
	}
	return r
}

func ewGeluF32(o []float32, in [][]float32, p []float64) {
	if p[0] != 0 {
		ewGelu(o, in, p)
		return
	}
	a := in[0][:len(o)]
	for i := range o {
		x := a[i]
		o[i] = x * 0.5 * (1 + float32(erfF32(float64(x*sqrt1_2))))
	}
}

func ewGeluBwdF32(o []float32, in [][]float32, p []float64) {
	if p[0] != 0 {
		ewGeluBwd(o, in, p)
		return
	}
	g, a := in[0][:len(o)], in[1][:len(o)]
	const kAlpha = float32(sqrt1_2)
	const kBeta = float32(twoSqrtPi * sqrt1_2 * 0.5)
	for i := range o {
		x := a[i]
		cdf := 0.5 * (1 + float32(erfF32(float64(x*kAlpha))))
		pdf := kBeta * float32(math.Exp(float64(-0.5*x*x)))
		o[i] = g[i] * (cdf + x*pdf)
	}
}
