package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// Matrix products. "bgemm" is the one entry for mm/addmm/bmm/baddbmm: tensors
// (out, mat1, mat2[, self]) as 3-D strided views, floats (alpha, beta), ints [naive].
func init() {
	Register("bgemm", -1, func(c *Call) error {
		if len(c.T) != 3 && len(c.T) != 4 {
			return fmt.Errorf("expected 3 or 4 tensors, got %d", len(c.T))
		}
		if len(c.F) < 2 {
			return fmt.Errorf("expected attributes (alpha, beta)")
		}
		var self *kernels.Tensor
		if len(c.T) == 4 {
			self = &c.T[3]
		}
		// I[0] != 0 (bmm, float32/float64, K*M*N < 400): torch's naive small-bmm loop
		if len(c.I) > 0 && c.I[0] != 0 && self == nil && c.F[0] == 1 {
			return kernels.BatchedGemmNaive(c.T[0], c.T[1], c.T[2])
		}
		return kernels.BatchedGemm(c.T[0], c.T[1], c.T[2], self, c.F[0], c.F[1])
	})
}
