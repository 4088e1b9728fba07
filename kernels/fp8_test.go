package kernels

import (
	"math"
	"testing"
)

// Every code decodes to a value that encodes back to the same code (NaNs to the NaN).
func TestFloat8RoundTrip(t *testing.T) {
	for _, d := range []DType{Float8E5M2, Float8E4M3FN} {
		for c := 0; c < 256; c++ {
			v := Float8ToF32(d, uint8(c))
			back := F32ToFloat8(d, v)
			if math.IsNaN(float64(v)) {
				if back&0x7F != 0x7F {
					t.Fatalf("%v code %#x: NaN encodes to %#x", d, c, back)
				}
				continue
			}
			if back != uint8(c) && !(v == 0 && back&0x7F == 0) {
				t.Fatalf("%v code %#x = %v encodes back to %#x", d, c, v, back)
			}
		}
	}
}

func TestFloat8Rounding(t *testing.T) {
	cases := []struct {
		d    DType
		in   float32
		want float32
	}{
		{Float8E4M3FN, 448, 448}, {Float8E4M3FN, 464, 448}, {Float8E4M3FN, 1.0625, 1}, // tie to even
		{Float8E4M3FN, 1.1875, 1.25}, {Float8E4M3FN, -0.3, -0.3125}, {Float8E4M3FN, 0.001953125, 0.001953125},
		{Float8E4M3FN, 0.0009765625, 0}, // half the smallest subnormal: tie to even (zero)
		{Float8E5M2, 57344, 57344}, {Float8E5M2, 60000, 57344}, {Float8E5M2, 1.125, 1}, {Float8E5M2, 1.375, 1.5},
	}
	for _, c := range cases {
		got := Float8ToF32(c.d, F32ToFloat8(c.d, c.in))
		if got != c.want {
			t.Errorf("%v(%v) = %v, want %v", c.d, c.in, got, c.want)
		}
	}
	for _, v := range []float32{470, 480, 1e9, float32(math.Inf(1))} {
		if !math.IsNaN(float64(Float8ToF32(Float8E4M3FN, F32ToFloat8(Float8E4M3FN, v)))) {
			t.Errorf("e4m3fn(%v) should be NaN (no infinities)", v)
		}
	}
	for _, v := range []float32{61440, 70000, 1e30, float32(math.Inf(1))} {
		if got := Float8ToF32(Float8E5M2, F32ToFloat8(Float8E5M2, v)); !math.IsInf(float64(got), 1) {
			t.Errorf("e5m2(%v) = %v, want +Inf", v, got)
		}
	}
}
