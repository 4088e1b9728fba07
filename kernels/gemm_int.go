package kernels

// bgemmInt is BatchedGemm for integer dtypes: out = beta*self + alpha*(a @ b) in int64
// arithmetic that wraps as C's does, stored back to the operands' integer dtype. CPU's
// integer matrix products are plain loops too (no BLAS), so any summation order gives
// the same (exact, modulo 2^64) result.
func isIntGemmDType(d DType) bool {
	return d == Int64 || d == Int32 || d == Int16 || d == Int8 || d == Uint8
}

func bgemmInt(out, a, b Tensor, self *Tensor, alpha, beta float64) error {
	// alpha and beta convert to the integer type as CPU's Scalar.to<int64_t>() does (truncation)
	ia, ib := int64(alpha), int64(beta)
	if beta == 0 || ib == 0 {
		self = nil
	}
	B, M, K, N := a.Sizes[0], a.Sizes[1], a.Sizes[2], b.Sizes[2]
	es := int64(out.DType.Size())
	el := func(t Tensor, bi, i, j int64) int64 {
		return ixGetI(at(t.Ptr, (bi*t.Strides[0]+i*t.Strides[1]+j*t.Strides[2])*int64(t.DType.Size())), t.DType)
	}
	ParallelFor(B*M, N*max(K, 1), func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			bi, i := r/M, r%M
			for j := int64(0); j < N; j++ {
				var s int64
				for k := int64(0); k < K; k++ {
					s += el(a, bi, i, k) * el(b, bi, k, j)
				}
				v := ia * s
				if self != nil {
					v += ib * el(*self, bi, i, j)
				}
				ixSetI(at(out.Ptr, (bi*out.Strides[0]+i*out.Strides[1]+j*out.Strides[2])*es), out.DType, v)
			}
		}
	})
	return nil
}
