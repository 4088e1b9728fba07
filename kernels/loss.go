package kernels

import (
	"fmt"
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
