package kernels

import (
	"fmt"
	"math/rand"
	"testing"
	"unsafe"
)

// The transformer's layer norm ([1024, 64]) and hidden 768 rows, forward and backward, on
// the AVX2 rows and the portable ones.
func BenchmarkLayerNormF32(b *testing.B) {
	defer func(v bool) { lnAVX2 = v }(lnAVX2)
	for _, s := range [][2]int64{{1024, 64}, {1024, 768}} {
		M, D := s[0], s[1]
		rng := rand.New(rand.NewSource(1))
		buf := make([]float32, 4*M*D+4*D+2*M)
		for i := range buf {
			buf[i] = float32(rng.NormFloat64())
		}
		mk := func(off int64, sizes ...int64) Tensor {
			st := []int64{1}
			if len(sizes) == 2 {
				st = []int64{sizes[1], 1}
			}
			return Tensor{Ptr: unsafe.Pointer(&buf[off]), DType: Float32, Sizes: sizes, Strides: st}
		}
		x, dy, out, gin := mk(0, M, D), mk(M*D, M, D), mk(2*M*D, M, D), mk(3*M*D, M, D)
		w, bb, gw, gb := mk(4*M*D, D), mk(4*M*D+D, D), mk(4*M*D+2*D, D), mk(4*M*D+3*D, D)
		mean, rstd := mk(4*M*D+4*D, M), mk(4*M*D+4*D+M, M)
		for _, avx := range []bool{false, true} {
			if avx && !lnAVX2 {
				continue
			}
			b.Run(fmt.Sprintf("fwd_%dx%d_avx2=%v", M, D, avx), func(b *testing.B) {
				lnAVX2 = avx
				for i := 0; i < b.N; i++ {
					LayerNormForward(out, &mean, &rstd, x, &w, &bb, 1e-5)
				}
			})
			b.Run(fmt.Sprintf("bwd_%dx%d_avx2=%v", M, D, avx), func(b *testing.B) {
				lnAVX2 = avx
				for i := 0; i < b.N; i++ {
					LayerNormBackward(&gin, &gw, &gb, dy, x, mean, rstd, &w)
				}
			})
			lnAVX2 = true
		}
	}
}
