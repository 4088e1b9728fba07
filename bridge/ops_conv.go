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

// Grid sampling (python/habana_frameworks/torch/_ops/sampling_ops.py): 4-D views with any strides.
//
//	grid_sampler_2d      T (out, input, grid)                         I (mode, padding, align_corners)
//	grid_sampler_2d_bwd  T (grad_output, input, grid, {gin, ggrid}…)  I (mode, padding, align_corners, mask)
func init() {
	Register("grid_sampler_2d", 3, func(c *Call) error {
		if err := needInts(c, 3); err != nil {
			return err
		}
		return kernels.GridSample2d(c.T[0], c.T[1], c.T[2], int(c.I[0]), int(c.I[1]), c.I[2] != 0)
	})
	Register("grid_sampler_2d_bwd", -1, func(c *Call) error {
		if err := needInts(c, 4); err != nil {
			return err
		}
		if len(c.T) < 3 {
			return fmt.Errorf("expected at least 3 tensors")
		}
		g, err := optionals(c.T[3:], c.I[3], 2)
		if err != nil {
			return err
		}
		return kernels.GridSample2dBackward(g[0], g[1], c.T[0], c.T[1], c.T[2], int(c.I[0]), int(c.I[1]), c.I[2] != 0)
	})
}

// Segment reductions (python/habana_frameworks/torch/_ops/sampling_ops.py): data and results
// as 3-D views [outer, L|S, inner] with any strides, offsets [outer, S+1] (int64/int32).
//
//	segment_reduce      T (out, data, offsets)                       I (reduce, has_initial) F (initial)
//	segment_reduce_bwd  T (grad_input, grad, output, data, offsets)  I (reduce, has_initial) F (initial)
func init() {
	Register("segment_reduce", 3, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		if len(c.F) < 1 {
			return fmt.Errorf("expected the initial value")
		}
		return kernels.SegmentReduce(c.T[0], c.T[1], c.T[2], int(c.I[0]), c.I[1] != 0, c.F[0])
	})
	Register("segment_reduce_bwd", 5, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		if len(c.F) < 1 {
			return fmt.Errorf("expected the initial value")
		}
		return kernels.SegmentReduceBackward(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], int(c.I[0]), c.I[1] != 0, c.F[0])
	})
}
