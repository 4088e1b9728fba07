package kernels

import (
	"fmt"
	"math"
)

// Torch-exact Adam/AdamW over a whole parameter group in one call: what
// torch.optim.Adam/AdamW's single-tensor step (capturable=False) computes on CPU, op by op
// and rounding for rounding, for every parameter of the group. hpu_backend lowers the
// per-parameter op groups of a compiled optimizer step to it (dynamo/compile_backend/
// optimizer_pattern.py). The outputs may be the inputs themselves (the update in place,
// as hpu::adam_torch_ runs it) or other tensors.
//
// Per element, in float32 (torch's CPU kernels, with their fused multiply-adds):
//
//	g  = maximize ? -g : g
//	p  = p * decay                     (AdamW, weight_decay != 0: param.mul_(1 - lr*wd))
//	g  = fma(p, l2, g)                 (Adam, weight_decay != 0: grad.add(param, alpha=wd))
//	m  = fma(w1, g - m, m)             (exp_avg.lerp_(grad, 1-b1); |w1| >= 0.5: fma(w1-1, g-m, g))
//	v  = fma(c2*g, g, v*b2)            (exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1-b2))
//	mx = maximum(mx, v)                (amsgrad)
//	p  = p + (negStep*m) / (sqrt(v or mx)/bc2s + eps)
//
// with the step's scalars from its (already incremented) step count t in float64, as
// Python computes them: bc1 = 1-b1^t, bc2s = (1-b2^t)^0.5, negStep = -(lr/bc1). bfloat16
// tensors round every op's result to bfloat16, as torch's bfloat16 CPU ops do.

// AdamTorchParams are one group's hyper-parameters (Python floats, as torch has them).
type AdamTorchParams struct {
	LR, Beta1, Beta2, Eps float64
	// LerpWeight is 1-beta1 and SqWeight 1-beta2, as Python computed them in the step.
	LerpWeight, SqWeight float64
	// Decay is 1-lr*weight_decay (AdamW); L2 the weight decay added to the gradient (Adam).
	Decay, L2         float64
	HasDecay, HasL2   bool
	Maximize, AMSGrad bool
}

// adamTorchConsts are the float32 scalars of one tensor's update.
type adamTorchConsts struct {
	decay, l2, w1, b2, c2, bc2s, eps, negStep float32
	hasDecay, hasL2, maximize, amsgrad        bool
}

func newAdamTorchConsts(p AdamTorchParams, step float64) adamTorchConsts {
	bc1 := 1 - libmPow(p.Beta1, step)
	bc2 := 1 - libmPow(p.Beta2, step)
	return adamTorchConsts{
		decay: float32(p.Decay), l2: float32(p.L2), w1: float32(p.LerpWeight), b2: float32(p.Beta2),
		c2: float32(p.SqWeight), bc2s: float32(libmPow(bc2, 0.5)), eps: float32(p.Eps),
		negStep: float32(-(p.LR / bc1)), hasDecay: p.HasDecay, hasL2: p.HasL2, maximize: p.Maximize,
		amsgrad: p.AMSGrad,
	}
}

// AdamTorchLists are the operand lists of one call, n tensors each; MaxSq and MaxSqOut
// only with AMSGrad.
type AdamTorchLists struct {
	ParamOut, AvgOut, SqOut, MaxSqOut []Tensor
	Steps                             []Tensor // 0-dim float32/float64/bfloat16: the incremented step counts
	Param, Grad, Avg, Sq, MaxSq       []Tensor
}

// AdamTorch runs the update of every tensor of the lists.
func AdamTorch(l AdamTorchLists, p AdamTorchParams) error {
	lists := []optList{l.ParamOut, l.AvgOut, l.SqOut, l.Param, l.Grad, l.Avg, l.Sq}
	if p.AMSGrad {
		lists = append(lists, l.MaxSqOut, l.MaxSq)
	} else if len(l.MaxSq) != 0 || len(l.MaxSqOut) != 0 {
		return fmt.Errorf("adam_torch: max_exp_avg_sq lists given without amsgrad")
	}
	if err := checkOptLists("adam_torch", lists...); err != nil {
		return err
	}
	n := len(l.Param)
	if len(l.Steps) != n {
		return fmt.Errorf("adam_torch: %d step counts for %d parameters", len(l.Steps), n)
	}
	for _, list := range lists[1:] {
		for i, t := range list {
			if t.DType != l.Param[i].DType {
				return fmt.Errorf("adam_torch: tensor %d has dtype %v in one list and %v in another", i, t.DType, l.Param[i].DType)
			}
		}
	}
	consts := make([]adamTorchConsts, n)
	for i, s := range l.Steps {
		step, err := loadScalar(s)
		if err != nil {
			return fmt.Errorf("adam_torch: step %d: %w", i, err)
		}
		consts[i] = newAdamTorchConsts(p, step)
	}
	ops := make([]adamTorchOperands, n)
	for i := range ops {
		ops[i] = adamTorchOperands{p: l.Param[i], g: l.Grad[i], m: l.Avg[i], v: l.Sq[i],
			po: l.ParamOut[i], mo: l.AvgOut[i], vo: l.SqOut[i]}
		if p.AMSGrad {
			ops[i].mx, ops[i].mxo = l.MaxSq[i], l.MaxSqOut[i]
		}
	}
	shares := adamShares(l.Param)
	if len(shares) == 1 {
		adamTorchRun(consts, ops, shares[0])
		return nil
	}
	RunParts(len(shares), func(wi int) { adamTorchRun(consts, ops, shares[wi]) })
	return nil
}

// adamBatch is the most float32 elements whose square roots go to one vsSqrt call (the
// scratch of one worker).
const adamBatch = 32 * 1024

// adamMinShare is the fewest elements worth a worker of their own: below it the hand-off
// costs more than the second core saves.
const adamMinShare = 8 * 1024

// adamShares splits the group's elements, as if its tensors were laid end to end, into
// one contiguous share per worker (each a list of tensor pieces), so that uneven tensors
// (a weight and its bias) balance over the workers.
func adamShares(params []Tensor) [][]optPart {
	var total int64
	for _, t := range params {
		total += t.Numel()
	}
	w := int64(min(Workers(), max(1, int(total/adamMinShare))))
	shares := make([][]optPart, w)
	bound := func(s int64) int64 { return s * total / w } // share s starts here
	var base, s int64
	for ti, t := range params {
		n := t.Numel()
		for lo := int64(0); lo < n; {
			for s < w-1 && base+lo >= bound(s+1) {
				s++
			}
			end := n
			if s < w-1 {
				end = min(n, bound(s+1)-base)
			}
			shares[s] = append(shares[s], optPart{ti, lo, end})
			lo = end
		}
		base += n
	}
	return shares
}

// adamTorchOperands are one tensor's operands (mx, mxo unset without amsgrad).
type adamTorchOperands struct {
	p, g, m, v, mx, po, mo, vo, mxo Tensor
}

// adamTorchChunkGo is the portable update of elements [lo, hi). Its fused multiply-adds
// are float64 ones rounded to float32 (a product of two float32 is exact in float64; the
// sum is rounded twice, which can differ from a float32 fma in the last bit in rare
// cases); the cgo build runs the C kernel, with single-rounding fmaf.
func adamTorchChunkGo(k *adamTorchConsts, o *adamTorchOperands, lo, hi int64) {
	bf := o.p.DType == BFloat16
	ld := func(t Tensor, i int64) float32 {
		if bf {
			return BF16ToF32(*(*uint16)(at(t.Ptr, i*2)))
		}
		return *(*float32)(at(t.Ptr, i*4))
	}
	st := func(t Tensor, i int64, x float32) {
		if bf {
			*(*uint16)(at(t.Ptr, i*2)) = F32ToBF16(x)
			return
		}
		*(*float32)(at(t.Ptr, i*4)) = x
	}
	r := func(x float32) float32 { // the rounding of one op's result to the storage dtype
		if bf {
			return BF16ToF32(F32ToBF16(x))
		}
		return x
	}
	fma := func(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
	for i := lo; i < hi; i++ {
		g, p, m, v := ld(o.g, i), ld(o.p, i), ld(o.m, i), ld(o.v, i)
		if k.maximize {
			g = -g
		}
		if k.hasDecay {
			p = r(p * k.decay)
		}
		if k.hasL2 {
			g = r(fma(p, k.l2, g))
		}
		if k.w1 < 0.5 && k.w1 > -0.5 {
			m = r(fma(k.w1, g-m, m))
		} else {
			m = r(fma(k.w1-1, g-m, g))
		}
		v = r(v * k.b2)
		v = r(fma(k.c2*g, g, v))
		u := v
		if k.amsgrad {
			u = maximumNaN(ld(o.mx, i), v)
			st(o.mxo, i, u)
		}
		d := r(r(r(float32(math.Sqrt(float64(u))))/k.bc2s) + k.eps)
		p = r(p + (k.negStep*m)/d)
		st(o.po, i, p)
		st(o.mo, i, m)
		st(o.vo, i, v)
	}
}

// maximumNaN is torch.maximum(a, b) on CPU: NaN when either is NaN, else the larger (b
// when they compare equal, as the vector max instruction returns).
func maximumNaN(a, b float32) float32 {
	if a != a {
		return a
	}
	if b != b {
		return b
	}
	if a > b {
		return a
	}
	return b
}
