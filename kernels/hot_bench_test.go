package kernels

import (
	"math/rand"
	"testing"
	"unsafe"
)

// Benchmarks of the kernels that dominate the reference transformer's training step, at
// its shapes: batch 16 x seq 64 tokens, d_model 64, d_ff 256, 4 heads (attention 16*4*64 rows
// of 64).

func BenchmarkTransformerKernels(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	ff := []int64{1024, 256}
	x, g, o := benchTensor(r, Float32, ff...), benchTensor(r, Float32, ff...), benchTensor(r, Float32, ff...)
	b.Run("gelu_fwd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := Elementwise(EWOps["gelu"], Float32, o, []Tensor{x}, []float64{0, 0, 0, 0}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gelu_bwd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := Elementwise(EWOps["gelu_backward"], Float32, o, []Tensor{g, x}, []float64{0, 0, 0, 0}); err != nil {
				b.Fatal(err)
			}
		}
	})
	att := []int64{16 * 4 * 64, 64}
	ax, ao := benchTensor(r, Float32, att...), benchTensor(r, Float32, att...)
	b.Run("softmax", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := Softmax(false, ao, ax, SoftmaxOpts{LastDim: true, Inner: 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
	mb := make([]uint8, att[0]*att[1])
	mask := Tensor{Ptr: unsafe.Pointer(&mb[0]), DType: Bool, Sizes: ao.Sizes, Strides: ao.Strides}
	b.Run("dropout_att", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := Dropout(ao, mask, ax, Stream{Seed: 7, Offset: uint64(i)}, 0.1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dropout_bwd_att", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := DropoutBackward(ao, ax, mask, 1/0.9); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sum_bias_grad", func(b *testing.B) {
		so := benchTensor(r, Float32, 1, 256)
		for i := 0; i < b.N; i++ {
			if err := Sum(so, x, []bool{true, false}, SumOpts{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sum_rows", func(b *testing.B) {
		so := benchTensor(r, Float32, 1024, 1)
		for i := 0; i < b.N; i++ {
			if err := Sum(so, x, []bool{false, true}, SumOpts{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("philox_block", func(b *testing.B) {
		s := Stream{Seed: 1, Offset: 2}
		var acc uint32
		for i := 0; i < b.N; i++ {
			w := s.Block(uint64(i))
			acc += w[0] ^ w[3]
		}
		_ = acc
	})
}
