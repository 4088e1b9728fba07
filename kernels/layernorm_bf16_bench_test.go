package kernels

import (
	"math/rand"
	"testing"
)

// The transformer's layer norm (1024 rows of 64) in bfloat16 with float32 parameters and
// statistics, as autocast runs it on hpu, against float32.
func BenchmarkLayerNormDType(b *testing.B) {
	const M, D = 1024, 64
	r := rand.New(rand.NewSource(1))
	for _, c := range benchDTypes {
		x, dy, out, gin := benchTensor(r, c.dt, M, D), benchTensor(r, c.dt, M, D), benchTensor(r, c.dt, M, D), benchTensor(r, c.dt, M, D)
		w, bias := benchTensor(r, Float32, D), benchTensor(r, Float32, D)
		gw, gb := benchTensor(r, Float32, D), benchTensor(r, Float32, D)
		mean, rstd := benchTensor(r, Float32, M), benchTensor(r, Float32, M)
		b.Run("fwd_"+c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := LayerNormForward(out, &mean, &rstd, x, &w, &bias, 1e-5); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("bwd_"+c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := LayerNormBackward(&gin, &gw, &gb, dy, x, mean, rstd, &w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
