package kernels

import (
	"fmt"
	"math/rand"
	"testing"
)

// The reference CNN's float32 batch norms ([64,16,28,28] and [64,32,14,14] as [N,C,S]),
// forward and backward in training mode, one worker and all of them, the AVX-512 float32
// kernels against the float64-lane ones.
func BenchmarkBatchNormF32(b *testing.B) {
	for _, sh := range [][3]int64{{64, 16, 784}, {64, 32, 196}} {
		n := int(sh[0] * sh[1] * sh[2])
		rng := rand.New(rand.NewSource(1))
		mk := func(l int) []float32 {
			v := make([]float32, l)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		x, y, g, gi := mk(n), make([]float32, n), mk(n), make([]float32, n)
		C := int(sh[1])
		w, bb, rm, rv, sm, si, gw, gb := mk(C), mk(C), make([]float32, C), make([]float32, C), make([]float32, C),
			make([]float32, C), make([]float32, C), make([]float32, C)
		sz := sh[:]
		st := []int64{sh[1] * sh[2], sh[2], 1}
		t3 := func(p []float32) Tensor { return f32Tensor(p, sz, st) }
		t1 := func(p []float32) *Tensor { t := f32Tensor(p, []int64{int64(C)}, []int64{1}); return &t }
		for _, cfg := range []struct {
			workers int
			vec     bool
		}{{1, false}, {1, true}, {0, false}, {0, true}} {
			workers := cfg.workers
			old, oldVec := SetThreads(workers), bnF32Vec
			bnF32Vec = cfg.vec && (f32DotCPU || b2CPU)
			b.Run(fmt.Sprintf("fwd/%v/w%d/vec=%v", sz, workers, bnF32Vec), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := BatchNormForward(t3(y), t1(sm), t1(si), t3(x), t1(w), t1(bb), t1(rm), t1(rv), true, 0.1, 1e-5); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("bwd/%v/w%d/vec=%v", sz, workers, bnF32Vec), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					gin := t3(gi)
					if err := BatchNormBackward(&gin, t1(gw), t1(gb), t3(g), t3(x), t1(w), t1(rm), t1(rv), t1(sm), t1(si), true, 1e-5); err != nil {
						b.Fatal(err)
					}
				}
			})
			SetThreads(old)
			bnF32Vec = oldVec
		}
	}
}
