package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// Reductions over [M,N] views, softmax, losses.
func init() {
	// red.reduce: T = [out [M], in [M,N]]; I = [kind]; F = kind parameters.
	Register("red.reduce", 2, func(c *Call) error {
		if len(c.I) < 1 {
			return fmt.Errorf("expected the reduction kind")
		}
		p := append(append([]float64(nil), c.F...), 0, 0)
		return kernels.Reduce(int(c.I[0]), c.T[0], c.T[1], p)
	})
	// red.argreduce: T = [values [M] (or a 0-element placeholder), indices [M], in [M,N]];
	// I = [is_min, has_values].
	Register("red.argreduce", 3, func(c *Call) error {
		if len(c.I) < 2 {
			return fmt.Errorf("expected (is_min, has_values)")
		}
		vals := c.T[0]
		if c.I[1] == 0 {
			vals.Ptr = nil
		} else if vals.Dim() != 1 || vals.Sizes[0] != c.T[2].Sizes[0] {
			return fmt.Errorf("values must be 1-D of %d", c.T[2].Sizes[0])
		}
		return kernels.ArgReduce(c.I[0] != 0, vals, c.T[1], c.T[2])
	})
	// red.isum: T = [out [M] (integer), in [M,N] (integer or bool)]: exact int64 row sums.
	Register("red.isum", 2, func(c *Call) error { return kernels.SumInt(c.T[0], c.T[1]) })
	// red.sum: T = [out (the input's rank, size 1 on reduced dims), in];
	// I = [mean, torch's thread count, reduced flag per input dim...].
	Register("red.sum", 2, func(c *Call) error {
		if len(c.I) != 2+c.T[1].Dim() {
			return fmt.Errorf("expected (mean, threads) and one reduced flag per input dim")
		}
		red := make([]bool, c.T[1].Dim())
		for i := range red {
			red[i] = c.I[2+i] != 0
		}
		return kernels.Sum(c.T[0], c.T[1], red, kernels.SumOpts{Mean: c.I[0] != 0, Threads: int(c.I[1])})
	})
	Register("red.cumsum", 2, func(c *Call) error { return kernels.Cumsum(c.T[0], c.T[1]) })
	// red.softmax: T = [out, in] ([M,N], the softmax axis last); I = [log, last_dim, inner]
	// (last_dim: the axis is the input's last dim; inner: product of the sizes after it).
	Register("red.softmax", 2, func(c *Call) error {
		if len(c.I) < 3 {
			return fmt.Errorf("expected (log, last_dim, inner)")
		}
		return kernels.Softmax(c.I[0] != 0, c.T[0], c.T[1], kernels.SoftmaxOpts{LastDim: c.I[1] != 0, Inner: c.I[2]})
	})
	// red.softmax_backward: T = [grad_input, grad_output, output]; I = [log, last_dim]
	// (last_dim: the axis is the tensor's last dim; absent means not).
	Register("red.softmax_backward", 3, func(c *Call) error {
		if len(c.I) < 1 {
			return fmt.Errorf("expected the log flag")
		}
		return kernels.SoftmaxBackward(c.I[0] != 0, c.T[0], c.T[1], c.T[2], len(c.I) > 1 && c.I[1] != 0)
	})
	// loss.nll_forward: T = [out, total_weight, self [N,C], target [N], weight [C]];
	// I = [reduction, ignore_index, has_weight].
	Register("loss.nll_forward", 5, func(c *Call) error {
		if len(c.I) < 3 {
			return fmt.Errorf("expected (reduction, ignore_index, has_weight)")
		}
		w := c.T[4]
		if c.I[2] == 0 {
			w.Ptr = nil
		}
		return kernels.NLLLossForward(c.T[0], c.T[1], c.T[2], c.T[3], w, c.I[0], c.I[1])
	})
	// loss.nll_backward: T = [grad_input [N,C], grad_output, target, weight, total_weight].
	Register("loss.nll_backward", 5, func(c *Call) error {
		if len(c.I) < 3 {
			return fmt.Errorf("expected (reduction, ignore_index, has_weight)")
		}
		w := c.T[3]
		if c.I[2] == 0 {
			w.Ptr = nil
		}
		return kernels.NLLLossBackward(c.T[0], c.T[1], c.T[2], w, c.T[4], c.I[0], c.I[1])
	})
}
