package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// Integer convolutions (python/habana_frameworks/torch/_ops/conv_ops.py): 4-D views with any
// strides, the attribute layout of conv2d_fwd.
//
//	conv2d_int_fwd        T (out, input, weight[, bias])  I (sH, sW, pH, pW, dH, dW, groups)
//	conv2d_int_bwd_input  T (grad_input, grad_output, weight)  I (the same 7 params)
func init() {
	Register("conv2d_int_fwd", -1, func(c *Call) error {
		if len(c.T) != 3 && len(c.T) != 4 {
			return fmt.Errorf("expected 3 or 4 tensors, got %d", len(c.T))
		}
		if err := needInts(c, 7); err != nil {
			return err
		}
		var bias *kernels.Tensor
		if len(c.T) == 4 {
			bias = &c.T[3]
		}
		return kernels.ConvIntForward(c.T[0], c.T[1], c.T[2], bias, convParams(c.I))
	})
	Register("conv2d_int_bwd_input", 3, func(c *Call) error {
		if err := needInts(c, 7); err != nil {
			return err
		}
		return kernels.ConvIntBackwardInput(c.T[0], c.T[1], c.T[2], convParams(c.I))
	})
}
