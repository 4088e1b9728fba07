package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Loss reductions, torch's numbering.
const (
	ReductionNone = 0
	ReductionMean = 1
	ReductionSum  = 2
)

func loadIndex(t Tensor, i int64) int64 {
	var v [1]int64
	loadInt(v[:], t.DType, at(t.Ptr, i*t.Strides[0]*int64(t.DType.Size())), 0)
	return v[0]
}

func loadValue(t Tensor, off int64) float64 {
	var v [1]float64
	loadFloat(v[:], t.DType, at(t.Ptr, off*int64(t.DType.Size())), 0)
	return v[0]
}

// NLLLossForward: self [N,C] log-probabilities, target [N], weight [C] (Ptr nil: ones).
// out is [N] for reduction none, else a 0-dim/1-element tensor; totalWeight 1 element.
func NLLLossForward(out, totalWeight, self, target, weight Tensor, reduction, ignore int64) error {
	if self.Dim() != 2 || target.Dim() != 1 || target.Sizes[0] != self.Sizes[0] {
		return fmt.Errorf("nll_loss: self %v, target %v", self.Sizes, target.Sizes)
	}
	N, C := self.Sizes[0], self.Sizes[1]
	var sum, wsum float64
	for i := int64(0); i < N; i++ {
		t := loadIndex(target, i)
		var l, w float64
		if t != ignore {
			if t < 0 || t >= C {
				return fmt.Errorf("Target %d is out of bounds.", t)
			}
			w = 1
			if weight.Ptr != nil {
				w = loadValue(weight, t*weight.Strides[0])
			}
			l = -w * loadValue(self, i*self.Strides[0]+t*self.Strides[1])
		}
		if reduction == ReductionNone {
			storeFloat(at(out.Ptr, i*out.Strides[0]*int64(out.DType.Size())), 0, out.DType, []float64{l})
		}
		sum += l
		wsum += w
	}
	switch reduction {
	case ReductionMean:
		storeFloat(out.Ptr, 0, out.DType, []float64{sum / wsum})
	case ReductionSum:
		storeFloat(out.Ptr, 0, out.DType, []float64{sum})
	}
	if totalWeight.Ptr != nil {
		tw := wsum
		if reduction == ReductionNone {
			tw = 0
		}
		storeFloat(totalWeight.Ptr, 0, totalWeight.DType, []float64{tw})
	}
	return nil
}

// NLLLossBackward writes grad_input [N,C] (zeroed here): -w[t]*g (/ total_weight for mean).
func NLLLossBackward(gradInput, gradOutput, target, weight, totalWeight Tensor, reduction, ignore int64) error {
	if gradInput.Dim() != 2 || target.Dim() != 1 || target.Sizes[0] != gradInput.Sizes[0] {
		return fmt.Errorf("nll_loss_backward: grad_input %v, target %v", gradInput.Sizes, target.Sizes)
	}
	if err := Fill(gradInput, 0, 0, false); err != nil {
		return err
	}
	N, C := gradInput.Sizes[0], gradInput.Sizes[1]
	tw := loadValue(totalWeight, 0)
	ges := int64(gradInput.DType.Size())
	for i := int64(0); i < N; i++ {
		t := loadIndex(target, i)
		if t == ignore {
			continue
		}
		if t < 0 || t >= C {
			return fmt.Errorf("Target %d is out of bounds.", t)
		}
		w := 1.0
		if weight.Ptr != nil {
			w = loadValue(weight, t*weight.Strides[0])
		}
		var g float64
		if reduction == ReductionNone {
			g = loadValue(gradOutput, i*gradOutput.Strides[0])
		} else {
			g = loadValue(gradOutput, 0)
		}
		v := -w * g
		if reduction == ReductionMean {
			v /= tw
		}
		p := unsafe.Pointer(at(gradInput.Ptr, (i*gradInput.Strides[0]+t*gradInput.Strides[1])*ges))
		storeFloat(p, 0, gradInput.DType, []float64{v})
	}
	return nil
}

// Elementwise parts of the losses, registered as "ew.<name>" ops. The float32 class
// (float32, bfloat16, float16) computes in float32; where torch's CPU kernel does its
// arithmetic in the reduced type itself (Vectorized<BFloat16>, c10::BFloat16 operators),
// the op takes a flag parameter asking to round every intermediate to bfloat16 (rb).
func init() {
	// smooth_l1: in (x, y); p[0] = beta.
	defEW("smooth_l1", 2, ewSmoothL1[float32], ewSmoothL1[float64], nil)
	// smooth_l1_backward: in (x, y, grad); p = (norm, beta).
	defEW("smooth_l1_backward", 3, ewSmoothL1Bwd[float32], ewSmoothL1Bwd[float64], nil)
	// huber: in (x, y); p = (delta, rb).
	defEW("huber", 2, ewHuber[float32], ewHuber[float64], nil)
	// huber_backward: in (x, y, grad); p = (norm, delta, rb).
	defEW("huber_backward", 3, ewHuberBwd[float32], ewHuberBwd[float64], nil)
	// bce: in (x, y); p[0] = rb. (y-1)*max(log1p(-x), -100) - y*max(log(x), -100).
	defEW("bce", 2, ewBCE[float32], ewBCE[float64], nil)
	// bce_backward: in (grad, x, y); p[0] = rb. grad*(x-y) / max((1-x)*x, 1e-12).
	defEW("bce_backward", 3, ewBCEBwd[float32], ewBCEBwd[float64], nil)
	// log_sigmoid: min(x, 0) - log1p(exp(-|x|)); log_sigmoid_buffer: exp(-|x|).
	defEW("log_sigmoid", 1, ewLogSigmoid[float32], ewLogSigmoid[float64], nil)
	defEW("log_sigmoid_buffer", 1, ewLogSigmoidBuf[float32], ewLogSigmoidBuf[float64], nil)
	// log_sigmoid_backward: in (x, buffer, grad).
	defEW("log_sigmoid_backward", 3, ewLogSigmoidBwd[float32], ewLogSigmoidBwd[float64], nil)
	// logit: p = (eps, hasEps, rb); log(z / (1 - z)), z = x clamped to [eps, 1-eps] when hasEps.
	defEW("logit", 1, ewLogit[float32], ewLogit[float64], nil)
	// logit_backward: in (grad, x); p = (eps, hasEps).
	defEW("logit_backward", 2, ewLogitBwd[float32], ewLogitBwd[float64], nil)
}

// rnd rounds v to bfloat16 when on (float32 class only).
func rnd[T flt](v T, on bool) T {
	if on {
		if f, ok := any(v).(float32); ok {
			return T(RoundBF16(f))
		}
	}
	return v
}

func ewSmoothL1[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	beta := T(p[0])
	for i := range o {
		z := a[i] - b[i]
		if z < 0 {
			z = -z
		}
		if z >= beta {
			o[i] = z - T(0.5)*beta
		} else {
			o[i] = T(0.5) * z * z / beta
		}
	}
}

func ewSmoothL1Bwd[T flt](o []T, in [][]T, p []float64) {
	x, y, g := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	norm, beta := T(p[0]), T(p[1])
	for i := range o {
		d := x[i] - y[i]
		var r T
		switch {
		case d >= beta || -d >= beta:
			r = -1
			if d > 0 {
				r = 1
			}
		default:
			r = d / beta
		}
		o[i] = norm * r * g[i]
	}
}

func ewHuber[T flt](o []T, in [][]T, p []float64) {
	a, b := in[0][:len(o)], in[1][:len(o)]
	rb := p[1] != 0
	delta := rnd(T(p[0]), rb)
	half := rnd(T(0.5)*delta, rb)
	for i := range o {
		z := rnd(a[i]-b[i], rb)
		if z < 0 {
			z = -z
		}
		if z >= delta {
			o[i] = delta * rnd(z-half, rb)
		} else {
			o[i] = rnd(T(0.5)*z, rb) * z
		}
	}
}

func ewHuberBwd[T flt](o []T, in [][]T, p []float64) {
	x, y, g := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	rb := p[2] != 0
	norm, delta := rnd(T(p[0]), rb), rnd(T(p[1]), rb)
	for i := range o {
		d := rnd(x[i]-y[i], rb)
		r := d
		if d >= delta || -d >= delta {
			r = -delta
			if d > 0 {
				r = delta
			}
		}
		o[i] = rnd(norm*r, rb) * g[i]
	}
}

func ewBCE[T flt](o []T, in [][]T, p []float64) {
	x, y := in[0][:len(o)], in[1][:len(o)]
	rb := p[0] != 0
	for i := range o {
		l1 := rnd(T(math.Log1p(-float64(x[i]))), rb)
		l0 := rnd(T(math.Log(float64(x[i]))), rb)
		l1, l0 = max(l1, -100), max(l0, -100)
		o[i] = rnd(rnd(y[i]-1, rb)*l1, rb) - rnd(y[i]*l0, rb)
	}
}

func ewBCEBwd[T flt](o []T, in [][]T, p []float64) {
	g, x, y := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	rb := p[0] != 0
	eps := rnd(T(1e-12), rb)
	for i := range o {
		den := max(rnd(rnd(1-x[i], rb)*x[i], rb), eps)
		o[i] = rnd(g[i]*rnd(x[i]-y[i], rb), rb) / den
	}
}

func ewLogSigmoid[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		x := a[i]
		b := T(math.Exp(-math.Abs(float64(x))))
		o[i] = min(x, 0) - T(math.Log1p(float64(b)))
	}
}

func ewLogSigmoidBuf[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = T(math.Exp(-math.Abs(float64(a[i]))))
	}
}

func ewLogSigmoidBwd[T flt](o []T, in [][]T, p []float64) {
	x, b, g := in[0][:len(o)], in[1][:len(o)], in[2][:len(o)]
	for i := range o {
		var md, s T = 0, -1
		if x[i] < 0 {
			md, s = 1, 1
		}
		o[i] = (md - s*(b[i]/(1+b[i]))) * g[i]
	}
}

func ewLogit[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	rb := p[2] != 0
	lo, clampIt := rnd(T(p[0]), rb), p[1] != 0
	hi := rnd(1-lo, rb)
	for i := range o {
		z := a[i]
		if clampIt {
			if z < lo {
				z = lo
			} else if z > hi {
				z = hi
			}
		}
		if z == 1 {
			o[i] = T(math.Inf(1))
			continue
		}
		o[i] = T(math.Log(float64(rnd(z/rnd(1-z, rb), rb))))
	}
}

func ewLogitBwd[T flt](o []T, in [][]T, p []float64) {
	g, x := in[0][:len(o)], in[1][:len(o)]
	lo, hasEps := T(p[0]), p[1] != 0
	hi := 1 - lo
	for i := range o {
		v := x[i]
		switch {
		case hasEps && (v < lo || v > hi):
			o[i] = 0
		case !hasEps && (v < 0 || v > 1):
			o[i] = T(math.NaN())
		default:
			o[i] = g[i] / (v * (1 - v))
		}
	}
}

// sgn of real numbers, torch's CPU formula (0 < x) - (x < 0): NaN gives 0.
func init() {
	defEW("sgn", 1, ewSgn[float32], ewSgn[float64], func(o []int64, in [][]int64, p []float64) {
		a := in[0][:len(o)]
		for i := range o {
			o[i] = b2i(a[i] > 0) - b2i(a[i] < 0)
		}
	})
}

func ewSgn[T flt](o []T, in [][]T, p []float64) {
	a := in[0][:len(o)]
	for i := range o {
		o[i] = b2f[T](a[i] > 0) - b2f[T](a[i] < 0)
	}
}
