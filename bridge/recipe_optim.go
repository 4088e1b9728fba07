package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// Torch-exact optimizer steps over a whole parameter group, the ops hpu_backend lowers a
// compiled torch.optim step to (dynamo/compile_backend/optimizer_pattern.py):
//
//	optim.adam_torch  T (p_out[n], avg_out[n], sq_out[n][, max_out[n]], step[n], p[n], g[n],
//	                     avg[n], sq[n][, max_sq[n]])
//	                  I (n, flags: 1 AdamW decay, 2 Adam L2, 4 maximize, 8 amsgrad)
//	                  F (lr, beta1, beta2, eps, 1-beta1, 1-beta2, 1-lr*wd, wd)
//
// The step counts are 0-dim tensors read when the kernel runs (the incremented counts),
// so a recipe takes each step's bias corrections without recompiling.
const (
	adamFlagDecay = 1 << iota
	adamFlagL2
	adamFlagMaximize
	adamFlagAMSGrad
)

func init() {
	Register("optim.adam_torch", -1, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		if err := needFloats(c, 8); err != nil {
			return err
		}
		flags := c.I[1]
		if flags&^(adamFlagDecay|adamFlagL2|adamFlagMaximize|adamFlagAMSGrad) != 0 {
			return fmt.Errorf("optim.adam_torch: unknown flags %#x", flags)
		}
		ams := flags&adamFlagAMSGrad != 0
		k := 8 // out param, avg, sq; step, param, grad, avg, sq
		if ams {
			k = 10
		}
		l, err := splitLists(c, k, 0)
		if err != nil {
			return err
		}
		lists := kernels.AdamTorchLists{ParamOut: l[0], AvgOut: l[1], SqOut: l[2]}
		rest := l[3:]
		if ams {
			lists.MaxSqOut, rest = l[3], l[4:]
		}
		lists.Steps, lists.Param, lists.Grad, lists.Avg, lists.Sq = rest[0], rest[1], rest[2], rest[3], rest[4]
		if ams {
			lists.MaxSq = rest[5]
		}
		p := kernels.AdamTorchParams{
			LR: c.F[0], Beta1: c.F[1], Beta2: c.F[2], Eps: c.F[3], LerpWeight: c.F[4], SqWeight: c.F[5],
			Decay: c.F[6], L2: c.F[7], HasDecay: flags&adamFlagDecay != 0, HasL2: flags&adamFlagL2 != 0,
			Maximize: flags&adamFlagMaximize != 0, AMSGrad: ams,
		}
		return kernels.AdamTorch(lists, p)
	})
}
