package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// The C float32 kernels against float64 references: transcendental ones within a few
// float32 ULPs (plus torch's own erf approximation error for gelu), the arithmetic ones
// bit for bit against the Go loops.

func fmInputs() []float32 {
	r := rand.New(rand.NewSource(3))
	x := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-30, -1e-30, 1e-8, 3e-5, 0.49999, 0.5, 0.50001,
		20, -20, 88, 88.7, 89, 100, -87, -88, -100, -103, -104, -200, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1.4e-45}
	for i := 0; i < 20000; i++ {
		x = append(x, float32(r.NormFloat64()*3), float32(r.NormFloat64()*30), float32(r.Float64()-0.5))
	}
	return x
}

func ulpDiff(a, b float32) float64 {
	if a == b || (a != a && b != b) {
		return 0
	}
	if a != a || b != b || math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) {
		return math.Inf(1)
	}
	ulp := math.Nextafter32(float32(math.Abs(float64(b))), float32(math.Inf(1))) - float32(math.Abs(float64(b)))
	return math.Abs(float64(a)-float64(b)) / float64(ulp)
}

// expF32 is exp rounded to float32, as the float32 kernels see it (inf above 88.7).
func expF32(x float32) float64 { return float64(float32(math.Exp(float64(x)))) }

func runF32(t *testing.T, name string, p []float64, ins ...[]float32) []float32 {
	n := len(ins[0])
	o := make([]float32, n)
	in := make([][]float32, len(ins))
	copy(in, ins)
	// the engine hands kernels chunks; call directly with the whole slice too
	EWOps[name].F32(o, in, append(p, 0, 0, 0, 0))
	return o
}

func TestFastMathUnary(t *testing.T) {
	x := fmInputs()
	g := make([]float32, len(x))
	for i := range g {
		g[i] = float32(math.Sin(float64(i)))
	}
	erfAS := func(v float64) float64 { return math.Erf(v) }
	cases := []struct {
		name string
		p    []float64
		ins  [][]float32
		ref  func(i int) float64
		ulps float64
		abs  float64
	}{
		{"exp", nil, [][]float32{x}, func(i int) float64 { return math.Exp(float64(x[i])) }, 2, 0},
		// torch's formulas: exp(-x) overflows to inf below x = -88.7, giving 0
		{"sigmoid", nil, [][]float32{x}, func(i int) float64 { return 1 / (1 + expF32(-x[i])) }, 3, 0},
		{"silu", nil, [][]float32{x}, func(i int) float64 { v := float64(x[i]); return v / (1 + expF32(-x[i])) }, 3, 0},
		{"tanh", nil, [][]float32{x}, func(i int) float64 { return math.Tanh(float64(x[i])) }, 3, 0},
		{"gelu", []float64{0}, [][]float32{x}, func(i int) float64 {
			v := float64(x[i])
			return v * 0.5 * (1 + erfAS(v*sqrt1_2))
		}, 4, 1.5e-7},
		{"gelu", []float64{1}, [][]float32{x}, func(i int) float64 {
			v := float64(x[i])
			return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
		}, 8, 1e-7},
		{"gelu_backward", []float64{0}, [][]float32{g, x}, func(i int) float64 {
			v := float64(x[i])
			cdf := 0.5 * (1 + math.Erf(v*sqrt1_2))
			return float64(g[i]) * (cdf + v*math.Exp(-0.5*v*v)/math.Sqrt(2*math.Pi))
		}, 8, 2e-7},
		{"erf", nil, [][]float32{x}, func(i int) float64 { return math.Erf(float64(x[i])) }, 1, 0},
		{"softplus", []float64{1, 20}, [][]float32{x}, func(i int) float64 {
			v := float64(x[i])
			if v > 20 {
				return v
			}
			return math.Log1p(expF32(x[i]))
		}, 3, 0},
		{"softplus", []float64{2, 5}, [][]float32{x}, func(i int) float64 {
			v := float64(x[i])
			if float32(x[i]*2) > 5 {
				return v
			}
			return math.Log1p(expF32(x[i]*2)) / 2
		}, 3, 0},
		{"elu", []float64{1, 1, 1}, [][]float32{x}, func(i int) float64 {
			if v := float64(x[i]); v > 0 {
				return v
			}
			return math.Expm1(float64(x[i]))
		}, 3, 0},
		{"elu", []float64{0.5, 1.0507, 2}, [][]float32{x}, func(i int) float64 {
			if v := float64(x[i]); v > 0 {
				return v * float64(float32(1.0507))
			}
			return math.Expm1(float64(x[i]*2)) * float64(float32(0.5*1.0507))
		}, 3, 0},
		{"elu_backward", []float64{0.5, 1.0507, 2, 0}, [][]float32{g, x}, func(i int) float64 {
			if v := float64(x[i]); v > 0 {
				return float64(g[i] * float32(1.0507))
			}
			return float64(g[i]) * 2 * float64(float32(0.5*1.0507)) * math.Exp(float64(x[i]*2))
		}, 6, 0},
		{"softplus_backward", []float64{1, 20}, [][]float32{g, x}, func(i int) float64 {
			if x[i] > 20 {
				return float64(g[i])
			}
			z := expF32(x[i])
			return float64(g[i]) * z / (z + 1)
		}, 4, 0},
		{"silu_backward", nil, [][]float32{g, x}, func(i int) float64 {
			v := float64(x[i])
			s := 1 / (1 + expF32(-x[i]))
			return float64(g[i]) * s * (1 + v*(1-s))
		}, 8, 1e-7},
	}
	for _, c := range cases {
		got := runF32(t, c.name, c.p, c.ins...)
		bad := 0
		for i := range got {
			want := c.ref(i)
			w32 := float32(want)
			if math.IsNaN(want) {
				if got[i] == got[i] {
					t.Errorf("%s%v(%g) = %g, want NaN", c.name, c.p, x[i], got[i])
				}
				continue
			}
			if ulpDiff(got[i], w32) > c.ulps && math.Abs(float64(got[i])-want) > c.abs*math.Max(1, math.Abs(float64(x[i]))) {
				if bad++; bad < 5 {
					t.Errorf("%s%v(%g) = %g, want %g (%.1f ulp)", c.name, c.p, x[i], got[i], want, ulpDiff(got[i], w32))
				}
			}
		}
	}
}

func TestFastMathExactOps(t *testing.T) {
	x := fmInputs()
	n := len(x)
	y, z, c := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range y {
		y[i] = x[(i*7+3)%n]
		z[i] = x[(i*13+5)%n] + 0.25
		if i%3 == 0 {
			c[i] = 1
		}
	}
	cases := []struct {
		name string
		p    []float64
		ins  [][]float32
		ref  EWFunc[float32]
	}{
		{"add", []float64{1}, [][]float32{x, y}, ewAdd[float32]},
		{"mul", nil, [][]float32{x, y}, ewMul[float32]},
		{"div", nil, [][]float32{x, z}, ewDiv[float32]},
		{"where", nil, [][]float32{c, x, y}, ewWhere[float32]},
		{"relu", nil, [][]float32{x}, ewRelu[float32]},
		{"sqrt", nil, [][]float32{x}, func(o []float32, in [][]float32, p []float64) {
			for i, v := range in[0] {
				o[i] = float32(math.Sqrt(float64(v)))
			}
		}},
		{"threshold_backward", []float64{0.5}, [][]float32{y, x}, ewThresholdBwdF32},
		{"addcdiv", []float64{-0.1}, [][]float32{x, y, z}, ewAddcdiv[float32]},
		{"addcmul", []float64{0.3}, [][]float32{x, y, z}, ewAddcmul[float32]},
		{"sigmoid_backward", nil, [][]float32{x, y}, ewSigmoidBwd[float32]},
		{"tanh_backward", nil, [][]float32{x, y}, ewTanhBwd[float32]},
	}
	for _, cs := range cases {
		got := runF32(t, cs.name, cs.p, cs.ins...)
		want := make([]float32, n)
		cs.ref(want, cs.ins, append(cs.p, 0, 0, 0, 0))
		bad := 0
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				if bad++; bad < 5 {
					t.Errorf("%s at %d (%g): got %g, want %g", cs.name, i, x[i], got[i], want[i])
				}
			}
		}
	}
	// add with alpha and lerp fuse the multiply-add in one rounding.
	got := runF32(t, "add", []float64{-0.3}, x, y)
	for i := range got {
		w := float32(math.FMA(float64(float32(-0.3)), float64(y[i]), float64(x[i])))
		if ulpDiff(got[i], w) > 1 {
			t.Fatalf("add alpha at %d: got %g, want %g", i, got[i], w)
		}
	}
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(i%5)*0.3 - 0.4
	}
	got = runF32(t, "lerp", nil, x, y, w)
	for i := range got {
		d := y[i] - x[i]
		var want float32
		if math.Abs(float64(w[i])) < 0.5 {
			want = float32(math.FMA(float64(w[i]), float64(d), float64(x[i])))
		} else {
			want = float32(math.FMA(-float64(d), float64(1-w[i]), float64(y[i])))
		}
		if ulpDiff(got[i], want) > 1 {
			t.Fatalf("lerp at %d: got %g, want %g", i, got[i], want)
		}
	}
	// in place: the output is the first input
	a := append([]float32(nil), x...)
	EWOps["mul"].F32(a, [][]float32{a, y}, []float64{0, 0})
	for i := range a {
		if v := x[i] * y[i]; math.Float32bits(a[i]) != math.Float32bits(v) && v == v {
			t.Fatalf("in-place mul at %d: got %g, want %g", i, a[i], v)
		}
	}
}

// where with a broadcast bool (and uint8) condition, as masked_fill sends it: rows long
// enough for the C conversion and a short tail.
func TestWhereMaskConversion(t *testing.T) {
	for _, dt := range []DType{Bool, Uint8} {
		const rows, cols = 5, 1000
		mask := make([]uint8, cols)
		for i := range mask {
			mask[i] = uint8(i % 3 % 2)
			if dt == Uint8 && i%7 == 0 {
				mask[i] = 200
			}
		}
		x := make([]float32, rows*cols)
		for i := range x {
			x[i] = float32(i)
		}
		v := float32(-7)
		o := make([]float32, rows*cols)
		sz := []int64{rows, cols}
		c := Tensor{Ptr: unsafe.Pointer(&mask[0]), DType: dt, Sizes: sz, Strides: []int64{0, 1}}
		val := Tensor{Ptr: unsafe.Pointer(&v), DType: Float32, Sizes: sz, Strides: []int64{0, 0}}
		xt := Tensor{Ptr: unsafe.Pointer(&x[0]), DType: Float32, Sizes: sz, Strides: []int64{cols, 1}}
		ot := Tensor{Ptr: unsafe.Pointer(&o[0]), DType: Float32, Sizes: sz, Strides: []int64{cols, 1}}
		if err := Elementwise(EWOps["where"], Float32, ot, []Tensor{c, val, xt}, nil); err != nil {
			t.Fatal(err)
		}
		for i := range o {
			want := x[i]
			if mask[i%cols] != 0 {
				want = v
			}
			if o[i] != want {
				t.Fatalf("%v: element %d = %v, want %v", dt, i, o[i], want)
			}
		}
	}
}

// Broadcast layouts through F32Rows (row blocks in one call) against the same call row by
// row (F32Rows cleared): identical bits, including odometer carries and worker splits.
func TestF32RowsMatchesRowByRow(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	mk := func(sizes, full []int64) Tensor {
		n := int64(1)
		for _, s := range sizes {
			n *= s
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		st := make([]int64, len(sizes))
		acc := int64(1)
		for i := len(sizes) - 1; i >= 0; i-- {
			st[i] = acc
			if sizes[i] == 1 {
				st[i] = 0
			}
			acc *= sizes[i]
		}
		return Tensor{Ptr: unsafe.Pointer(&x[0]), DType: Float32, Sizes: full, Strides: st}
	}
	for _, full := range [][]int64{{7, 33, 65}, {64, 50, 130}, {3, 4, 5, 6}} {
		d := len(full)
		b1 := append([]int64{1}, full[1:]...)
		b2 := append(append([]int64{}, full[:d-2]...), 1, full[d-1])
		for _, c := range []struct {
			op string
			p  []float64
		}{{"add", []float64{1}}, {"add", []float64{0.5}}, {"mul", nil}, {"where", nil}, {"gelu", []float64{0}},
			{"lerp", nil}, {"addcdiv", []float64{0.3}}, {"threshold_backward", []float64{0.1}}} {
			op := EWOps[c.op]
			ins := []Tensor{mk(full, full), mk(b1, full), mk(b2, full)}[:op.NIn]
			got, want := mk(full, full), mk(full, full)
			if err := Elementwise(op, Float32, got, ins, c.p); err != nil {
				t.Fatal(err)
			}
			saved := op.F32Rows
			op.F32Rows = nil
			err := Elementwise(op, Float32, want, ins, c.p)
			op.F32Rows = saved
			if err != nil {
				t.Fatal(err)
			}
			g := unsafe.Slice((*uint32)(got.Ptr), got.Numel())
			w := unsafe.Slice((*uint32)(want.Ptr), want.Numel())
			for i := range g {
				if g[i] != w[i] {
					t.Fatalf("%s%v %v: element %d differs: %#x vs %#x", c.op, c.p, full, i, g[i], w[i])
				}
			}
		}
	}
}
