package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// The elementwise engine's operand paths: broadcast scalars of every dtype (filled once
// into pooled buffers), strided operands, the int64 and float64 classes, and large calls
// that may split over workers, each against a plain per-element reference.

func scalarOf[T any](v T, dt DType, sizes []int64) Tensor {
	p := new(T)
	*p = v
	return Tensor{Ptr: unsafe.Pointer(p), DType: dt, Sizes: sizes, Strides: make([]int64, len(sizes))}
}

func TestEWBroadcastScalarOperands(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	sizes := []int64{5, 1000} // several chunks
	x := randF32(r, 5000)
	xt := tensorOf(x, Float32, sizes, []int64{1000, 1})
	cases := []struct {
		name string
		s    Tensor
		v    float32
	}{
		{"f64", scalarOf(2.7, Float64, sizes), float32(2.7)},
		{"i64", scalarOf(int64(-3), Int64, sizes), -3},
		{"i32", scalarOf(int32(7), Int32, sizes), 7},
		{"bf16", scalarOf(F32ToBF16(1.5), BFloat16, sizes), 1.5},
		{"f16", scalarOf(F32ToF16(0.25), Float16, sizes), 0.25},
		{"f32", scalarOf(float32(-0.5), Float32, sizes), -0.5},
	}
	for _, c := range cases {
		for _, transposed := range []bool{false, true} {
			out := make([]float32, 5000)
			ot := tensorOf(out, Float32, sizes, []int64{1000, 1})
			xin := xt
			if transposed { // output and input column-major: the layout path
				ot = tensorOf(out, Float32, sizes, []int64{1, 5})
				xin = tensorOf(x, Float32, sizes, []int64{1, 5})
			}
			if err := Elementwise(EWOps["mul"], Float32, ot, []Tensor{xin, c.s}, []float64{1, 0, 0, 0}); err != nil {
				t.Fatal(err)
			}
			for i := range out {
				if want := x[i] * c.v; math.Float32bits(out[i]) != math.Float32bits(want) {
					t.Fatalf("%s transposed=%v: out[%d] = %v, want %v", c.name, transposed, i, out[i], want)
				}
			}
		}
	}
	// A pooled buffer that held the broadcast 2.7, then another call's converted operand:
	// broadcasting 2.7 again must refill it.
	d := make([]float64, 5000)
	for i := range d {
		d[i] = float64(i)
	}
	out := make([]float32, 5000)
	ot := tensorOf(out, Float32, sizes, []int64{1000, 1})
	for k, in := range []Tensor{cases[0].s, tensorOf(d, Float64, sizes, []int64{1000, 1}), cases[0].s} {
		if err := Elementwise(EWOps["mul"], Float32, ot, []Tensor{xt, in}, []float64{1, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		for i := range out {
			want := x[i] * float32(2.7)
			if k == 1 {
				want = x[i] * float32(d[i])
			}
			if out[i] != want {
				t.Fatalf("call %d: out[%d] = %v, want %v", k, i, out[i], want)
			}
		}
	}
}

// An output that overwrites the broadcast value: the value is read once per chunk, as the
// engine always did.
func TestEWScalarAliasedByOutput(t *testing.T) {
	n := 3000
	buf := make([]float32, n)
	for i := range buf {
		buf[i] = float32(i)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(2*i + 1)
	}
	want := append([]float32(nil), buf...)
	for lo := 0; lo < n; lo += ewChunk {
		v := want[0]
		for i := lo; i < min(lo+ewChunk, n); i++ {
			want[i] = x[i] + v
		}
	}
	s := Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: Float32, Sizes: []int64{int64(n)}, Strides: []int64{0}}
	if err := Elementwise(EWOps["add"], Float32, tensorOf(buf, Float32, []int64{int64(n)}, []int64{1}),
		[]Tensor{tensorOf(x, Float32, []int64{int64(n)}, []int64{1}), s}, []float64{1, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		if buf[i] != want[i] {
			t.Fatalf("out[%d] = %v, want %v", i, buf[i], want[i])
		}
	}
}

func TestEWIntAndDoubleClasses(t *testing.T) {
	n := 2500
	a := make([]int32, 2*n)
	for i := range a {
		a[i] = int32(i*7 - 3000)
	}
	out := make([]int64, n)
	// int32 input with stride 2, a float64 scalar truncated to 2
	err := Elementwise(EWOps["add"], Int64, tensorOf(out, Int64, []int64{int64(n)}, []int64{1}),
		[]Tensor{tensorOf(a, Int32, []int64{int64(n)}, []int64{2}), scalarOf(2.7, Float64, []int64{int64(n)})},
		[]float64{1, 0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if want := int64(a[2*i]) + 2; out[i] != want {
			t.Fatalf("int64 class: out[%d] = %d, want %d", i, out[i], want)
		}
	}
	r := rand.New(rand.NewSource(4))
	d := make([]float64, n)
	for i := range d {
		d[i] = r.NormFloat64()
	}
	od := make([]float64, n)
	err = Elementwise(EWOps["mul"], Float64, tensorOf(od, Float64, []int64{int64(n)}, []int64{1}),
		[]Tensor{tensorOf(d, Float64, []int64{int64(n)}, []int64{1}), scalarOf(float32(0.1), Float32, []int64{int64(n)})},
		[]float64{1, 0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	for i := range od {
		if want := d[i] * float64(float32(0.1)); od[i] != want {
			t.Fatalf("float64 class: out[%d] = %v, want %v", i, od[i], want)
		}
	}
}

func TestEWLargeFlatMatchesReference(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, name := range []string{"add", "gelu"} {
		n := 300000
		x, y := randF32(r, n), randF32(r, n)
		ins := []Tensor{tensorOf(x, Float32, []int64{int64(n)}, []int64{1})}
		if EWOps[name].NIn == 2 {
			ins = append(ins, tensorOf(y, Float32, []int64{int64(n)}, []int64{1}))
		}
		out := make([]float32, n)
		p := []float64{1, 0, 0, 0}
		if err := Elementwise(EWOps[name], Float32, tensorOf(out, Float32, []int64{int64(n)}, []int64{1}), ins, p); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, n)
		in := [][]float32{x, y}[:EWOps[name].NIn]
		for lo := 0; lo < n; lo += ewChunk {
			hi := min(lo+ewChunk, n)
			sub := make([][]float32, len(in))
			for k := range in {
				sub[k] = in[k][lo:hi]
			}
			EWOps[name].F32(want[lo:hi], sub, p)
		}
		for i := range out {
			if math.Float32bits(out[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: out[%d] = %v, want %v", name, i, out[i], want[i])
			}
		}
	}
}

func TestFillLayouts(t *testing.T) {
	f := make([]float32, 3*4)
	for i := range f {
		f[i] = -1
	}
	// every other column of a 3x4: strided rows
	if err := Fill(tensorOf(f, Float32, []int64{3, 2}, []int64{4, 2}), 2.5, 0, false); err != nil {
		t.Fatal(err)
	}
	for i, v := range f {
		want := float32(-1)
		if i%2 == 0 {
			want = 2.5
		}
		if v != want {
			t.Fatalf("strided fill: f[%d] = %v, want %v", i, v, want)
		}
	}
	b := make([]uint16, 1001)
	if err := Fill(tensorOf(b, BFloat16, []int64{7, 11, 13}, []int64{143, 13, 1}), 1.0/3, 0, false); err != nil {
		t.Fatal(err)
	}
	for i, v := range b {
		if v != F32ToBF16(float32(1.0/3)) {
			t.Fatalf("bf16 fill: b[%d] = %#x", i, v)
		}
	}
	for _, v := range []int64{0, -2, 1 << 40} {
		x := make([]int64, 777)
		x[0] = 5
		if err := Fill(tensorOf(x, Int64, []int64{777}, []int64{1}), 0, v, true); err != nil {
			t.Fatal(err)
		}
		for i := range x {
			if x[i] != v {
				t.Fatalf("int64 fill %d: x[%d] = %d", v, i, x[i])
			}
		}
	}
	u := make([]uint8, 33)
	if err := Fill(tensorOf(u, Bool, []int64{33}, []int64{1}), 0, 7, true); err != nil {
		t.Fatal(err)
	}
	for i := range u {
		if u[i] != 1 {
			t.Fatalf("bool fill: u[%d] = %d", i, u[i])
		}
	}
	h := make([]uint16, 6)
	if err := Fill(tensorOf(h, Float16, []int64{2, 3}, []int64{1, 2}), 65504, 0, false); err != nil {
		t.Fatal(err)
	}
	for i := range h {
		if h[i] != 0x7bff {
			t.Fatalf("f16 fill (transposed): h[%d] = %#x", i, h[i])
		}
	}
}
