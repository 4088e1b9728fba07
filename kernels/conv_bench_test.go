package kernels

import (
	"math/rand"
	"testing"
)

// BenchmarkConvCNN times each convolution op at the reference CNN's two layer shapes
// (batch 64: 1->16 at 28x28, 16->32 at 14x14, 3x3 pad 1), float32 and bfloat16.
func BenchmarkConvCNN(b *testing.B) {
	p := ConvParams{StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, DilH: 1, DilW: 1, Groups: 1}
	for _, d := range benchDTypes {
		for _, c := range []struct {
			name    string
			c, o, h int64
		}{{"conv1_1to16_28", 1, 16, 28}, {"conv2_16to32_14", 16, 32, 14}} {
			r := rand.New(rand.NewSource(1))
			in := benchTensor(r, d.dt, 64, c.c, c.h, c.h)
			w := benchTensor(r, d.dt, c.o, c.c, 3, 3)
			bias := benchTensor(r, d.dt, c.o)
			out := benchTensor(r, d.dt, 64, c.o, c.h, c.h)
			gin := benchTensor(r, d.dt, 64, c.c, c.h, c.h)
			gw := benchTensor(r, d.dt, c.o, c.c, 3, 3)
			gb := benchTensor(r, d.dt, c.o)
			b.Run(d.name+"/"+c.name+"/fwd", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := Conv2dForward(out, in, w, &bias, p); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(d.name+"/"+c.name+"/bwd_input", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := Conv2dBackward(&gin, nil, nil, out, in, w, p); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(d.name+"/"+c.name+"/bwd_weight", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := Conv2dBackward(nil, &gw, &gb, out, in, w, p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkConvCNNBlocks is BenchmarkConvCNN on the blocked path (no per-sample GEMMs).
func BenchmarkConvCNNBlocks(b *testing.B) {
	convPerSample = false
	defer func() { convPerSample = true }()
	BenchmarkConvCNN(b)
}

// BenchmarkConvCNNIm2col is BenchmarkConvCNN with the forward on the im2col path.
func BenchmarkConvCNNIm2col(b *testing.B) {
	convImplicit = false
	defer func() { convImplicit = true }()
	BenchmarkConvCNN(b)
}

// BenchmarkConvCNNNoAVX2 is BenchmarkConvCNN with the AVX2 direct kernels off (the paths
// an AVX2-only CPU took before them).
func BenchmarkConvCNNNoAVX2(b *testing.B) {
	old := dconvAVX2
	dconvAVX2 = false
	defer func() { dconvAVX2 = old }()
	BenchmarkConvCNN(b)
}
