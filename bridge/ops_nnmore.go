package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// axisMaps decodes the three axis specs of resample / resample_bwd:
// I (align_corners, then mode, in, out, pad for axes D, H, W), F (scale of D, H, W; <= 0 none).
func axisMaps(c *Call) ([3]kernels.AxisMap, error) {
	var maps [3]kernels.AxisMap
	if err := needInts(c, 13); err != nil {
		return maps, err
	}
	if len(c.F) < 3 {
		return maps, fmt.Errorf("expected 3 scales, got %d", len(c.F))
	}
	for a := 0; a < 3; a++ {
		q := c.I[1+4*a:]
		m, err := kernels.BuildAxis(kernels.AxisSpec{Mode: int(q[0]), In: int(q[1]), Out: int(q[2]), Pad: int(q[3]),
			AlignCorners: c.I[0] != 0, Scale: c.F[a], BF16Math: len(c.I) > 13 && c.I[13] == 2})
		if err != nil {
			return maps, err
		}
		maps[a] = m
	}
	return maps, nil
}

// More neural-network ops (python/habana_frameworks/torch/_ops/nn_more_ops.py). Tensors are
// 5-D [N, C, D, H, W] views with any strides. Attribute layouts:
//
//	resample      T (out, input)              I (align, {mode, in, out, pad} x 3[, bf16: 1 weights, 2 all math]) F (scale x 3)
//	resample_bwd  T (grad_input, grad_output) I, F as resample
func init() {
	Register("resample", 2, func(c *Call) error {
		maps, err := axisMaps(c)
		if err != nil {
			return err
		}
		rb := 0
		if len(c.I) > 13 {
			rb = int(c.I[13])
		}
		return kernels.Resample(c.T[0], c.T[1], maps, rb)
	})
	Register("resample_bwd", 2, func(c *Call) error {
		maps, err := axisMaps(c)
		if err != nil {
			return err
		}
		return kernels.ResampleBackward(c.T[0], c.T[1], maps, len(c.I) > 13 && c.I[13] != 0)
	})
}

func poolAxes(i []int64) [3]kernels.PoolAxis {
	var a [3]kernels.PoolAxis
	for k := 0; k < 3; k++ {
		a[k] = kernels.PoolAxis{K: int(i[4*k]), S: int(i[4*k+1]), P: int(i[4*k+2]), Dil: int(i[4*k+3])}
	}
	return a
}

// Pooling over 5-D volumes. Attribute layouts:
//
//	pool_max       T (out, indices, input)          I (adaptive, {k, s, p, dil} x 3)
//	pool_max_frac  T (out, indices, input, samples [N, C, nsp]) I (nsp, k x 3)
//	pool_max_bwd   T (grad_input, grad_output, indices)
//	max_unpool     T (out, input, indices)
//	pool_avg[_bwd] T (out|grad_input, input|grad_output) I (adaptive, {k, s, p, dil} x 3, count_include_pad, divisor[, bf16 arithmetic])
func init() {
	Register("pool_max", 3, func(c *Call) error {
		if err := needInts(c, 13); err != nil {
			return err
		}
		return kernels.MaxPoolRegular(c.T[0], c.T[1], c.T[2], poolAxes(c.I[1:]), c.I[0] != 0)
	})
	Register("pool_max_frac", 4, func(c *Call) error {
		if err := needInts(c, 4); err != nil {
			return err
		}
		return kernels.FractionalMaxPool(c.T[0], c.T[1], c.T[2], c.T[3],
			[3]int{int(c.I[1]), int(c.I[2]), int(c.I[3])}, int(c.I[0]))
	})
	Register("pool_max_bwd", 3, func(c *Call) error {
		return kernels.MaxPoolVolBackward(c.T[0], c.T[1], c.T[2])
	})
	Register("max_unpool", 3, func(c *Call) error {
		return kernels.MaxUnpool(c.T[0], c.T[1], c.T[2])
	})
	for _, bwd := range []bool{false, true} {
		name := "pool_avg"
		if bwd {
			name = "pool_avg_bwd"
		}
		Register(name, 2, func(c *Call) error {
			if err := needInts(c, 15); err != nil {
				return err
			}
			rb := len(c.I) > 15 && c.I[15] != 0
			return kernels.AvgPoolVol(c.T[0], c.T[1], poolAxes(c.I[1:]), c.I[0] != 0, c.I[13] != 0, int(c.I[14]), bwd, rb)
		})
	}
	// lazy-graph effects: which operands each op writes, and which overwrite them whole
	for name, w := range map[string][]int{"resample": {0}, "resample_bwd": {0}, "pool_max": {0, 1},
		"pool_max_frac": {0, 1}, "pool_max_bwd": {0}, "max_unpool": {0}, "pool_avg": {0}, "pool_avg_bwd": {0}} {
		fixedWrites[name] = w
	}
}
