package kernels

import (
	"math"
	"testing"
)

func BenchmarkExpFloat32(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%200) * -0.05
	}
	b.Run("fast", func(b *testing.B) {
		var s float32
		for i := 0; i < b.N; i++ {
			for _, v := range x {
				s += expFloat32(v)
			}
		}
		_ = s
	})
	b.Run("math", func(b *testing.B) {
		var s float32
		for i := 0; i < b.N; i++ {
			for _, v := range x {
				s += float32(math.Exp(float64(v)))
			}
		}
		_ = s
	})
}
