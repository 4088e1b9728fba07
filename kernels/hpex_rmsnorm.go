package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// RMS normalisation over the last dim (hpex FusedRMSNorm, hpu::rms_norm):
// y = x * rsqrt(mean(x^2) + eps) * gamma, computed in float32 with float64 sums.

func checkRMS(x Tensor, D int64, ts ...Tensor) error {
	for _, t := range append([]Tensor{x}, ts...) {
		if t.DType != Float32 && t.DType != BFloat16 {
			return fmt.Errorf("rms_norm: dtype %v; float32 and bfloat16 are supported", t.DType)
		}
		if !t.IsContiguous() {
			return fmt.Errorf("rms_norm: operands must be contiguous")
		}
	}
	if D <= 0 || x.Numel()%D != 0 {
		return fmt.Errorf("rms_norm: %d elements do not split into rows of %d", x.Numel(), D)
	}
	return nil
}

// RMSNormForward writes y [M,D] and invRMS [M] (float32) from x [M,D] and gamma [D].
func RMSNormForward(y, invRMS, x, gamma Tensor, eps float64) error {
	D := gamma.Numel()
	if err := checkRMS(x, D, y, gamma); err != nil {
		return err
	}
	M := x.Numel() / D
	if y.Numel() != x.Numel() || invRMS.Numel() != M || invRMS.DType != Float32 || !invRMS.IsContiguous() {
		return fmt.Errorf("rms_norm: output shapes do not match the input")
	}
	inv := f32Of(invRMS)
	g := make([]float32, D)
	loadRowsF32(g, rowsView(gamma, D), 0)
	ParallelFor(M, D*2, func(lo, hi int64) {
		xr := make([]float32, D)
		yr := make([]float32, D)
		for r := lo; r < hi; r++ {
			loadRowsF32(xr, rowsView(x, D), r)
			var s0, s1 float64
			i := 0
			for ; i+2 <= len(xr); i += 2 {
				s0 += float64(xr[i]) * float64(xr[i])
				s1 += float64(xr[i+1]) * float64(xr[i+1])
			}
			for ; i < len(xr); i++ {
				s0 += float64(xr[i]) * float64(xr[i])
			}
			iv := float32(1 / math.Sqrt((s0+s1)/float64(D)+eps))
			inv[r] = iv
			for j := range yr {
				yr[j] = xr[j] * iv * g[j]
			}
			storeRowsF32(rowsView(y, D), r, yr)
		}
	})
	return nil
}

// RMSNormBackward writes dx [M,D] and dgamma [D] (float32) from dy, x, gamma and invRMS:
// dx = inv*(gamma*dy) - x*inv^3/D * sum(gamma*dy*x); dgamma = sum over rows of dy*x*inv.
func RMSNormBackward(dx, dgamma, dy, x, gamma, invRMS Tensor) error {
	D := gamma.Numel()
	if err := checkRMS(x, D, dx, dy, gamma); err != nil {
		return err
	}
	M := x.Numel() / D
	if dx.Numel() != x.Numel() || dy.Numel() != x.Numel() || invRMS.Numel() != M || invRMS.DType != Float32 ||
		dgamma.Numel() != D || dgamma.DType != Float32 || !dgamma.IsContiguous() {
		return fmt.Errorf("rms_norm_backward: operand shapes do not match the input")
	}
	inv := f32Of(invRMS)
	g := make([]float32, D)
	loadRowsF32(g, rowsView(gamma, D), 0)
	// Rows split in fixed parts, each with its own dgamma partial, summed in part order.
	parts := int64(max(1, min(int64(Workers())*2, M)))
	per := (M + parts - 1) / parts
	partial := make([][]float64, parts)
	RunParts(int(parts), func(pi int) {
		lo, hi := int64(pi)*per, min(int64(pi+1)*per, M)
		acc := make([]float64, D)
		partial[pi] = acc
		xr, dr, or := make([]float32, D), make([]float32, D), make([]float32, D)
		for r := lo; r < hi; r++ {
			loadRowsF32(xr, rowsView(x, D), r)
			loadRowsF32(dr, rowsView(dy, D), r)
			iv := inv[r]
			var s float64
			for j := range xr {
				s += float64(g[j]*dr[j]) * float64(xr[j])
				acc[j] += float64(dr[j] * xr[j] * iv)
			}
			c := float32(s/float64(D)) * iv * iv * iv
			for j := range or {
				or[j] = iv*(g[j]*dr[j]) - xr[j]*c
			}
			storeRowsF32(rowsView(dx, D), r, or)
		}
	})
	dg := f32Of(dgamma)
	for j := range dg {
		var s float64
		for _, p := range partial {
			if p != nil {
				s += p[j]
			}
		}
		dg[j] = float32(s)
	}
	return nil
}

// rowsView views a contiguous tensor as [numel/D, D].
func rowsView(t Tensor, D int64) Tensor {
	return Tensor{Ptr: t.Ptr, DType: t.DType, Sizes: []int64{t.Numel() / D, D}, Strides: []int64{D, 1}}
}

// f32Of is a contiguous float32 tensor's elements.
func f32Of(t Tensor) []float32 {
	if t.Numel() == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(t.Ptr), t.Numel())
}
