package kernels

import (
	"math/rand"
	"testing"
)

// bfloat16 layer norm, softmax and column sums at the tiny transformer's autocast shapes:
// the fast paths (widen, float32 C rows, round once) and, as "generic", the paths they
// replace.

func benchHalfGeneric(b *testing.B, name string, run func(b *testing.B)) {
	b.Run(name, run)
	b.Run(name+"/generic", func(b *testing.B) {
		noCNorm = true
		defer func() { noCNorm = false }()
		run(b)
	})
}

func BenchmarkLayerNormBF16(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	M, D := int64(1024), int64(64)
	x, dy, out, gin := benchTensor(r, BFloat16, M, D), benchTensor(r, BFloat16, M, D), benchTensor(r, BFloat16, M, D),
		benchTensor(r, BFloat16, M, D)
	w, bias := benchTensor(r, Float32, D), benchTensor(r, Float32, D)
	mean, rstd, gw, gb := benchTensor(r, Float32, M), benchTensor(r, Float32, M), benchTensor(r, Float32, D),
		benchTensor(r, Float32, D)
	benchHalfGeneric(b, "fwd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := LayerNormForward(out, &mean, &rstd, x, &w, &bias, 1e-5); err != nil {
				b.Fatal(err)
			}
		}
	})
	benchHalfGeneric(b, "bwd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := LayerNormBackward(&gin, &gw, &gb, dy, x, mean, rstd, &w); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkLayerNormF32Ref(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	M, D := int64(1024), int64(64)
	x, out := benchTensor(r, Float32, M, D), benchTensor(r, Float32, M, D)
	w, bias := benchTensor(r, Float32, D), benchTensor(r, Float32, D)
	mean, rstd := benchTensor(r, Float32, M), benchTensor(r, Float32, M)
	for i := 0; i < b.N; i++ {
		if err := LayerNormForward(out, &mean, &rstd, x, &w, &bias, 1e-5); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSoftmaxBF16(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	M, N := int64(16*4*64), int64(64)
	x, y, g, gi := benchTensor(r, BFloat16, M, N), benchTensor(r, BFloat16, M, N), benchTensor(r, BFloat16, M, N),
		benchTensor(r, BFloat16, M, N)
	run := func(name string, fn func() error) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/generic", func(b *testing.B) {
			noCSoftmax = true
			defer func() { noCSoftmax = false }()
			for i := 0; i < b.N; i++ {
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("fwd", func() error { return Softmax(false, y, x, SoftmaxOpts{LastDim: true, Inner: 1}) })
	run("bwd", func() error { return SoftmaxBackward(false, gi, g, y, true) })
}

func BenchmarkSumColsBF16(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	x := benchTensor(r, BFloat16, 1024, 256)
	out := benchTensor(r, BFloat16, 1, 256)
	red := []bool{true, false}
	for _, generic := range []bool{false, true} {
		name := "fast"
		if generic {
			name = "generic"
		}
		b.Run(name, func(b *testing.B) {
			noFastSum = generic
			defer func() { noFastSum = false }()
			for i := 0; i < b.N; i++ {
				if err := Sum(out, x, red, SumOpts{Threads: 2}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBatchNormBF16(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	N, C, S := int64(64), int64(16), int64(28*28)
	x, g, out, gin := benchTensor(r, BFloat16, N, C, S), benchTensor(r, BFloat16, N, C, S), benchTensor(r, BFloat16, N, C, S),
		benchTensor(r, BFloat16, N, C, S)
	w, bias, rm, rv := benchTensor(r, Float32, C), benchTensor(r, Float32, C), benchTensor(r, Float32, C), benchTensor(r, Float32, C)
	sm, si, gw, gb := benchTensor(r, Float32, C), benchTensor(r, Float32, C), benchTensor(r, Float32, C), benchTensor(r, Float32, C)
	benchHalfGeneric(b, "fwd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := BatchNormForward(out, &sm, &si, x, &w, &bias, &rm, &rv, true, 0.1, 1e-5); err != nil {
				b.Fatal(err)
			}
		}
	})
	benchHalfGeneric(b, "bwd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := BatchNormBackward(&gin, &gw, &gb, g, x, &w, &rm, &rv, &sm, &si, true, 1e-5); err != nil {
				b.Fatal(err)
			}
		}
	})
}
