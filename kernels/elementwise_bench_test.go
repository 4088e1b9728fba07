package kernels

import (
	"fmt"
	"math/rand"
	"testing"
	"unsafe"
)

// Fixed-cost benchmarks of the elementwise engine and fill: small tensors, so the time is
// the per-call overhead (allocations, buffer set-up, goroutine splits).

func BenchmarkEWAddF32(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	for _, n := range []int64{64, 4096, 16384, 32768, 65536, 262144} {
		x, y, o := benchTensor(r, Float32, n), benchTensor(r, Float32, n), benchTensor(r, Float32, n)
		p := []float64{1, 0, 0, 0}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := Elementwise(EWOps["add"], Float32, o, []Tensor{x, y}, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEWScalarOperand(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	x, o := benchTensor(r, Float32, 64, 64), benchTensor(r, Float32, 64, 64)
	for _, dt := range []DType{Float32, Float64, Int64} {
		v := make([]float64, 1)
		v[0] = 2
		s := Tensor{Ptr: unsafe.Pointer(&v[0]), DType: dt, Sizes: []int64{64, 64}, Strides: []int64{0, 0}}
		b.Run(fmt.Sprint(dt), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := Elementwise(EWOps["mul"], Float32, o, []Tensor{x, s}, make([]float64, 4)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFill(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	for _, n := range []int64{64, 4096} {
		o := benchTensor(r, Float32, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := Fill(o, 1.5, 0, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEWSplit(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	for _, name := range []string{"add", "exp", "gelu"} {
		for _, n := range []int64{16384, 32768, 131072} {
			ins := []Tensor{benchTensor(r, Float32, n)}
			if EWOps[name].NIn == 2 {
				ins = append(ins, benchTensor(r, Float32, n))
			}
			o := benchTensor(r, Float32, n)
			p := []float64{1, 0, 0, 0}
			b.Run(fmt.Sprint(name, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := Elementwise(EWOps[name], Float32, o, ins, p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
