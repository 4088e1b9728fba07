package kernels

import "math"

// remainder (Python-style modulo: the sign of the divisor), fmod (the sign of the
// dividend), and integer floor/trunc division. Integer division by zero is rejected by
// the caller before the op runs (torch raises ZeroDivisionError); a zero divisor that
// reaches the kernel yields 0 instead of a Go panic.
func init() {
	defEW("remainder", 2, ewRemainder[float32], ewRemainder[float64], func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			if b[i] == 0 {
				o[i] = 0
				continue
			}
			r := a[i] % b[i]
			if r != 0 && (r < 0) != (b[i] < 0) {
				r += b[i]
			}
			o[i] = r
		}
	})
	defEW("fmod", 2, ewFmod[float32], ewFmod[float64], func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			if b[i] == 0 {
				o[i] = 0
				continue
			}
			o[i] = a[i] % b[i]
		}
	})
	defEW("idiv_floor", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			if b[i] == 0 {
				o[i] = 0
				continue
			}
			q := a[i] / b[i]
			if a[i]%b[i] != 0 && (a[i] < 0) != (b[i] < 0) {
				q--
			}
			o[i] = q
		}
	})
	defEW("idiv_trunc", 2, nil, nil, func(o []int64, in [][]int64, p []float64) {
		a, b := in[0][:len(o)], in[1][:len(o)]
		for i := range o {
			if b[i] == 0 {
				o[i] = 0
				continue
			}
			o[i] = a[i] / b[i]
		}
	})
}

// fmodOf is the exact floating remainder, except that in the float32 class a quotient
// a/b that overflows float32 gives NaN: torch CPU's vectorized float fmod (which serves
// contiguous float32/bfloat16/float16 tensors) returns NaN there instead of the exact
// remainder.
func fmodOf[T flt](a, b T) T {
	if _, f32 := any(a).(float32); f32 {
		if q := a / b; (q > math.MaxFloat32 || q < -math.MaxFloat32) && !math.IsInf(float64(a), 0) {
			return T(math.NaN())
		}
	}
	return T(math.Mod(float64(a), float64(b)))
}

func ewRemainder[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		r := fmodOf(a[i], b[i])
		if r != 0 && (b[i] < 0) != (r < 0) {
			r += b[i]
		}
		o[i] = r
	}
}

func ewFmod[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	for i := range o {
		o[i] = fmodOf(a[i], b[i])
	}
}
