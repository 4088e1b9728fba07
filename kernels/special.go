package kernels

import "math"

// Special functions of torch.special (and aten::i0, digamma, polygamma, igamma...).
// Each is computed in float64 from its published series, asymptotic expansion, integral
// or recurrence and rounded once to the output dtype, so float32 results are within an
// ulp of the true value (torch's own float32 kernels evaluate in float32 and are often
// a few ulps off). Domain edges (zeros, poles, negative arguments, infinities) return
// what torch's CPU kernels return.

func init() {
	for name, f := range map[string]func(float64) float64{
		"digamma":                   digamma,
		"trigamma":                  trigamma,
		"i0":                        func(x float64) float64 { return besselI(0, x, false) },
		"i0e":                       func(x float64) float64 { return besselI(0, x, true) },
		"i1":                        func(x float64) float64 { return besselI(1, x, false) },
		"i1e":                       func(x float64) float64 { return besselI(1, x, true) },
		"bessel_j0":                 besselJ0,
		"bessel_j1":                 besselJ1,
		"bessel_y0":                 besselY0,
		"bessel_y1":                 besselY1,
		"modified_bessel_k0":        func(x float64) float64 { return besselK(0, x, false) },
		"modified_bessel_k1":        func(x float64) float64 { return besselK(1, x, false) },
		"scaled_modified_bessel_k0": func(x float64) float64 { return besselK(0, x, true) },
		"scaled_modified_bessel_k1": func(x float64) float64 { return besselK(1, x, true) },
		"spherical_bessel_j0":       sphericalJ0,
		"airy_ai":                   airyAi,
		"erfcx":                     erfcx,
		"ndtri":                     ndtri,
		"log_ndtr":                  logNdtr,
		"entr":                      entr,
	} {
		defMath(name, f)
	}
	// polygamma: p[0] = n >= 0.
	defEW("polygamma", 1, func(o []float32, in [][]float32, p []float64) {
		a, n := in[0][:len(o)], int(p[0])
		for i := range o {
			o[i] = float32(polygamma(n, float64(a[i])))
		}
	}, func(o []float64, in [][]float64, p []float64) {
		a, n := in[0][:len(o)], int(p[0])
		for i := range o {
			o[i] = polygamma(n, a[i])
		}
	}, nil)
	// mvlgamma: p[0] = p >= 1 (the caller checked the domain).
	defEW("mvlgamma", 1, func(o []float32, in [][]float32, p []float64) {
		a, d := in[0][:len(o)], int(p[0])
		for i := range o {
			o[i] = float32(mvlgamma(float64(a[i]), d))
		}
	}, func(o []float64, in [][]float64, p []float64) {
		a, d := in[0][:len(o)], int(p[0])
		for i := range o {
			o[i] = mvlgamma(a[i], d)
		}
	}, nil)
	defBinMath("zeta", hurwitzZeta)
	defBinMath("igamma", igamma)
	defBinMath("igammac", igammac)
	defXLog("xlog1py", math.Log1p) // elementwise_more.go
}

// ---------------------------------------------------------------- gamma family

// digamma: psi(x), via the reflection formula for x < 0, the recurrence
// psi(x) = psi(x+1) - 1/x up to x >= 10, then the asymptotic (Bernoulli) series.
func digamma(x float64) float64 {
	switch {
	case x != x || math.IsInf(x, 1):
		return x
	case x == 0:
		return math.Copysign(math.Inf(1), -x) // torch: -inf at +0, +inf at -0
	case x < 0:
		if x == math.Trunc(x) {
			return math.NaN() // poles (and -inf)
		}
		// psi(1-x) - psi(x) = pi cot(pi x); the fractional part keeps pi*x exact enough
		_, r := math.Modf(x)
		return digamma(1-x) - math.Pi/math.Tan(math.Pi*r)
	}
	acc := 0.0
	for x < 10 {
		acc -= 1 / x
		x++
	}
	y := 1 / (x * x)
	// sum B_2k / (2k x^2k), k = 1..7
	tail := y * (1.0/12 - y*(1.0/120-y*(1.0/252-y*(1.0/240-y*(1.0/132-y*(691.0/32760-y/12))))))
	return acc + math.Log(x) - 0.5/x - tail
}

// trigamma: psi'(x), reflection psi'(1-x) + psi'(x) = pi^2 / sin^2(pi x) below 1/2,
// recurrence up to x >= 10, then the asymptotic series. Poles give +inf.
func trigamma(x float64) float64 {
	if x != x {
		return x
	}
	if math.IsInf(x, 1) {
		return 0
	}
	if x < 0.5 {
		if math.IsInf(x, -1) {
			return math.NaN()
		}
		if x == math.Trunc(x) {
			return math.Inf(1)
		}
		_, r := math.Modf(x)
		s := math.Sin(math.Pi * r)
		return math.Pi*math.Pi/(s*s) - trigamma(1-x)
	}
	acc := 0.0
	for x < 10 {
		acc += 1 / (x * x)
		x++
	}
	y := 1 / (x * x)
	// 1/x + 1/(2x^2) + sum B_2k / x^(2k+1)
	tail := (1 + 0.5/x + y*(1.0/6-y*(1.0/30-y*(1.0/42-y*(1.0/30-y*(5.0/66-y*(691.0/2730-y*7.0/6))))))) / x
	return acc + tail
}

// polygamma(n, x) = (-1)^(n+1) n! zeta(n+1, x) for n >= 2.
func polygamma(n int, x float64) float64 {
	switch n {
	case 0:
		return digamma(x)
	case 1:
		return trigamma(x)
	}
	if n < 0 {
		return math.NaN()
	}
	lf, _ := math.Lgamma(float64(n) + 1)
	v := math.Exp(lf) * hurwitzZeta(float64(n+1), x)
	if n%2 == 0 {
		v = -v
	}
	return v
}

// Bernoulli numbers B_2k / (2k)!, k = 1..10, for the Euler-Maclaurin tail of zeta.
var bernoulliOverFact = [...]float64{
	1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600, 1.0 / 47900160,
	-691.0 / 1307674368000, 1.0 / 74724249600, -3617.0 / 10670622842880000,
	43867.0 / 5109094217170944000, -174611.0 / 802857662698291200000,
}

// hurwitzZeta: zeta(s, q) = sum_k (q+k)^-s, by direct summation until q+k >= 10 (and
// at least 10 terms), then the Euler-Maclaurin remainder. Domain as torch's zeta: s = 1
// is a pole, s < 1 is NaN, non-positive integer q is a pole, other negative q needs an
// integer s.
func hurwitzZeta(s, q float64) float64 {
	switch {
	case s != s || q != q:
		return math.NaN()
	case s == 1:
		return math.Inf(1)
	case s < 1:
		return math.NaN()
	}
	if q <= 0 {
		if q == math.Floor(q) {
			return math.Inf(1)
		}
		if s != math.Floor(s) {
			return math.NaN()
		}
	}
	if math.IsInf(s, 1) || math.IsInf(q, 1) {
		return math.NaN() // as torch
	}
	sum := 0.0
	a := q
	for k := 0; k < 10 || a < 10; k++ {
		sum += math.Pow(a, -s)
		a++
	}
	// remainder: a^(1-s)/(s-1) + a^-s/2 + sum_j B_2j/(2j)! s(s+1)..(s+2j-2) a^(-s-2j+1)
	as := math.Pow(a, -s)
	rem := a*as/(s-1) + 0.5*as
	fac := s * as / a // s a^(-s-1)
	for j, b := range bernoulliOverFact {
		t := b * fac
		rem += t
		if math.Abs(t) < 1e-17*math.Abs(sum+rem) {
			break
		}
		k := float64(2*j + 1)
		fac *= (s + k) * (s + k + 1) / (a * a)
	}
	return sum + rem
}

// mvlgamma: the multivariate log-gamma, log(pi) d(d-1)/4 + sum_j lgamma(x - j/2).
func mvlgamma(x float64, d int) float64 {
	v := float64(d*(d-1)) / 4 * math.Log(math.Pi)
	for j := 0; j < d; j++ {
		lg, _ := math.Lgamma(x - float64(j)/2)
		v += lg
	}
	return v
}

// igamma/igammac: the regularized lower and upper incomplete gamma functions
// P(a, x) and Q(a, x) = 1 - P: the series of P below x < a+1, the continued
// fraction of Q above (Legendre's, evaluated by the modified Lentz method).
func igamma(a, x float64) float64 {
	if v, ok := igammaEdge(a, x, false); ok {
		return v
	}
	if x < a+1 {
		return gammaSeries(a, x)
	}
	return 1 - gammaCF(a, x)
}

func igammac(a, x float64) float64 {
	if v, ok := igammaEdge(a, x, true); ok {
		return v
	}
	if x < a+1 {
		return 1 - gammaSeries(a, x)
	}
	return gammaCF(a, x)
}

// igammaEdge: torch's values off the interior of the domain (upper selects Q).
func igammaEdge(a, x float64, upper bool) (float64, bool) {
	pq := func(p float64) float64 {
		if upper {
			return 1 - p
		}
		return p
	}
	switch {
	case a != a || x != x:
		return math.NaN(), true
	case x < 0 || a < 0:
		return math.NaN(), true
	case a == 0:
		if x > 0 {
			return pq(1), true
		}
		return math.NaN(), true
	case x == 0:
		return pq(0), true
	case math.IsInf(a, 1):
		if math.IsInf(x, 1) {
			return math.NaN(), true
		}
		return pq(0), true
	case math.IsInf(x, 1):
		return pq(1), true
	}
	return 0, false
}

// gammaPrefix: x^a e^-x / Gamma(a).
func gammaPrefix(a, x float64) float64 {
	lg, _ := math.Lgamma(a)
	return math.Exp(a*math.Log(x) - x - lg)
}

func gammaSeries(a, x float64) float64 {
	// P = x^a e^-x / Gamma(a+1) * sum_k x^k / ((a+1)...(a+k))
	term, sum := 1.0, 1.0
	for k := 1; k < 10000; k++ {
		term *= x / (a + float64(k))
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return gammaPrefix(a, x) * sum / a
}

func gammaCF(a, x float64) float64 {
	// Q = x^a e^-x / Gamma(a) * 1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- ...)))
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return gammaPrefix(a, x) * h
}

// entr: -x log x, 0 at 0, -inf below.
func entr(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 0:
		return -x * math.Log(x)
	case x == 0:
		return 0
	}
	return math.Inf(-1)
}

// ---------------------------------------------------------------- Bessel functions

// Go's J0, J1, Y0, Y1; torch gives NaN at the infinities (and for Y below 0).
func besselJ0(x float64) float64 {
	if math.IsInf(x, 0) {
		return math.NaN()
	}
	return math.J0(x)
}

func besselJ1(x float64) float64 {
	if math.IsInf(x, 0) {
		return math.NaN()
	}
	return math.J1(x)
}

func besselY0(x float64) float64 {
	if x < 0 || math.IsInf(x, 1) {
		return math.NaN()
	}
	return math.Y0(x)
}

func besselY1(x float64) float64 {
	if x < 0 || math.IsInf(x, 1) {
		return math.NaN()
	}
	return math.Y1(x)
}

// besselI: I_nu(x) for nu in {0, 1} (scaled: e^-|x| I_nu(x)). The power series
// sum_k (x/2)^(2k+nu) / (k! (k+nu)!) for |x| <= 30, Hankel's asymptotic expansion
// e^x / sqrt(2 pi x) sum_k (-1)^k a_k(nu) / x^k above. I_1 is odd.
func besselI(nu int, x float64, scaled bool) float64 {
	if x != x {
		return x
	}
	ax := math.Abs(x)
	var v float64 // e^-ax I_nu(ax)
	switch {
	case math.IsInf(ax, 1):
		if scaled {
			return 0 // torch: NaN unscaled, 0 scaled
		}
		return math.NaN()
	case ax <= 30:
		h := ax / 2
		term := 1.0
		if nu == 1 {
			term = h
		}
		sum := term
		q := h * h
		for k := 1; k < 500; k++ {
			term *= q / (float64(k) * float64(k+nu))
			sum += term
			if term < sum*1e-17 {
				break
			}
		}
		if !scaled {
			if nu == 1 && x < 0 {
				return -sum
			}
			return sum
		}
		v = sum * math.Exp(-ax)
	default:
		mu := 4 * float64(nu*nu)
		term, sum := 1.0, 1.0
		for k := 1; k < 200; k++ {
			odd := float64(2*k - 1)
			t := -term * (mu - odd*odd) / (float64(8*k) * ax)
			if math.Abs(t) >= math.Abs(term) {
				break // past the smallest term of the asymptotic series
			}
			term = t
			sum += term
			if math.Abs(term) < 1e-17*math.Abs(sum) {
				break
			}
		}
		v = sum / math.Sqrt(2*math.Pi*ax)
		if !scaled {
			// e^ax in two halves: I_nu is finite a little past where e^ax overflows
			e := math.Exp(ax / 2)
			v = v * e * e
		}
	}
	if nu == 1 && x < 0 {
		v = -v
	}
	return v
}

// besselK: K_nu(x), nu real, x > 0 (scaled: e^x K_nu(x)), from the integral
// K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt by the trapezoidal rule, which for
// this analytic, doubly-exponentially decaying integrand converges geometrically in
// the step: h = 1/16, narrowed to 0.5/sqrt(x) for large x where the integrand is a
// Gaussian of width 1/sqrt(x), gives double precision. K is +inf at 0, NaN below.
func besselK(nu float64, x float64, scaled bool) float64 {
	switch {
	case x != x:
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(1)
	case math.IsInf(x, 1):
		return 0
	}
	h := min(1.0/16, 0.5/math.Sqrt(x))
	// e^(-x (cosh t - 1)) with cosh t - 1 = 2 sinh^2(t/2); stop where it is below 1e-18
	sum := 0.5
	for k := 1; k < 100000; k++ {
		t := float64(k) * h
		sh := math.Sinh(t / 2)
		e := -2 * x * sh * sh
		if e < -42 {
			break
		}
		sum += math.Exp(e) * math.Cosh(nu*t)
	}
	v := sum * h
	if scaled {
		return v
	}
	return v * math.Exp(-x)
}

// sphericalJ0: sin(x)/x, its Taylor series near 0, 0 at the infinities.
func sphericalJ0(x float64) float64 {
	if math.IsInf(x, 0) {
		return 0
	}
	if math.Abs(x) < 0.5 {
		y := x * x
		return 1 - y/6*(1-y/20*(1-y/42*(1-y/72*(1-y/110*(1-y/156)))))
	}
	return math.Sin(x) / x
}

// airyAi: the Airy function Ai(x). Above 1, Ai(x) = sqrt(x/3) K_{1/3}(zeta) / pi with
// zeta = 2/3 x^(3/2); on [-8, 1] the Maclaurin series Ai(0) f(x) + Ai'(0) g(x); below
// -8 the oscillatory asymptotic expansion (DLMF 9.7.9). NaN at the infinities, as torch.
func airyAi(x float64) float64 {
	const ai0, aip0 = 0.355028053887817239260, -0.258819403792806798405
	switch {
	case x != x || math.IsInf(x, 0):
		return math.NaN()
	case x > 1:
		z := 2.0 / 3 * x * math.Sqrt(x)
		if z > 745 {
			return 0
		}
		return math.Sqrt(x/3) * besselK(1.0/3, z, false) / math.Pi
	case x >= -8:
		x3 := x * x * x
		f, g := 1.0, x
		tf, tg := 1.0, x
		for k := 1; k < 200; k++ {
			fk := float64(3 * k)
			tf *= x3 / (fk * (fk - 1))
			tg *= x3 / (fk * (fk + 1))
			f += tf
			g += tg
			if math.Abs(tf) < 1e-18*math.Abs(f) && math.Abs(tg) < 1e-18*math.Abs(g)+1e-300 {
				break
			}
		}
		return ai0*f + aip0*g
	}
	z := -x
	zeta := 2.0 / 3 * z * math.Sqrt(z)
	// u_k = (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k) u_(k-1)
	p, q := 0.0, 0.0
	u, zp := 1.0, 1.0
	for k := 0; k < 40; k++ {
		if k > 0 {
			fk := float64(k)
			u *= (6*fk - 5) * (6*fk - 3) * (6*fk - 1) / ((2*fk - 1) * 216 * fk)
			zp /= zeta
		}
		t := u * zp
		if k%4 >= 2 {
			t = -t
		}
		if k%2 == 0 {
			p += t
		} else {
			q += t
		}
		if math.Abs(t) < 1e-17 {
			break
		}
	}
	ph := zeta - math.Pi/4
	return (math.Cos(ph)*p + math.Sin(ph)*q) / (math.Sqrt(math.Pi) * math.Sqrt(math.Sqrt(z)))
}

// ---------------------------------------------------------------- error-function family

// erfcx: e^(x^2) erfc(x). exp(x^2) * erfc(x) while erfc(x) is representable (Go's erfc
// is accurate relative to its value in the tail), Laplace's continued fraction beyond;
// 2 e^(x^2) - erfcx(-x) for negative x.
func erfcx(x float64) float64 {
	switch {
	case x != x:
		return x
	case x < 0:
		if x < -26.7 {
			return math.Inf(1)
		}
		return 2*math.Exp(x*x) - erfcx(-x)
	case x < 25:
		return math.Exp(x*x) * math.Erfc(x)
	case math.IsInf(x, 1):
		return 0
	}
	// erfc(x) e^(x^2) sqrt(pi) = 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), backwards
	t := x
	for k := 40; k >= 1; k-- {
		t = x + float64(k)/2/t
	}
	return 1 / (t * math.SqrtPi)
}

// ndtr: the standard normal CDF, accurate in the lower tail.
func ndtr(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// ndtri: the inverse of ndtr, from erfinv refined by Newton steps on ndtr (erfinv(2p-1)
// alone loses the relative precision of small p).
func ndtri(p float64) float64 {
	switch {
	case p != p || p < 0 || p > 1:
		return math.NaN()
	case p == 0:
		return math.Inf(-1)
	case p == 1:
		return math.Inf(1)
	case p > 0.5:
		return -ndtri(1 - p) // 1-p is exact here
	}
	x := -math.Sqrt2 * math.Erfinv(1-2*p)
	if math.IsInf(x, 0) || x != x {
		// p below erfinv's resolution: the tail's leading asymptotics as a start
		x = -math.Sqrt(-2 * math.Log(p))
	}
	for i := 0; i < 6; i++ {
		f := ndtr(x) - p
		d := math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
		if d == 0 {
			break
		}
		dx := f / d
		// Halley's correction: ndtr'' = -x ndtr'
		dx /= 1 + x*dx/2
		x -= dx
		if math.Abs(dx) <= 1e-16*math.Abs(x) {
			break
		}
	}
	return x
}

// logNdtr: log(ndtr(x)), through erfcx in the lower tail.
func logNdtr(x float64) float64 {
	t := x / math.Sqrt2
	if x < -1 {
		return math.Log(erfcx(-t)/2) - t*t
	}
	return math.Log1p(-math.Erfc(t) / 2)
}
