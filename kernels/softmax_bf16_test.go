package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// bf16Tol reports whether the bfloat16 result got is within tol bfloat16 ulps (relative
// to max(|want|, floor)) of the float64 reference want; NaN must match NaN and infinities
// must match exactly.
func bf16Close(got uint16, want, floor float64, ulps float64) bool {
	g := float64(BF16ToF32(got))
	if math.IsNaN(want) || math.IsNaN(g) {
		return math.IsNaN(want) && math.IsNaN(g)
	}
	if math.IsInf(want, 0) || math.IsInf(g, 0) {
		return g == want
	}
	return math.Abs(g-want) <= ulps*math.Max(math.Abs(want), floor)/256
}

// softmaxRef64 is softmax (log: log_softmax) of x in float64; NaN throughout when x holds
// NaN or +inf or only -inf (torch's results).
func softmaxRef64(x []float64, log bool) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, v)
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - mx)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		if log {
			out[i] = v - mx - math.Log(s)
		} else {
			out[i] = math.Exp(v-mx) / s
		}
	}
	return out
}

// The fused bfloat16 softmax rows against float64 (forward and backward, both kinds),
// over odd lengths, padded rows, masked (-inf) entries, fully masked rows, NaN and +inf
// rows, in place and zero rows.
func TestSoftmaxBF16FusedVsFloat64(t *testing.T) {
	if !haveBF16Rows {
		t.Skip("no cgo")
	}
	rng := rand.New(rand.NewSource(31))
	for _, N := range []int64{1, 2, 7, 15, 16, 17, 33, 64, 100, 257} {
		for _, pad := range []int64{0, 5} {
			M, ld := int64(41), N+pad
			xb, gb := make([]uint16, M*ld), make([]uint16, M*ld)
			for i := range xb {
				xb[i] = F32ToBF16(float32(rng.NormFloat64() * 4))
				gb[i] = F32ToBF16(float32(rng.NormFloat64()))
			}
			for j := int64(0); j < N; j++ {
				if j > N/2 {
					xb[3*ld+j] = F32ToBF16(float32(math.Inf(-1))) // causal-style mask
				}
				xb[5*ld+j] = F32ToBF16(float32(math.Inf(-1))) // fully masked
				xb[8*ld+j] = F32ToBF16(-100)                  // equal values
			}
			xb[6*ld+N/2] = 0x7fc0                          // NaN
			xb[7*ld+N-1] = F32ToBF16(float32(math.Inf(1))) // +inf
			xb[9*ld] = F32ToBF16(80)                       // exps that underflow
			mk := func(b []uint16) Tensor {
				return Tensor{Ptr: unsafe.Pointer(&b[0]), DType: BFloat16, Sizes: []int64{M, N}, Strides: []int64{ld, 1}}
			}
			row := func(b []uint16, r int64) []float64 {
				v := make([]float64, N)
				for j := range v {
					v[j] = float64(BF16ToF32(b[r*ld+int64(j)]))
				}
				return v
			}
			for _, log := range []bool{false, true} {
				yb := make([]uint16, M*ld)
				if err := Softmax(log, mk(yb), mk(xb), SoftmaxOpts{LastDim: true, Inner: 1}); err != nil {
					t.Fatal(err)
				}
				gib := make([]uint16, M*ld)
				if err := SoftmaxBackward(log, mk(gib), mk(gb), mk(yb), true); err != nil {
					t.Fatal(err)
				}
				// in place: forward over its input, backward over grad_output
				xin := append([]uint16(nil), xb...)
				if err := Softmax(log, mk(xin), mk(xin), SoftmaxOpts{LastDim: true, Inner: 1}); err != nil {
					t.Fatal(err)
				}
				gin := append([]uint16(nil), gb...)
				if err := SoftmaxBackward(log, mk(gin), mk(gin), mk(yb), true); err != nil {
					t.Fatal(err)
				}
				for r := int64(0); r < M; r++ {
					want := softmaxRef64(row(xb, r), log)
					y, g := row(yb, r), row(gb, r)
					// the backward reference from the rounded forward output, as autograd has it
					dot := 0.0
					for j := range g {
						if log {
							dot += g[j]
						} else {
							dot += g[j] * y[j]
						}
					}
					scale := 0.0
					for j := range g {
						scale = math.Max(scale, math.Abs(g[j]))
					}
					for j := int64(0); j < N; j++ {
						what := fmt.Sprintf("N=%d pad=%d log=%v row %d col %d", N, pad, log, r, j)
						if !bf16Close(yb[r*ld+j], want[j], 0x1p-125*256, 1) { // exps below float32's normal range flush to 0
							t.Fatalf("%s: forward %v, want %v", what, BF16ToF32(yb[r*ld+j]), want[j])
						}
						if xin[r*ld+j] != yb[r*ld+j] {
							t.Fatalf("%s: in place forward %#04x, out of place %#04x", what, xin[r*ld+j], yb[r*ld+j])
						}
						var wg float64
						if log {
							wg = g[j] - math.Exp(y[j])*dot
						} else {
							wg = (g[j] - dot) * y[j]
						}
						// cancellation in g - dot: tolerance relative to the row's scale
						if !bf16Close(gib[r*ld+j], wg, 1e-5*scale*float64(N), 1) {
							t.Fatalf("%s: backward %v, want %v", what, BF16ToF32(gib[r*ld+j]), wg)
						}
						if gin[r*ld+j] != gib[r*ld+j] {
							t.Fatalf("%s: in place backward %#04x, out of place %#04x", what, gin[r*ld+j], gib[r*ld+j])
						}
					}
				}
			}
		}
	}
	// zero rows and zero-length rows are no-ops
	e := Tensor{Ptr: nil, DType: BFloat16, Sizes: []int64{0, 8}, Strides: []int64{8, 1}}
	if err := Softmax(false, e, e, SoftmaxOpts{LastDim: true, Inner: 1}); err != nil {
		t.Fatal(err)
	}
}

// The attention scores' softmax of the reference transformer (16x4 heads of 64x64) in
// bfloat16: fused rows against the widened ones, and float32.
func BenchmarkSoftmaxBF16Fused(b *testing.B) {
	const M, N = 16 * 4 * 64, 64
	r := rand.New(rand.NewSource(1))
	for _, c := range []struct {
		name  string
		dt    DType
		slowp bool
	}{{"f32", Float32, false}, {"bf16_widened", BFloat16, true}, {"bf16_fused", BFloat16, false}} {
		x, y, g, gi := benchTensor(r, c.dt, M, N), benchTensor(r, c.dt, M, N), benchTensor(r, c.dt, M, N), benchTensor(r, c.dt, M, N)
		b.Run("fwd_"+c.name, func(b *testing.B) {
			noBF16Rows = c.slowp
			defer func() { noBF16Rows = false }()
			for i := 0; i < b.N; i++ {
				if err := Softmax(false, y, x, SoftmaxOpts{LastDim: true, Inner: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("bwd_"+c.name, func(b *testing.B) {
			noBF16Rows = c.slowp
			defer func() { noBF16Rows = false }()
			for i := 0; i < b.N; i++ {
				if err := SoftmaxBackward(false, gi, g, y, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
