package kernels

import (
	"math/rand"
	"testing"
	"unsafe"
)

// BenchmarkMaxPoolCNN times 2x2/2 max pooling forward and backward at the reference CNN's
// two layer shapes (batch 64), float32.
func BenchmarkMaxPoolCNN(b *testing.B) {
	p := PoolParams{KH: 2, KW: 2, StrideH: 2, StrideW: 2, DilH: 1, DilW: 1}
	for _, c := range []struct {
		name string
		c, h int64
	}{{"pool1_16_28", 16, 28}, {"pool2_32_14", 32, 14}} {
		r := rand.New(rand.NewSource(1))
		in := benchTensor(r, Float32, 64, c.c, c.h, c.h)
		out := benchTensor(r, Float32, 64, c.c, c.h/2, c.h/2)
		idx := out
		ix := make([]int64, 64*c.c*c.h/2*c.h/2)
		idx.DType, idx.Ptr = Int64, unsafe.Pointer(&ix[0])
		gin := benchTensor(r, Float32, 64, c.c, c.h, c.h)
		if err := MaxPool2d(out, idx, in, p); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/fwd", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := MaxPool2d(out, idx, in, p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/bwd", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := MaxPool2dBackward(gin, out, idx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
