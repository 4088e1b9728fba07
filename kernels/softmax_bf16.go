package kernels

// noBF16Rows forces the widen-compute-narrow bfloat16 rows instead of the fused ones
// (tests compare the two paths).
var noBF16Rows bool

// softmaxBF16Fused is Softmax over bfloat16 rows with the axis last and unit column
// strides: each row read once as bfloat16, computed in float32 and rounded once
// (bf16_rows.h), rows split over the workers.
func softmaxBF16Fused(log bool, out, in Tensor) {
	M, N := in.Sizes[0], in.Sizes[1]
	ParallelFor(M, N*8, func(lo, hi int64) {
		sp := getF32(int(N))
		defer putF32(sp)
		softmaxBF16C(at(in.Ptr, lo*in.Strides[0]*2), in.Strides[0], at(out.Ptr, lo*out.Strides[0]*2), out.Strides[0],
			hi-lo, N, log, (*sp)[:N])
	})
}

// softmaxBwdBF16Fused is SoftmaxBackward over such rows: float32 sums and results,
// rounded once. grad_input may be grad_output (each row is read before it is written).
func softmaxBwdBF16Fused(log bool, gi, g, y Tensor) {
	M, N := gi.Sizes[0], gi.Sizes[1]
	ParallelFor(M, N*4, func(lo, hi int64) {
		softmaxBwdBF16C(at(g.Ptr, lo*g.Strides[0]*2), g.Strides[0], at(y.Ptr, lo*y.Strides[0]*2), y.Strides[0],
			at(gi.Ptr, lo*gi.Strides[0]*2), gi.Strides[0], hi-lo, N, log)
	})
}
