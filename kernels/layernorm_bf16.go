package kernels

import "unsafe"

// bfloat16 layer norm in one pass per row (layernorm_bf16_cgo.go): the rows are read as
// bfloat16, computed in float32 and rounded once, with float32 parameters and statistics,
// instead of being widened to float32 scratch, normalised there and narrowed again.

// lnBF16Rows reports whether the fused rows serve these [M,D] operands: bfloat16 with unit
// column strides, cgo, not switched off.
func lnBF16Rows(ts ...*Tensor) bool {
	if !haveBF16Rows || noBF16Rows {
		return false
	}
	for _, t := range ts {
		if t != nil && (t.DType != BFloat16 || t.Dim() != 2 || t.Strides[1] != 1) {
			return false
		}
	}
	return true
}

// f32Vec is t's float32 elements when t is a contiguous float32 vector of n, else nil.
func f32Vec(t *Tensor, n int64) []float32 {
	if t == nil || t.DType != Float32 || n == 0 || (n > 1 && t.Strides[0] != 1) {
		return nil
	}
	return unsafe.Slice((*float32)(t.Ptr), n)
}

func layerNormFwdBF16(out Tensor, mean, rstd *Tensor, x Tensor, g, b []float32, eps float64) {
	M, D := x.Sizes[0], x.Sizes[1]
	meanF, rstdF := f32Vec(mean, M), f32Vec(rstd, M)
	ParallelFor(M, 4*D+1, func(lo, hi int64) {
		n := hi - lo
		sp := getF32(int(D + 2*n))
		defer putF32(sp)
		buf, mb, rb := (*sp)[:D], (*sp)[D:D+n], (*sp)[D+n:D+2*n]
		if meanF != nil {
			mb = meanF[lo:hi]
		}
		if rstdF != nil {
			rb = rstdF[lo:hi]
		}
		lnFwdBF16C(at(x.Ptr, lo*x.Strides[0]*2), x.Strides[0], at(out.Ptr, lo*out.Strides[0]*2), out.Strides[0], n, D,
			g, b, float32(eps), mb, rb, buf)
		for r := int64(0); r < n; r++ {
			if meanF == nil {
				vec{mean}.set(lo+r, float64(mb[r]))
			}
			if rstdF == nil {
				vec{rstd}.set(lo+r, float64(rb[r]))
			}
		}
	})
}

// lnBwdBlock is the rows of one block of parameter-gradient partial sums: a fixed number,
// so that the sums' order does not depend on the worker count.
const lnBwdBlock = 64

func layerNormBwdBF16(gin, gw, gb *Tensor, gout, x Tensor, mu, rs, g []float32) {
	M, D := x.Sizes[0], x.Sizes[1]
	nb := (M + lnBwdBlock - 1) / lnBwdBlock
	wantP := gw != nil || gb != nil
	var parts []float32
	if wantP {
		parts = make([]float32, nb*2*D)
	}
	ParallelFor(nb, lnBwdBlock*D*8, func(lo, hi int64) {
		sp := getF32(int(2*D) + int(2*D))
		defer putF32(sp)
		xb, gbuf := (*sp)[:D], (*sp)[D:2*D]
		for blk := lo; blk < hi; blk++ {
			r0 := blk * lnBwdBlock
			n := min(lnBwdBlock, M-r0)
			dw, db := (*sp)[2*D:3*D], (*sp)[3*D:4*D]
			if wantP {
				dw, db = parts[blk*2*D:blk*2*D+D], parts[blk*2*D+D:(blk+1)*2*D]
			}
			var gp unsafe.Pointer
			var gs int64
			if gin != nil {
				gp, gs = at(gin.Ptr, r0*gin.Strides[0]*2), gin.Strides[0]
			}
			lnBwdBF16C(at(gout.Ptr, r0*gout.Strides[0]*2), gout.Strides[0], at(x.Ptr, r0*x.Strides[0]*2), x.Strides[0],
				gp, gs, n, D, g, mu[r0:r0+n], rs[r0:r0+n], dw, db, xb, gbuf)
		}
	})
	if !wantP {
		return
	}
	dw, db := make([]float32, D), make([]float32, D)
	for blk := int64(0); blk < nb; blk++ {
		p := parts[blk*2*D : (blk+1)*2*D]
		for j := int64(0); j < D; j++ {
			dw[j] += p[j]
			db[j] += p[D+j]
		}
	}
	if gw != nil {
		storeRowT(gw.Ptr, gw.Strides[0]*int64(gw.DType.Size()), gw.DType, dw)
	}
	if gb != nil {
		storeRowT(gb.Ptr, gb.Strides[0]*int64(gb.DType.Size()), gb.DType, db)
	}
}
