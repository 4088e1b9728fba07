package kernels

import (
	"math/rand"
	"testing"
)

// BenchmarkCatAttention times the reference transformer's cat of three [16,64,64] heads
// (the middle one a transposed view) along the last dim, float32.
func BenchmarkCatAttention(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	a := benchTensor(r, Float32, 16, 64, 64)
	t := transposed(benchTensor(r, Float32, 16, 64, 64))
	out := benchTensor(r, Float32, 16, 64, 192)
	for i := 0; i < b.N; i++ {
		if err := Cat(out, []Tensor{a, t, a}, 2); err != nil {
			b.Fatal(err)
		}
	}
}
