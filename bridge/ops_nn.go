package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// optionals unpacks the tensors present per the bits of mask (bit i = slot i present)
// from ts, returning one entry (nil when absent) per slot.
func optionals(ts []kernels.Tensor, mask int64, slots int) ([]*kernels.Tensor, error) {
	out := make([]*kernels.Tensor, slots)
	k := 0
	for i := 0; i < slots; i++ {
		if mask&(1<<i) == 0 {
			continue
		}
		if k >= len(ts) {
			return nil, fmt.Errorf("mask %b names more tensors than the %d passed", mask, len(ts))
		}
		out[i] = &ts[k]
		k++
	}
	if k != len(ts) {
		return nil, fmt.Errorf("mask %b names %d tensors, %d passed", mask, k, len(ts))
	}
	return out, nil
}

func needInts(c *Call, n int) error {
	if len(c.I) < n {
		return fmt.Errorf("expected %d integer attributes, got %d", n, len(c.I))
	}
	return nil
}

func convParams(i []int64) kernels.ConvParams {
	return kernels.ConvParams{StrideH: int(i[0]), StrideW: int(i[1]), PadH: int(i[2]), PadW: int(i[3]),
		DilH: int(i[4]), DilW: int(i[5]), Groups: int(i[6])}
}

func poolParams(i []int64) kernels.PoolParams {
	return kernels.PoolParams{KH: int(i[0]), KW: int(i[1]), StrideH: int(i[2]), StrideW: int(i[3]),
		PadH: int(i[4]), PadW: int(i[5]), DilH: int(i[6]), DilW: int(i[7])}
}

// Neural-network ops. Attribute layouts:
//
//	conv2d_fwd      T (out, input, weight[, bias])      I (sH, sW, pH, pW, dH, dW, groups)
//	conv2d_bwd      T (grad_output, input, weight, {gin, gw, gb}…)  I (7 conv params, mask)
//	max_pool2d      T (out, indices, input)             I (kH, kW, sH, sW, pH, pW, dH, dW)
//	max_pool2d_bwd  T (grad_input, grad_output, indices)
//	avg_pool2d[_bwd] T (out|grad_input, input|grad_output) I (8 pool params, count_include_pad, divisor)
//	adaptive_avg_pool2d[_bwd] T (out|grad_input, input|grad_output)
//	batch_norm_fwd  T (out, input, {save_mean, save_invstd, weight, bias, running_mean, running_var}…)
//	                I (training, mask) F (momentum, eps)
//	batch_norm_bwd  T (grad_output, input, {gin, gw, gb, weight, running_mean, running_var, save_mean, save_invstd}…)
//	                I (training, mask) F (eps)
//	layer_norm_fwd  T (out, input [M,D], {mean [M], rstd [M], weight [D], bias [D]}…) I (mask) F (eps)
//	layer_norm_bwd  T (grad_output, input [M,D], mean [M], rstd [M], {gin, gw, gb, weight}…) I (mask)
//	group_norm_fwd  T (out, input [N,C,HxW], mean [N*G], rstd [N*G], {weight, bias}…) I (G, mask) F (eps)
//	group_norm_bwd  T (grad_output, input [N,C,HxW], mean, rstd, {gin, gw, gb, weight}…) I (G, mask)
//	index_select    T (out, self, index) I (dim)
//	embedding_bwd   T (grad_weight, grad [M,D], indices [M]) I (padding_idx, scale_grad_by_freq)
func init() {
	Register("conv2d_fwd", -1, func(c *Call) error {
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
		return kernels.Conv2dForward(c.T[0], c.T[1], c.T[2], bias, convParams(c.I))
	})
	Register("conv2d_bwd", -1, func(c *Call) error {
		if err := needInts(c, 8); err != nil {
			return err
		}
		if len(c.T) < 3 {
			return fmt.Errorf("expected at least 3 tensors")
		}
		g, err := optionals(c.T[3:], c.I[7], 3)
		if err != nil {
			return err
		}
		return kernels.Conv2dBackward(g[0], g[1], g[2], c.T[0], c.T[1], c.T[2], convParams(c.I))
	})
	Register("max_pool2d", 3, func(c *Call) error {
		if err := needInts(c, 8); err != nil {
			return err
		}
		return kernels.MaxPool2d(c.T[0], c.T[1], c.T[2], poolParams(c.I))
	})
	Register("max_pool2d_bwd", 3, func(c *Call) error {
		return kernels.MaxPool2dBackward(c.T[0], c.T[1], c.T[2])
	})
	Register("avg_pool2d", 2, func(c *Call) error {
		if err := needInts(c, 10); err != nil {
			return err
		}
		return kernels.AvgPool2d(c.T[0], c.T[1], poolParams(c.I), c.I[8] != 0, int(c.I[9]))
	})
	Register("avg_pool2d_bwd", 2, func(c *Call) error {
		if err := needInts(c, 10); err != nil {
			return err
		}
		return kernels.AvgPool2dBackward(c.T[0], c.T[1], poolParams(c.I), c.I[8] != 0, int(c.I[9]))
	})
	Register("adaptive_avg_pool2d", 2, func(c *Call) error {
		return kernels.AdaptiveAvgPool2d(c.T[0], c.T[1], false)
	})
	Register("adaptive_avg_pool2d_bwd", 2, func(c *Call) error {
		return kernels.AdaptiveAvgPool2d(c.T[0], c.T[1], true)
	})
	Register("batch_norm_fwd", -1, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		if len(c.F) < 2 || len(c.T) < 2 {
			return fmt.Errorf("expected tensors (out, input, ...) and floats (momentum, eps)")
		}
		o, err := optionals(c.T[2:], c.I[1], 6)
		if err != nil {
			return err
		}
		return kernels.BatchNormForward(c.T[0], o[0], o[1], c.T[1], o[2], o[3], o[4], o[5], c.I[0] != 0, c.F[0], c.F[1])
	})
	Register("batch_norm_bwd", -1, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		if len(c.F) < 1 || len(c.T) < 2 {
			return fmt.Errorf("expected tensors (grad_output, input, ...) and floats (eps)")
		}
		o, err := optionals(c.T[2:], c.I[1], 8)
		if err != nil {
			return err
		}
		return kernels.BatchNormBackward(o[0], o[1], o[2], c.T[0], c.T[1], o[3], o[4], o[5], o[6], o[7], c.I[0] != 0, c.F[0])
	})
	Register("layer_norm_bwd", -1, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		if len(c.T) < 4 {
			return fmt.Errorf("expected at least 4 tensors")
		}
		o, err := optionals(c.T[4:], c.I[0], 4)
		if err != nil {
			return err
		}
		return kernels.LayerNormBackward(o[0], o[1], o[2], c.T[0], c.T[1], c.T[2], c.T[3], o[3])
	})
	Register("layer_norm_fwd", -1, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		if len(c.T) < 2 || len(c.F) < 1 {
			return fmt.Errorf("expected tensors (out, input, ...) and floats (eps)")
		}
		o, err := optionals(c.T[2:], c.I[0], 4)
		if err != nil {
			return err
		}
		return kernels.LayerNormForward(c.T[0], o[0], o[1], c.T[1], o[2], o[3], c.F[0])
	})
	Register("group_norm_fwd", -1, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		if len(c.T) < 4 || len(c.F) < 1 {
			return fmt.Errorf("expected tensors (out, input, mean, rstd, ...) and floats (eps)")
		}
		o, err := optionals(c.T[4:], c.I[1], 2)
		if err != nil {
			return err
		}
		return kernels.GroupNormForward(c.T[0], c.T[2], c.T[3], c.T[1], o[0], o[1], c.I[0], c.F[0])
	})
	Register("group_norm_bwd", -1, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		if len(c.T) < 4 {
			return fmt.Errorf("expected at least 4 tensors")
		}
		o, err := optionals(c.T[4:], c.I[1], 4)
		if err != nil {
			return err
		}
		return kernels.GroupNormBackward(o[0], o[1], o[2], c.T[0], c.T[1], c.T[2], c.T[3], o[3], c.I[0])
	})
	Register("index_select", 3, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		return kernels.IndexSelect(c.T[0], c.T[1], c.T[2], int(c.I[0]))
	})
	Register("embedding_bwd", 3, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		return kernels.EmbeddingBackward(c.T[0], c.T[1], c.T[2], c.I[0], c.I[1] != 0)
	})
}
