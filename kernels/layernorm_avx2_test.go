package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// lnCase runs LayerNormForward and LayerNormBackward on float32 [M, D] rows (row stride
// ld >= D) and returns out, mean, rstd, grad_input, grad_weight, grad_bias.
func lnCase(t *testing.T, x, dy, w, b []float32, M, D, ld int64, eps float64) [][]float32 {
	t.Helper()
	mk := func(v []float32, sizes ...int64) Tensor {
		st := []int64{1}
		if len(sizes) == 2 {
			st = []int64{ld, 1}
		}
		return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Float32, Sizes: sizes, Strides: st}
	}
	out, mean, rstd := make([]float32, M*ld), make([]float32, M), make([]float32, M)
	mt, rt := mk(mean, M), mk(rstd, M)
	var wt, bt *Tensor
	if w != nil {
		w1, b1 := mk(w, D), mk(b, D)
		wt, bt = &w1, &b1
	}
	if err := LayerNormForward(mk(out, M, D), &mt, &rt, mk(x, M, D), wt, bt, eps); err != nil {
		t.Fatal(err)
	}
	gin, gw, gb := make([]float32, M*ld), make([]float32, D), make([]float32, D)
	gi, gwt, gbt := mk(gin, M, D), mk(gw, D), mk(gb, D)
	if err := LayerNormBackward(&gi, &gwt, &gbt, mk(dy, M, D), mk(x, M, D), mt, rt, wt); err != nil {
		t.Fatal(err)
	}
	return [][]float32{out, mean, rstd, gin, gw, gb}
}

// lnRef64 is layer norm and its gradients in float64 (the judge).
func lnRef64(x, dy, w, b []float32, M, D, ld int64, eps float64) [][]float64 {
	out, mean, rstd := make([]float64, M*ld), make([]float64, M), make([]float64, M)
	gin, gw, gb := make([]float64, M*ld), make([]float64, D), make([]float64, D)
	for r := int64(0); r < M; r++ {
		var s, q float64
		for j := int64(0); j < D; j++ {
			s += float64(x[r*ld+j])
		}
		m := s / float64(D)
		for j := int64(0); j < D; j++ {
			d := float64(x[r*ld+j]) - m
			q += d * d
		}
		rs := 1 / math.Sqrt(q/float64(D)+eps)
		mean[r], rstd[r] = m, rs
		var su, sd float64
		for j := int64(0); j < D; j++ {
			g, bb := 1.0, 0.0
			if w != nil {
				g, bb = float64(w[j]), float64(b[j])
			}
			xh := (float64(x[r*ld+j]) - m) * rs
			out[r*ld+j] = xh*g + bb
			u := float64(dy[r*ld+j]) * g
			su += u
			sd += u * xh
			gw[j] += float64(dy[r*ld+j]) * xh
			gb[j] += float64(dy[r*ld+j])
		}
		for j := int64(0); j < D; j++ {
			g := 1.0
			if w != nil {
				g = float64(w[j])
			}
			xh := (float64(x[r*ld+j]) - m) * rs
			gin[r*ld+j] = rs * (float64(dy[r*ld+j])*g - su/float64(D) - xh*sd/float64(D))
		}
	}
	return [][]float64{out, mean, rstd, gin, gw, gb}
}

// maxErr is the largest |got - want| over the [M, D] elements of row stride ld (ld 0: a
// vector) and the largest |want|.
func maxErr(got []float32, want []float64, M, D, ld int64) (float64, float64) {
	var e, s float64
	for r := int64(0); r < M; r++ {
		for j := int64(0); j < D; j++ {
			i := r*ld + j
			e = math.Max(e, math.Abs(float64(got[i])-want[i]))
			s = math.Max(s, math.Abs(want[i]))
		}
	}
	return e, s
}

// The AVX2 float32 rows are as close to float64 as the portable rows (torch's CPU
// arithmetic) at row lengths around the 8 and 16-lane widths and the transformers' widths,
// with and without weight and bias, with a mean far from zero, padded rows and eps variants.
func TestLayerNormAVX2Accuracy(t *testing.T) {
	if !lnAVX2 {
		t.Skip("no AVX2+FMA (or HPUSIM_ISA=generic)")
	}
	defer func(v bool) { lnAVX2 = v }(lnAVX2)
	rng := rand.New(rand.NewSource(5))
	names := []string{"out", "mean", "rstd", "grad_input", "grad_weight", "grad_bias"}
	for _, D := range []int64{1, 7, 8, 15, 16, 17, 64, 65, 768, 1000} {
		for _, c := range []struct {
			M, pad     int64
			shift, eps float64
			affine     bool
		}{{37, 0, 0.5, 1e-5, true}, {37, 3, 40, 1e-5, false}, {300, 0, -3, 1e-12, true}, {5, 1, 0, 0.1, true}} {
			M, ld := c.M, D+c.pad
			rnd := func(n int64, sh float64) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(rng.NormFloat64()*2 + sh)
				}
				return v
			}
			x, dy := rnd(M*ld, c.shift), rnd(M*ld, 0)
			var w, b []float32
			if c.affine {
				w, b = rnd(D, 1), rnd(D, 0)
			}
			ref := lnRef64(x, dy, w, b, M, D, ld, c.eps)
			lnAVX2 = true
			got := lnCase(t, x, dy, w, b, M, D, ld, c.eps)
			lnAVX2 = false
			port := lnCase(t, x, dy, w, b, M, D, ld, c.eps)
			for k := range got {
				m, d, l := M, D, ld
				if k == 1 || k == 2 {
					d, l = 1, 1
				} else if k >= 4 {
					m, l = 1, 0
				}
				e, s := maxErr(got[k], ref[k], m, d, l)
				ep, _ := maxErr(port[k], ref[k], m, d, l)
				if D == 1 && (k == 2 || k == 3) {
					continue // rstd = 1/sqrt(eps), grad_input 0: no reference precision to speak of
				}
				if e > 1.5*ep+4e-7*s {
					t.Errorf("D=%d M=%d shift=%v eps=%v affine=%v %s: AVX2 error %.3g, portable %.3g (max %.3g)",
						D, M, c.shift, c.eps, c.affine, names[k], e, ep, s)
				}
			}
		}
	}
}

// The AVX2 backward's weight and bias gradients are the same bits on one worker and two
// (fixed row blocks summed in order).
func TestLayerNormAVX2WorkersBitEqual(t *testing.T) {
	if !lnAVX2 {
		t.Skip("no AVX2+FMA (or HPUSIM_ISA=generic)")
	}
	defer SetThreads(SetThreads(1))
	rng := rand.New(rand.NewSource(9))
	for _, s := range [][2]int64{{1024, 64}, {1000, 65}, {333, 768}} {
		M, D := s[0], s[1]
		rnd := func(n int64) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		x, dy, w, b := rnd(M*D), rnd(M*D), rnd(D), rnd(D)
		SetThreads(1)
		one := lnCase(t, x, dy, w, b, M, D, D, 1e-5)
		SetThreads(2)
		two := lnCase(t, x, dy, w, b, M, D, D, 1e-5)
		for k := range one {
			for i := range one[k] {
				if math.Float32bits(one[k][i]) != math.Float32bits(two[k][i]) {
					t.Fatalf("[%d %d] output %d element %d: 1 worker %v, 2 workers %v", M, D, k, i, one[k][i], two[k][i])
				}
			}
		}
	}
}
