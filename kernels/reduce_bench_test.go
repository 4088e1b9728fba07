package kernels

import (
	"math/rand"
	"strconv"
	"testing"
)

// Reductions, softmax and normalisations at the reference models' shapes.
func BenchmarkReduceKernels(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	run := func(name string, fn func() error) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, sh := range [][]int64{{1024, 256}, {1024, 64}, {16, 4096}} {
		x, so := benchTensor(r, Float32, sh...), benchTensor(r, Float32, 1, sh[1])
		run("sum_d0_"+shapeName(sh), func() error { return Sum(so, x, []bool{true, false}, SumOpts{Threads: 2}) })
	}
	x64 := benchTensor(r, Float32, 64, 64)
	s1 := benchTensor(r, Float32, 1, 1)
	run("sum_all_64x64", func() error { return Sum(s1, x64, []bool{true, true}, SumOpts{Threads: 2}) })
	xr, sr := benchTensor(r, Float32, 1024, 256), benchTensor(r, Float32, 1024, 1)
	run("mean_d1_1024x256", func() error { return Sum(sr, xr, []bool{false, true}, SumOpts{Mean: true, Threads: 2}) })
	vo := benchTensor(r, Float32, 1024)
	run("var_1024x256", func() error { return Reduce(RedVar, vo, xr, []float64{0, 0}) })

	att := []int64{16 * 4 * 64, 64}
	ax, ay, ag, ao := benchTensor(r, Float32, att...), benchTensor(r, Float32, att...), benchTensor(r, Float32, att...), benchTensor(r, Float32, att...)
	run("softmax_att", func() error { return Softmax(false, ao, ax, SoftmaxOpts{LastDim: true, Inner: 1}) })
	run("softmax_bwd_att", func() error { return SoftmaxBackward(false, ao, ag, ay, true) })
	lx, ly, lg, lo := benchTensor(r, Float32, 1024, 128), benchTensor(r, Float32, 1024, 128), benchTensor(r, Float32, 1024, 128), benchTensor(r, Float32, 1024, 128)
	run("log_softmax_1024x128", func() error { return Softmax(true, lo, lx, SoftmaxOpts{LastDim: true, Inner: 1}) })
	run("log_softmax_bwd_1024x128", func() error { return SoftmaxBackward(true, lo, lg, ly, true) })

	M, D := int64(1024), int64(64)
	nx, ng, no := benchTensor(r, Float32, M, D), benchTensor(r, Float32, M, D), benchTensor(r, Float32, M, D)
	mean, rstd := benchTensor(r, Float32, M), benchTensor(r, Float32, M)
	w, bb := benchTensor(r, Float32, D), benchTensor(r, Float32, D)
	gw, gb := benchTensor(r, Float32, D), benchTensor(r, Float32, D)
	run("layer_norm_1024x64", func() error { return LayerNormForward(no, &mean, &rstd, nx, &w, &bb, 1e-5) })
	run("layer_norm_bwd_1024x64", func() error { return LayerNormBackward(&no, &gw, &gb, ng, nx, mean, rstd, &w) })

	for _, sh := range [][]int64{{64, 16, 28 * 28}, {64, 32, 14 * 14}} {
		C := sh[1]
		bx, bg, bo := benchTensor(r, Float32, sh...), benchTensor(r, Float32, sh...), benchTensor(r, Float32, sh...)
		sm, si := benchTensor(r, Float32, C), benchTensor(r, Float32, C)
		bw, bbias, rm, rv := benchTensor(r, Float32, C), benchTensor(r, Float32, C), benchTensor(r, Float32, C), benchTensor(r, Float32, C)
		cw, cb := benchTensor(r, Float32, C), benchTensor(r, Float32, C)
		run("batch_norm_"+shapeName(sh), func() error {
			return BatchNormForward(bo, &sm, &si, bx, &bw, &bbias, &rm, &rv, true, 0.1, 1e-5)
		})
		run("batch_norm_bwd_"+shapeName(sh), func() error {
			return BatchNormBackward(&bo, &cw, &cb, bg, bx, &bw, &rm, &rv, &sm, &si, true, 1e-5)
		})
	}
}

func shapeName(sh []int64) string {
	s := ""
	for i, v := range sh {
		if i > 0 {
			s += "x"
		}
		s += strconv.FormatInt(v, 10)
	}
	return s
}
