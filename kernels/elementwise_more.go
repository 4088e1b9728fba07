package kernels

import "math"

// More elementwise ops: the activations of MobileNet-style models (hardswish, hardsigmoid,
// mish and their gradients), shrinkage, infinity tests, and the trigonometric, hyperbolic
// and two-operand float functions. Formulas follow torch's CPU kernels
// (aten/src/ATen/native/cpu/Activation.cpp, UnaryOpsKernel.cpp, BinaryOpsKernel.cpp);
// float32 and bfloat16 compute in float32 where torch does, the library functions in
// float64 rounded once (within torch's own 1-ulp vector math).

func init() {
	defEW("isposinf", 1, ewIsInfSign[float32](1), ewIsInfSign[float64](1), ewAllZero)
	defEW("isneginf", 1, ewIsInfSign[float32](-1), ewIsInfSign[float64](-1), ewAllZero)
	defEW("isinf", 1, ewIsInfSign[float32](0), ewIsInfSign[float64](0), ewAllZero)
	defEW("signbit", 1, ewSignbit[float32], ewSignbit[float64], func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = b2i(a[i] < 0)
		}
	})

	defEW("hardswish", 1, ewHardswish[float32], ewHardswish[float64], nil)
	defEW("hardsigmoid", 1, ewHardsigmoid[float32], ewHardsigmoid[float64], nil)
	defEW("hardswish_backward", 2, ewHardswishBwd[float32], ewHardswishBwd[float64], nil)
	defEW("hardsigmoid_backward", 2, ewHardsigmoidBwd[float32], ewHardsigmoidBwd[float64], nil)
	defEW("mish", 1, ewMish[float32], ewMish[float64], nil)
	defEW("mish_backward", 2, ewMishBwd[float32], ewMishBwd[float64], nil)
	// p[0] = lambda
	defEW("hardshrink", 1, ewHardshrink[float32], ewHardshrink[float64], nil)
	defEW("softshrink", 1, ewSoftshrink[float32], ewSoftshrink[float64], nil)
	defEW("shrink_backward", 2, ewShrinkBwd[float32], ewShrinkBwd[float64], nil)
	// p = (threshold, value)
	defEW("threshold", 1, ewThreshold[float32], ewThreshold[float64], func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		th, v := int64(p[0]), int64(p[1])
		for i := range o {
			if a[i] <= th {
				o[i] = v
			} else {
				o[i] = a[i]
			}
		}
	})

	for name, f := range map[string]func(float64) float64{
		"tan": math.Tan, "asin": math.Asin, "acos": math.Acos, "atan": math.Atan,
		"sinh": math.Sinh, "cosh": math.Cosh, "asinh": math.Asinh, "acosh": math.Acosh,
		"atanh": math.Atanh, "exp2": math.Exp2, "log10": math.Log10, "erfc": math.Erfc,
		"erfinv": math.Erfinv, "cbrt": math.Cbrt,
		"lgamma": func(x float64) float64 { v, _ := math.Lgamma(x); return v },
		"sinc": func(x float64) float64 {
			if x == 0 {
				return 1
			}
			px := math.Pi * x
			return math.Sin(px) / px
		},
	} {
		defMath(name, f)
	}
	// Scaling ops torch computes in the tensor's own type (x * (pi/180) rounded once).
	defEW("deg2rad", 1, ewScaleConst[float32](math.Pi/180), ewScaleConst[float64](math.Pi/180), nil)
	defEW("rad2deg", 1, ewScaleConst[float32](180/math.Pi), ewScaleConst[float64](180/math.Pi), nil)
	defEW("frac", 1, ewFrac[float32], ewFrac[float64], nil)

	defBinMath("atan2", math.Atan2)
	defBinMath("hypot", math.Hypot)
	defBinMath("copysign", math.Copysign)
	defBinMath("logaddexp", logaddexp)
	defBinMath("logaddexp2", func(a, b float64) float64 {
		if math.IsInf(a, 0) && a == b {
			return a
		}
		m := math.Max(a, b)
		return m + math.Log2(1+math.Exp2(-math.Abs(a-b)))
	})
	// xlogy: p[0] = the storage dtype code; bfloat16/float16 round log(y) to that dtype
	// before the product, as torch's CPU kernel computes in the reduced type.
	defXLog("xlogy", math.Log)
	defEW("fmax", 2, ewFMaxMin[float32](true), ewFMaxMin[float64](true), ewMaxI64)
	defEW("fmin", 2, ewFMaxMin[float32](false), ewFMaxMin[float64](false), ewMinI64)
	defEW("heaviside", 2, ewHeaviside[float32], ewHeaviside[float64], func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			switch {
			case a[i] == 0:
				o[i] = b[i]
			case a[i] > 0:
				o[i] = 1
			default:
				o[i] = 0
			}
		}
	})
}

func ewAllZero(o []int64, in [][]int64, p []float64) { clear(o) }

// ewIsInfSign: sign 1 tests +inf, -1 tests -inf, 0 either.
func ewIsInfSign[T flt](sign int) EWFunc[T] {
	return func(o []T, in [][]T, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = b2f[T](math.IsInf(float64(a[i]), sign))
		}
	}
}

func ewSignbit[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = b2f[T](math.Signbit(float64(a[i])))
	}
}

func ewHardswish[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		x := a[i]
		o[i] = x * min(max(x+3, 0), 6) / 6
	}
}

func ewHardsigmoid[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = min(max(a[i]+3, 0), 6) / 6
	}
}

func ewHardswishBwd[T flt](o []T, in [][]T, p []float64) {
	g, x := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		switch v := x[i]; {
		case v < -3:
			o[i] = 0
		case v <= 3:
			o[i] = g[i] * (v/3 + 0.5)
		default:
			o[i] = g[i]
		}
	}
}

func ewHardsigmoidBwd[T flt](o []T, in [][]T, p []float64) {
	g, x := in[0][:len(o)], in[1][:len(o)]
	sixth := T(1) / 6
	for i := range o {
		if v := x[i]; v > -3 && v < 3 {
			o[i] = g[i] * sixth
		} else {
			o[i] = 0
		}
	}
}

func ewMish[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		x := a[i]
		o[i] = x * T(math.Tanh(float64(T(math.Log1p(float64(T(math.Exp(float64(x)))))))))
	}
}

func ewMishBwd[T flt](o []T, in [][]T, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		x := a[i]
		sig := 1 / (1 + T(math.Exp(float64(-x))))
		ts := T(math.Tanh(float64(T(math.Log1p(float64(T(math.Exp(float64(x)))))))))
		o[i] = g[i] * (ts + x*sig*(1-ts*ts))
	}
}

func ewHardshrink[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	l := T(p[0])
	for i := range o {
		if x := a[i]; x >= -l && x <= l {
			o[i] = 0
		} else {
			o[i] = x
		}
	}
}

func ewSoftshrink[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	l := T(p[0])
	for i := range o {
		switch x := a[i]; {
		case x > l:
			o[i] = x - l
		case x < -l:
			o[i] = x + l
		default:
			o[i] = 0 * x // NaN stays NaN
		}
	}
}

// ewShrinkBwd is hardshrink's and softshrink's gradient: zero inside [-lambda, lambda].
func ewShrinkBwd[T flt](o []T, in [][]T, p []float64) {
	g, a := in[0][:len(o)], in[1][:len(o)]
	l := T(p[0])
	for i := range o {
		if x := a[i]; x >= -l && x <= l {
			o[i] = 0
		} else {
			o[i] = g[i]
		}
	}
}

func ewThreshold[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	th, v := T(p[0]), T(p[1])
	for i := range o {
		if x := a[i]; x <= th {
			o[i] = v
		} else {
			o[i] = x
		}
	}
}

func ewScaleConst[T flt](c float64) EWFunc[T] {
	return func(o []T, in [][]T, p []float64) {
		a := in[0][:len(o)]
		k := T(c)
		for i := range o {
			o[i] = a[i] * k
		}
	}
}

func ewFrac[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		x := a[i]
		o[i] = x - T(math.Trunc(float64(x)))
	}
}

func logaddexp(a, b float64) float64 {
	if math.IsInf(a, 0) && a == b {
		return a
	}
	m := math.Max(a, b)
	return m + math.Log1p(math.Exp(-math.Abs(a-b)))
}

// defBinMath defines a two-operand float op computed in float64 and rounded once.
func defBinMath(name string, f func(a, b float64) float64) {
	defEW(name, 2, func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = float32(f(float64(a[i]), float64(b[i])))
		}
	}, func(o []float64, in [][]float64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = f(a[i], b[i])
		}
	}, nil)
}

// ewFMaxMin is fmax (isMax) or fmin: NaN only when both are NaN (unlike maximum/minimum).
func ewFMaxMin[T flt](isMax bool) EWFunc[T] {
	return func(o []T, in [][]T, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			x, y := a[i], b[i]
			switch {
			case x != x:
				o[i] = y
			case y != y:
				o[i] = x
			case isMax:
				o[i] = max(x, y)
			default:
				o[i] = min(x, y)
			}
		}
	}
}

// defXLog defines x * logf(y) (xlogy, xlog1py): 0 where x == 0 unless y is NaN. p[0] is the
// storage dtype code: bfloat16/float16 round logf(y) to that dtype before the product, as
// torch's CPU kernels compute in the reduced type.
func defXLog(name string, logf func(float64) float64) {
	defEW(name, 2, func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		dt := DType(p[0])
		for i := range o {
			x, y := a[i], b[i]
			switch {
			case y != y:
				o[i] = y
			case x == 0:
				o[i] = 0
			default:
				o[i] = x * roundTo(dt, float32(logf(float64(y))))
			}
		}
	}, func(o []float64, in [][]float64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			x, y := a[i], b[i]
			switch {
			case y != y:
				o[i] = y
			case x == 0:
				o[i] = 0
			default:
				o[i] = x * logf(y)
			}
		}
	}, nil)
}

func ewHeaviside[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		switch x := a[i]; {
		case x == 0:
			o[i] = b[i]
		case x != x:
			o[i] = x
		case x > 0:
			o[i] = 1
		default:
			o[i] = 0
		}
	}
}

func init() {
	// nan_to_num: p = (nan, posinf, neginf), already in the tensor's dtype's range.
	defEW("nan_to_num", 1, ewNanToNum[float32], ewNanToNum[float64], nil)
}

func ewNanToNum[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	nan, pos, neg := T(p[0]), T(p[1]), T(p[2])
	for i := range o {
		switch x := a[i]; {
		case x != x:
			o[i] = nan
		case math.IsInf(float64(x), 1):
			o[i] = pos
		case math.IsInf(float64(x), -1):
			o[i] = neg
		default:
			o[i] = x
		}
	}
}
