package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// FusedAdamW with 8-bit float moments (moments_dtype float8_e4m3fn / float8_e5m2): each
// moment tensor is stored as fp8 values q with a power-of-two scale s of its own (a
// one-element tensor of the parameter's dtype), the moment being q*s. After the update the
// scale is chosen from the moment's amax so that amax/s fits the format's range: 240 for
// e4m3fn (the largest value Gaudi's e4m3 keeps) and 57344 for e5m2.

// fp8MomentMax is the largest magnitude a scaled moment may take in format d.
func fp8MomentMax(d DType) float64 {
	if d == Float8E5M2 {
		return 57344
	}
	return 240
}

// pow2Scale is the power of two s with amax/s <= fmax, as small as possible (1 for a
// zero or non-finite amax).
func pow2Scale(amax, fmax float64) float64 {
	if amax == 0 || math.IsNaN(amax) || math.IsInf(amax, 0) {
		return 1
	}
	return math.Exp2(math.Ceil(math.Log2(amax / fmax)))
}

// momentIO reads and writes one moment operand, fp8 with a scale or a plain float.
type momentIO struct {
	t     Tensor
	scale float32 // the stored scale (fp8 only)
}

func (mo momentIO) read(io *chunkIO, k int, lo, hi int64) []float32 {
	b := io.scratch(k, int(hi-lo))
	if mo.t.DType == Float32 { // a copy: pass 1 must leave the stored moments as they were
		copy(b, unsafe.Slice((*float32)(at(mo.t.Ptr, lo*4)), len(b)))
		return b
	}
	if !mo.t.DType.IsFloat8() {
		return io.view(k, mo.t, lo, hi)
	}
	src := unsafe.Slice((*uint8)(at(mo.t.Ptr, lo)), len(b))
	for i, q := range src {
		b[i] = Float8ToF32(mo.t.DType, q) * mo.scale
	}
	return b
}

func (mo momentIO) write(io *chunkIO, lo, hi int64, vals []float32, scale float32) {
	switch mo.t.DType {
	case Float32:
		copy(unsafe.Slice((*float32)(at(mo.t.Ptr, lo*4)), len(vals)), vals)
		return
	case BFloat16:
		io.flush(mo.t, lo, hi, vals)
		return
	}
	dst := unsafe.Slice((*uint8)(at(mo.t.Ptr, lo)), len(vals))
	inv := 1 / scale
	for i, x := range vals {
		dst[i] = F32ToFloat8(mo.t.DType, x*inv)
	}
}

// AdamWScaled is AdamW (same formula) where m and v may be fp8 tensors scaled by the
// one-element tensors mScale and vScale (written with the new scales; unused for a moment
// that is not fp8). Per tensor: pass 1 updates w and finds the new moments' amax without
// storing them; pass 2 recomputes the moments from the unchanged old ones and stores them
// with the new scales.
func AdamWScaled(negStep, wdFactor Tensor, w, g, m, v, mScale, vScale []Tensor, p AdamWParams) error {
	if err := checkOptLists("optimizer_adamw", w, g); err != nil {
		return err
	}
	n := len(w)
	if len(m) != n || len(v) != n || len(mScale) != n || len(vScale) != n {
		return fmt.Errorf("optimizer_adamw: %d weights but %d/%d moments and %d/%d scales", n, len(m), len(v),
			len(mScale), len(vScale))
	}
	for i := range w {
		for _, t := range []Tensor{m[i], v[i]} {
			if t.DType != Float32 && t.DType != BFloat16 && !t.DType.IsFloat8() {
				return fmt.Errorf("optimizer_adamw: moment %d has dtype %v", i, t.DType)
			}
			if !t.IsContiguous() || t.Numel() != w[i].Numel() {
				return fmt.Errorf("optimizer_adamw: moment %d is not a contiguous tensor of the weight's size", i)
			}
		}
	}
	k, err := newAdamWConsts(negStep, wdFactor, p)
	if err != nil {
		return err
	}
	for i := range w {
		ms, err := loadScalar(mScale[i])
		if err != nil {
			return fmt.Errorf("optimizer_adamw: exp_avg_scales: %v", err)
		}
		vs, err := loadScalar(vScale[i])
		if err != nil {
			return fmt.Errorf("optimizer_adamw: exp_avg_sq_scales: %v", err)
		}
		mo, vo := momentIO{m[i], float32(ms)}, momentIO{v[i], float32(vs)}
		parts := optParts(optList{w[i]})
		amaxM := make([]float32, len(parts))
		amaxV := make([]float32, len(parts))
		ParallelFor(int64(len(parts)), optChunk, func(lo, hi int64) {
			io := newChunkIO(4)
			for pi := lo; pi < hi; pi++ {
				pt := parts[pi]
				ws := io.view(0, w[i], pt.lo, pt.hi)
				mv, vv := mo.read(io, 2, pt.lo, pt.hi), vo.read(io, 3, pt.lo, pt.hi)
				k.chunk(ws, io.view(1, g[i], pt.lo, pt.hi), mv, vv)
				io.flush(w[i], pt.lo, pt.hi, ws)
				var am, av float32
				for j := range mv {
					am = max(am, float32(math.Abs(float64(mv[j]))))
					av = max(av, vv[j])
				}
				amaxM[pi], amaxV[pi] = am, av
			}
		})
		newM, newV := float32(1), float32(1)
		if m[i].DType.IsFloat8() {
			newM = float32(pow2Scale(float64(maxOf(amaxM)), fp8MomentMax(m[i].DType)))
		}
		if v[i].DType.IsFloat8() {
			newV = float32(pow2Scale(float64(maxOf(amaxV)), fp8MomentMax(v[i].DType)))
		}
		ParallelFor(int64(len(parts)), optChunk, func(lo, hi int64) {
			io := newChunkIO(4)
			for pi := lo; pi < hi; pi++ {
				pt := parts[pi]
				mv, vv := mo.read(io, 2, pt.lo, pt.hi), vo.read(io, 3, pt.lo, pt.hi)
				k.moments(io.view(1, g[i], pt.lo, pt.hi), mv, vv)
				mo.write(io, pt.lo, pt.hi, mv, newM)
				vo.write(io, pt.lo, pt.hi, vv, newV)
			}
		})
		if m[i].DType.IsFloat8() {
			if err := storeScalar(mScale[i], float64(newM)); err != nil {
				return fmt.Errorf("optimizer_adamw: exp_avg_scales: %v", err)
			}
		}
		if v[i].DType.IsFloat8() {
			if err := storeScalar(vScale[i], float64(newV)); err != nil {
				return fmt.Errorf("optimizer_adamw: exp_avg_sq_scales: %v", err)
			}
		}
	}
	return nil
}

func maxOf(xs []float32) float32 {
	var m float32
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
