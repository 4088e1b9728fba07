package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// The fused bfloat16 layer norm rows against float64 (forward, statistics, and every
// gradient), with and without parameters, over odd widths, padded rows, gin absent and
// zero rows.
func TestLayerNormBF16FusedVsFloat64(t *testing.T) {
	if !haveBF16Rows {
		t.Skip("no cgo")
	}
	rng := rand.New(rand.NewSource(41))
	for _, D := range []int64{1, 3, 16, 17, 64, 100, 256} {
		for _, pad := range []int64{0, 3} {
			for _, withW := range []bool{false, true} {
				M, ld := int64(150), D+pad
				bf := func(scale, shift float64) []uint16 {
					v := make([]uint16, M*ld)
					for i := range v {
						v[i] = F32ToBF16(float32(rng.NormFloat64()*scale + shift))
					}
					return v
				}
				xb, dyb := bf(3, 1), bf(1, 0)
				mk := func(b []uint16) Tensor {
					return Tensor{Ptr: unsafe.Pointer(&b[0]), DType: BFloat16, Sizes: []int64{M, D}, Strides: []int64{ld, 1}}
				}
				w, bias := make([]float32, D), make([]float32, D)
				for j := range w {
					w[j], bias[j] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				var wt, bt *Tensor
				if withW {
					w1, b1 := vec32(w), vec32(bias)
					wt, bt = &w1, &b1
				} else {
					for j := range w {
						w[j], bias[j] = 1, 0
					}
				}
				outb := make([]uint16, M*ld)
				mean, rstd := make([]float32, M), make([]float32, M)
				mt, rt := vec32(mean), vec32(rstd)
				const eps = 1e-5
				if err := LayerNormForward(mk(outb), &mt, &rt, mk(xb), wt, bt, eps); err != nil {
					t.Fatal(err)
				}
				gin := make([]uint16, M*ld)
				gw, gb := make([]float32, D), make([]float32, D)
				gwt, gbt := vec32(gw), vec32(gb)
				gi := mk(gin)
				if err := LayerNormBackward(&gi, &gwt, &gbt, mk(dyb), mk(xb), mt, rt, wt); err != nil {
					t.Fatal(err)
				}
				// parameter gradients alone give the same sums
				gw2, gb2 := make([]float32, D), make([]float32, D)
				gwt2, gbt2 := vec32(gw2), vec32(gb2)
				if err := LayerNormBackward(nil, &gwt2, &gbt2, mk(dyb), mk(xb), mt, rt, wt); err != nil {
					t.Fatal(err)
				}
				rw, rb := make([]float64, D), make([]float64, D)
				aw, ab := make([]float64, D), make([]float64, D)
				for r := int64(0); r < M; r++ {
					x, dy := make([]float64, D), make([]float64, D)
					for j := range x {
						x[j] = float64(BF16ToF32(xb[r*ld+int64(j)]))
						dy[j] = float64(BF16ToF32(dyb[r*ld+int64(j)]))
					}
					m, v := 0.0, 0.0
					for _, e := range x {
						m += e
					}
					m /= float64(D)
					for _, e := range x {
						v += (e - m) * (e - m)
					}
					rs := 1 / math.Sqrt(v/float64(D)+eps)
					what := fmt.Sprintf("D=%d pad=%d weight=%v row %d", D, pad, withW, r)
					if math.Abs(float64(mean[r])-m) > 1e-6*(math.Abs(m)+3) || math.Abs(float64(rstd[r])-rs) > 1e-5*rs {
						t.Fatalf("%s: mean %v rstd %v, want %v %v", what, mean[r], rstd[r], m, rs)
					}
					// the gradient reference uses the saved statistics, as autograd does
					sm, srs := float64(mean[r]), float64(rstd[r])
					a, b := 0.0, 0.0
					xh, dg := make([]float64, D), make([]float64, D)
					for j := range x {
						xh[j] = (x[j] - sm) * srs
						dg[j] = dy[j] * float64(w[j])
						a += dg[j]
						b += dg[j] * xh[j]
						rw[j] += dy[j] * xh[j]
						rb[j] += dy[j]
						aw[j] += math.Abs(dy[j] * xh[j])
						ab[j] += math.Abs(dy[j])
					}
					a /= float64(D)
					b /= float64(D)
					scale := 0.0
					for j := range x { // the size of the terms that cancel
						scale = math.Max(scale, (math.Abs(dg[j])+math.Abs(a)+math.Abs(xh[j]*b))*srs)
					}
					for j := int64(0); j < D; j++ {
						want := (x[j]-m)*rs*float64(w[j]) + float64(bias[j])
						if !bf16Close(outb[r*ld+j], want, 1e-5*(math.Abs(float64(bias[j]))+math.Abs(float64(w[j]))), 1) {
							t.Fatalf("%s col %d: out %v, want %v", what, j, BF16ToF32(outb[r*ld+j]), want)
						}
						wg := srs * ((dg[j] - a) - xh[j]*b)
						if !bf16Close(gin[r*ld+j], wg, 1e-4*scale, 1) {
							t.Fatalf("%s col %d: grad_input %v, want %v", what, j, BF16ToF32(gin[r*ld+j]), wg)
						}
					}
				}
				for j := int64(0); j < D; j++ {
					if math.Abs(float64(gw[j])-rw[j]) > 1e-5*aw[j]+1e-6 || math.Abs(float64(gb[j])-rb[j]) > 1e-5*ab[j]+1e-6 {
						t.Fatalf("D=%d weight=%v col %d: grad weight %v bias %v, want %v %v", D, withW, j, gw[j], gb[j], rw[j], rb[j])
					}
					if gw2[j] != gw[j] || gb2[j] != gb[j] {
						t.Fatalf("D=%d col %d: parameter gradients without grad_input differ", D, j)
					}
				}
			}
		}
	}
}
