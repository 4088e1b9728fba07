package kernels

import "math"

// The classical orthogonal polynomials of torch.special, p(x, n) with the degree n
// truncated to an integer (negative degrees give 0). They are evaluated by their
// three-term recurrences in float64 and rounded once (torch's float32 recurrences lose
// a few ulps to cancellation, so these are the closer to the true value); the Chebyshev
// families switch to their trigonometric closed forms for high degrees inside (-1, 1),
// where the recurrence would accumulate error, and take their exact values at the
// interval ends.

type polyFunc[T flt] func(x T, n int64) T

func defPoly(name string, f64 polyFunc[float64]) {
	defEW(name, 2, func(o []float32, in [][]float32, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = float32(f64(float64(a[i]), degree(float64(b[i]))))
		}
	}, func(o []float64, in [][]float64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			o[i] = f64(a[i], degree(b[i]))
		}
	}, nil)
}

// degree truncates n toward zero as a C cast does; NaN and out-of-range values (which
// the C cast leaves undefined, x86 gives the minimum) are a negative degree.
func degree(n float64) int64 {
	if n != n || n >= 9.2e18 || n <= -9.2e18 {
		return -1
	}
	return int64(n)
}

func init() {
	defPoly("chebyshev_polynomial_t", chebyshevT[float64])
	defPoly("chebyshev_polynomial_u", chebyshevU[float64])
	defPoly("chebyshev_polynomial_v", chebyshevV[float64])
	defPoly("chebyshev_polynomial_w", chebyshevW[float64])
	defPoly("shifted_chebyshev_polynomial_t", shifted(chebyshevT[float64]))
	defPoly("shifted_chebyshev_polynomial_u", shifted(chebyshevU[float64]))
	defPoly("shifted_chebyshev_polynomial_v", shifted(chebyshevV[float64]))
	defPoly("shifted_chebyshev_polynomial_w", shifted(chebyshevW[float64]))
	defPoly("hermite_polynomial_h", hermiteH[float64])
	defPoly("hermite_polynomial_he", hermiteHe[float64])
	defPoly("laguerre_polynomial_l", laguerreL[float64])
	defPoly("legendre_polynomial_p", legendreP[float64])
}

func acosT[T flt](x T) T { return T(math.Acos(float64(x))) }
func cosT[T flt](x T) T  { return T(math.Cos(float64(x))) }
func sinT[T flt](x T) T  { return T(math.Sin(float64(x))) }
func absT[T flt](x T) T  { return T(math.Abs(float64(x))) }
func even(n int64) bool  { return n%2 == 0 }
func signed[T flt](v T, n int64) T {
	if even(n) {
		return v
	}
	return -v
}

// chebRecur runs p_(k+1) = 2x p_k - p_(k-1) from p_0 = 1, p_1 = q up to degree n >= 2.
func chebRecur[T flt](x, q T, n int64) T {
	p := T(1)
	var r T
	for k := int64(2); k <= n; k++ {
		r = (x+x)*q - p
		p, q = q, r
	}
	return r
}

// shifted: p*(x) = p(2x - 1); the shifted families' end values at x = 0 and 1 are the
// unshifted ones at -1 and 1, which 2x - 1 maps exactly.
func shifted[T flt](f polyFunc[T]) polyFunc[T] {
	return func(x T, n int64) T { return f(x+x-1, n) }
}

// T_n(x) = cos(n acos x).
func chebyshevT[T flt](x T, n int64) T {
	switch {
	case n < 0:
		return 0
	case absT(x) == 1:
		if x > 0 {
			return 1
		}
		return signed(T(1), n)
	case n > 6 && absT(x) < 1:
		return cosT(T(n) * acosT(x))
	case n == 0:
		return 1
	case n == 1:
		return x
	}
	return chebRecur(x, x, n)
}

// U_n(x) = sin((n+1) t) / sin t, x = cos t.
func chebyshevU[T flt](x T, n int64) T {
	switch {
	case n < 0:
		return 0
	case absT(x) == 1:
		if x > 0 {
			return T(n + 1)
		}
		return signed(T(n+1), n)
	case n > 8 && absT(x) < 1:
		t := acosT(x)
		if s := sinT(t); s != 0 {
			return sinT(T(n+1)*t) / s
		}
		return T(n+1) * cosT(T(n+1)*t) / x
	case n == 0:
		return 1
	case n == 1:
		return x + x
	}
	return chebRecur(x, x+x, n)
}

// V_n(x) = cos((n+1/2) t) / cos(t/2).
func chebyshevV[T flt](x T, n int64) T {
	switch {
	case n < 0:
		return 0
	case absT(x) == 1:
		if x > 0 {
			return 1
		}
		return signed(T(n+n+1), n)
	case n > 8 && absT(x) < 1:
		t := acosT(x)
		if sinT(t/2) != 1 {
			return cosT((T(n)+0.5)*t) / cosT(t/2)
		}
		return signed(T(n+n+1), n)
	case n == 0:
		return 1
	case n == 1:
		return x + x - 1
	}
	return chebRecur(x, x+x-1, n)
}

// W_n(x) = sin((n+1/2) t) / sin(t/2).
func chebyshevW[T flt](x T, n int64) T {
	switch {
	case n < 0:
		return 0
	case absT(x) == 1:
		if x > 0 {
			return T(n + n + 1)
		}
		return signed(T(1), n)
	case n > 8 && absT(x) < 1:
		t := acosT(x)
		if cosT(t/2) != 1 {
			return sinT((T(n)+0.5)*t) / sinT(t/2)
		}
		if x > 0 {
			return T(n + n + 1)
		}
		return signed(T(1), n)
	case n == 0:
		return 1
	case n == 1:
		return x + x + 1
	}
	return chebRecur(x, x+x+1, n)
}

// Physicists' Hermite: H_(k+1) = 2x H_k - 2k H_(k-1).
func hermiteH[T flt](x T, n int64) T {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return 1
	case n == 1:
		return x + x
	}
	p, q := T(1), x+x
	var r T
	for k := int64(2); k < n+n; k += 2 {
		r = (x+x)*q - T(k)*p
		p, q = q, r
	}
	return r
}

// Probabilists' Hermite: He_(k+1) = x He_k - k He_(k-1).
func hermiteHe[T flt](x T, n int64) T {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return 1
	case n == 1:
		return x
	}
	p, q := T(1), x
	var r T
	for k := int64(1); k < n; k++ {
		r = x*q - T(k)*p
		p, q = q, r
	}
	return r
}

// Laguerre: (k+1) L_(k+1) = (2k+1-x) L_k - k L_(k-1).
func laguerreL[T flt](x T, n int64) T {
	switch {
	case n < 0:
		return 0
	case absT(x) == 0:
		return 1
	case n == 0:
		return 1
	case n == 1:
		return 1 - x
	}
	p, q := T(1), 1-x
	var r T
	for k := int64(1); k < n; k++ {
		r = ((T(k+k)+(1-x))*q - T(k)*p) / T(k+1)
		p, q = q, r
	}
	return r
}

// Legendre: (k+1) P_(k+1) = (2k+1) x P_k - k P_(k-1).
func legendreP[T flt](x T, n int64) T {
	switch {
	case n < 0:
		return 0
	case absT(x) == 1:
		if x > 0 {
			return 1
		}
		return signed(T(1), n)
	case n == 0:
		return 1
	case n == 1:
		return x
	}
	p, q := T(1), x
	var r T
	for k := int64(1); k < n; k++ {
		r = (T(k+k+1)*x*q - T(k)*p) / T(k+1)
		p, q = q, r
	}
	return r
}
