package bridge

import (
	"fmt"
	"sort"

	"hpusim/kernels"
)

// Elementwise ops, one per entry of kernels.EWOps, named "ew.<name>".
// Tensors: output, then inputs (same shape; broadcast inputs are stride-0 views).
// Ints: [compute dtype code]. Floats: the op's scalar parameters.
func init() {
	names := make([]string, 0, len(kernels.EWOps))
	for n := range kernels.EWOps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		op := kernels.EWOps[n]
		Register("ew."+n, op.NIn+1, func(c *Call) error {
			if len(c.I) < 1 {
				return fmt.Errorf("expected the compute dtype attribute")
			}
			// Elementwise pads the parameters to the 4 an op may read
			return kernels.Elementwise(op, kernels.DType(c.I[0]), c.T[0], c.T[1:], c.F)
		})
	}
}
