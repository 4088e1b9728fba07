package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// bnF32Channel fills channel c ([N][S] rows at stride Sp*C) with a value family: plain
// normal values, a large offset with a small spread, an outlier first element (the one-pass
// moments' shift lands far from the mean), values near float32's range limit (float32
// partial sums overflow), a constant channel, and a NaN.
func bnF32Channel(rng *rand.Rand, kind int, N, S int64, set func(n, i int64, v float32)) {
	for n := int64(0); n < N; n++ {
		for i := int64(0); i < S; i++ {
			z := rng.NormFloat64()
			v := float32(z*2 + 0.5)
			switch kind {
			case 1:
				v = float32(1000 + z*1e-2)
			case 2:
				if n == 0 && i == 0 {
					v = 1e4
				} else {
					v = float32(z)
				}
			case 3:
				v = float32(z * 1e17)
			case 6:
				v = float32(z * 1e22)
			case 4:
				v = 3.25
			case 5:
				if n == N-1 && i == S-1 {
					v = float32(math.NaN())
				}
			}
			set(n, i, v)
		}
	}
}

// The vector (AVX-512 or AVX2) float32 batch-norm kernels (bn_f32_cgo.go) against the same op computed in
// float64: statistics, outputs, running stats and all three gradients, training and eval,
// row lengths around the vector width, padded rows.
func TestBatchNormF32VecMatchesFloat64(t *testing.T) {
	if !bnF32Vec {
		t.Skip("no vector float32 batch-norm kernels")
	}
	rng := rand.New(rand.NewSource(31))
	N, C := int64(5), int64(6)
	for _, S := range []int64{1, 7, 16, 31, 32, 37, 100, 196} {
		for _, pad := range []int64{0, 3} {
			Sp := S + pad
			x32, g32 := make([]float32, N*C*Sp), make([]float32, N*C*Sp)
			for c := int64(0); c < C; c++ {
				bnF32Channel(rng, int(c), N, S, func(n, i int64, v float32) { x32[(n*C+c)*Sp+i] = v })
				gk := 0
				if c == 3 {
					gk = 6
				}
				bnF32Channel(rng, gk, N, S, func(n, i int64, v float32) { g32[(n*C+c)*Sp+i] = v })
			}
			w, b := make([]float32, C), make([]float32, C)
			for c := range w {
				w[c], b[c] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			}
			sizes, strides := []int64{N, C, S}, []int64{C * Sp, Sp, 1}
			for _, training := range []bool{true, false} {
				type result struct{ out, sm, si, rm, rv, gin, gw, gb []float64 }
				run := func(dt DType, saved []float64) result {
					es := int64(dt.Size())
					mk := func(n int64) (Tensor, []byte) {
						buf := make([]byte, n*es+8)
						return Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: dt, Sizes: []int64{n}, Strides: []int64{1}}, buf
					}
					from := func(src []float32, sz, st []int64) Tensor {
						tt, _ := mk(int64(len(src)))
						storeRowT(tt.Ptr, es, dt, f64s(src))
						tt.Sizes, tt.Strides = sz, st
						return tt
					}
					get := func(tt Tensor, n int64) []float64 {
						v := make([]float64, n)
						loadRowT(v, tt.Ptr, es, dt)
						return v
					}
					x, g := from(x32, sizes, strides), from(g32, sizes, strides)
					out, gin := from(make([]float32, N*C*Sp), sizes, strides), from(make([]float32, N*C*Sp), sizes, strides)
					sm, si := from(make([]float32, C), []int64{C}, []int64{1}), from(make([]float32, C), []int64{C}, []int64{1})
					rm, rv := from([]float32{0.1, 0.2, 0.3, -1, 0, 5}, []int64{C}, []int64{1}), from([]float32{1, 2, 3, 1e34, 1e-3, 7}, []int64{C}, []int64{1})
					wt, bt := from(w, []int64{C}, []int64{1}), from(b, []int64{C}, []int64{1})
					gw, gb := from(make([]float32, C), []int64{C}, []int64{1}), from(make([]float32, C), []int64{C}, []int64{1})
					if err := BatchNormForward(out, &sm, &si, x, &wt, &bt, &rm, &rv, training, 0.1, 1e-5); err != nil {
						t.Fatal(err)
					}
					fwdMean, fwdInvstd := get(sm, C), get(si, C)
					if !training {
						sm, si = from([]float32{0.5, -0.5, 1, 0, 2, -3}, []int64{C}, []int64{1}), from([]float32{1, 2, 0.5, 3, 0.25, 1}, []int64{C}, []int64{1})
					} else if saved != nil {
						// the float32 run's saved statistics (rounded to float32, as torch saves
						// them): the gradients are judged on the same inputs
						storeRowT(sm.Ptr, es, dt, saved[:C])
						storeRowT(si.Ptr, es, dt, saved[C:])
					}
					if err := BatchNormBackward(&gin, &gw, &gb, g, x, &wt, &rm, &rv, &sm, &si, training, 1e-5); err != nil {
						t.Fatal(err)
					}
					return result{get(out, N*C*Sp), fwdMean, fwdInvstd, get(rm, C), get(rv, C), get(gin, N*C*Sp), get(gw, C), get(gb, C)}
				}
				got := run(Float32, nil)
				want := run(Float64, append(append([]float64{}, got.sm...), got.si...))
				for c := int64(0); c < C; c++ {
					sd := 1 / want.si[c]
					if training {
						bnClose(t, "mean", c, got.sm[c], want.sm[c], 1e-6*(sd+math.Abs(want.sm[c])))
						bnClose(t, "invstd", c, got.si[c], want.si[c], 1e-5*want.si[c])
						bnClose(t, "running_var", c, got.rv[c], want.rv[c], 1e-5*math.Abs(want.rv[c]))
					}
					bnClose(t, "running_mean", c, got.rm[c], want.rm[c], 1e-6*(sd+math.Abs(want.rm[c])))
					var gs, ga float64
					for n := int64(0); n < N; n++ {
						for i := int64(0); i < S; i++ {
							j := (n*C+c)*Sp + i
							// float32 scale and shift, as torch: x*scale rounds against the shift
							xs := math.Abs(float64(x32[j]) * float64(w[c]) * want.si[c])
							bnClose(t, "output", c, got.out[j], want.out[j], 1e-5*(1+math.Abs(want.out[j])+math.Abs(float64(b[c])))+4e-7*xs)
							gs += math.Abs(want.gin[j])
							ga += math.Abs(float64(g32[j]))
						}
					}
					scale := (gs + ga*math.Abs(want.si[c]*float64(w[c]))) / float64(N*S)
					for n := int64(0); n < N; n++ {
						for i := int64(0); i < S; i++ {
							j := (n*C+c)*Sp + i
							bnClose(t, "grad_input", c, got.gin[j], want.gin[j], 1e-5*(scale+math.Abs(want.gin[j])))
						}
					}
					bnClose(t, "grad_bias", c, got.gb[c], want.gb[c], 1e-6*ga)
					bnClose(t, "grad_weight", c, got.gw[c], want.gw[c], 1e-5*(math.Abs(want.gw[c])+ga))
				}
			}
		}
	}
}

func bnClose(t *testing.T, what string, c int64, got, want, tol float64) {
	t.Helper()
	if math.IsNaN(want) || math.IsInf(want, 0) {
		if !(math.IsNaN(got) && math.IsNaN(want)) && got != want {
			t.Fatalf("channel %d %s: %v, want %v", c, what, got, want)
		}
		return
	}
	if !(math.Abs(got-want) <= tol) {
		t.Fatalf("channel %d %s: %v, want %v (tolerance %v)", c, what, got, want, tol)
	}
}

func f64s(v []float32) []float64 {
	r := make([]float64, len(v))
	for i, x := range v {
		r[i] = float64(x)
	}
	return r
}
