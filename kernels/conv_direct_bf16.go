package kernels

import "unsafe"

// The direct convolution (conv_direct.go) for bfloat16 operands on VDPBF16PS
// (conv_direct_bf16_cgo.go): no operand widened in memory, products summed in float32,
// each result (bias added in float32) rounded once to bfloat16, as the im2col bf16 path
// (conv_bf16dot.go) does. Forward and input gradient pair the taps over channels (an odd
// channel count gets a zero partner); the weight gradient pairs neighbouring output
// positions of a row, so it needs an even output width.

// convDirectBF16FwdOK reports whether the bfloat16 forward of g runs here (every operand
// bfloat16 with dense planes, checked by the caller through convBF16DotOK).
func convDirectBF16FwdOK(g convGeom, p ConvParams) bool {
	return convDirect && bf16DotCPU && p.StrideW == 1 && g.Kc >= dconvMinK && g.Og >= dconvMinO && g.P > 0
}

// dconvBF16WeightMinK is the fewest taps for the bfloat16 weight gradient: unlike the
// float32 one it beats the im2col path even on the CNN's first layer (Kc 9: 676 -> 328 us
// per core, oneDNN 354), whose per-sample GEMMs are tiny.
const dconvBF16WeightMinK = 8

// convDirectBF16BwdOK reports whether the requested bfloat16 gradients of g run here.
func convDirectBF16BwdOK(g convGeom, p ConvParams, input, weight bool) bool {
	if !convDirect || !bf16DotCPU || p.StrideH != 1 || p.StrideW != 1 || g.P == 0 || g.Kc == 0 || g.Og == 0 {
		return false
	}
	if weight && (g.Og < dconvMinO || g.Kc < dconvBF16WeightMinK || g.OW%2 != 0) {
		return false
	}
	if input && (g.Cg < dconvMinO || g.Og*g.KH*g.KW < dconvMinK || p.PadH > p.DilH*(g.KH-1) ||
		p.PadW > p.DilW*(g.KW-1)) {
		return false
	}
	return weight || input
}

// dconvBF16At returns element (a, b, c, d) of the 4-D bfloat16 tensor t.
func dconvBF16At(t Tensor, a, b, c, d int) uint32 {
	off := int64(a)*t.Strides[0] + int64(b)*t.Strides[1] + int64(c)*t.Strides[2] + int64(d)*t.Strides[3]
	return uint32(*(*uint16)(at(t.Ptr, off*2)))
}

// dconvPackPairs packs group gi's weights for hpusim_dconv_bf16: out rows i < rows, tap
// pairs (c2, kh, kw) pairing channels 2*c2 and 2*c2+1 (< chans); val(i, c, kh, kw) reads
// one weight.
func dconvPackPairs(dst []uint32, rows, chans, kh, kw int, val func(i, c, h, w int) uint32) {
	khw := kh * kw
	k2 := (chans + 1) / 2 * khw
	dconvPack(dst, rows, k2, func(i, k int) uint32 {
		c2, t := k/khw, k%khw
		h, w := t/kw, t%kw
		v := val(i, 2*c2, h, w)
		if 2*c2+1 < chans {
			v |= val(i, 2*c2+1, h, w) << 16
		}
		return v
	})
}

func convFwdDirectBF16(out, in, weight Tensor, bias *Tensor, g convGeom, p ConvParams) {
	c2 := (g.Cg + 1) / 2
	k2 := c2 * g.KH * g.KW
	op := roundUp16(g.Og)
	wt := make([]uint32, g.G*op*k2)
	for gi := 0; gi < g.G; gi++ {
		dconvPackPairs(wt[gi*op*k2:], g.Og, g.Cg, g.KH, g.KW, func(i, c, h, w int) uint32 {
			return dconvBF16At(weight, gi*g.Og+i, c, h, w)
		})
	}
	var b []float32
	if bias != nil {
		b = load1D[float32](*bias)
	}
	hp, wp := g.H+2*p.PadH, g.W+2*p.PadW
	koff := dconvOffsets(c2, g.KH, g.KW, p.DilH, p.DilW, hp, wp)
	d := dconvGeom{K: k2, O: g.Og, OH: g.OH, OW: g.OW, Wp: wp, SH: p.StrideH}
	ParallelFor(int64(g.N), sampleCost(g), func(lo, hi int64) {
		xf := getF32(c2 * hp * wp) // uint32 pairs in float32-sized slots
		defer putF32(xf)
		xb := u32View(*xf)
		yf := getF32(g.O * g.P)
		defer putF32(yf)
		y := *yf
		for n := int(lo); n < int(hi); n++ {
			x := sampleSlice[uint16](in, n)
			for gi := 0; gi < g.G; gi++ {
				dconvPadPairs(xb, x[gi*g.Cg*g.H*g.W:], g.Cg, g.H, g.W, p.PadH, p.PadW, hp, wp)
				var bg []float32
				if b != nil {
					bg = b[gi*g.Og:]
				}
				dconvBF16(xb, wt[gi*op*k2:], koff, d, y[gi*g.Og*g.P:], bg)
			}
			f32ToBF16s(sampleSlice[uint16](out, n), y)
		}
	})
}

// u32View reinterprets a float32 scratch buffer as uint32 slots.
func u32View(f []float32) []uint32 {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&f[0])), len(f))
}

// convBwdDirectBF16 computes the requested gradients: gin rounded to bfloat16, dw (O*Kc,
// zeroed) and db (O) the float32 results the caller stores.
func convBwdDirectBF16(gin *Tensor, dw, db []float32, gout, in, weight Tensor, g convGeom, p ConvParams) {
	hp, wp := g.H+2*p.PadH, g.W+2*p.PadW
	koff := dconvOffsets(g.Cg, g.KH, g.KW, p.DilH, p.DilW, hp, wp)
	wd := dconvGeom{K: g.Kc, O: g.Og, OH: g.OH, OW: g.OW, Wp: wp, SH: 1}
	ph2, pw2 := p.DilH*(g.KH-1)-p.PadH, p.DilW*(g.KW-1)-p.PadW
	hp2, wp2 := g.OH+2*ph2, g.OW+2*pw2
	o2 := (g.Og + 1) / 2
	k2 := o2 * g.KH * g.KW
	cp := roundUp16(g.Cg)
	var wt []uint32
	var koff2 []int64
	if gin != nil {
		wt = make([]uint32, g.G*cp*k2)
		for gi := 0; gi < g.G; gi++ {
			// W'[c][(o, kh, kw)] = W[o][c][KH-1-kh][KW-1-kw], paired over o
			dconvPackPairs(wt[gi*cp*k2:], g.Cg, g.Og, g.KH, g.KW, func(c, o, h, w int) uint32 {
				return dconvBF16At(weight, gi*g.Og+o, c, g.KH-1-h, g.KW-1-w)
			})
		}
		koff2 = dconvOffsets(o2, g.KH, g.KW, p.DilH, p.DilW, hp2, wp2)
	}
	id := dconvGeom{K: k2, O: g.Cg, OH: g.H, OW: g.W, Wp: wp2, SH: 1}
	op := roundUp16(g.Og)
	var sums []float32
	if db != nil {
		sums = make([]float32, g.N*g.O)
	}
	var parts gradParts[float32]
	ParallelFor(int64(g.N), sampleCost(g), func(lo, hi int64) {
		var dyw, acc []float32
		var xb []uint16
		var dyt, dyp []uint32
		var dx []float32
		if sums != nil {
			b := getF32(g.O * g.P)
			defer putF32(b)
			dyw = *b
		}
		if dw != nil {
			f, b := bf16Scratch(g.Cg * hp * wp)
			defer putF32(f)
			xb = b
			t := getF32(g.OH * (g.OW / 2) * op)
			defer putF32(t)
			dyt = u32View(*t)
			acc = make([]float32, g.G*op*g.Kc)
		}
		if gin != nil {
			t := getF32(o2 * hp2 * wp2)
			defer putF32(t)
			dyp = u32View(*t)
			b := getF32(g.C * g.H * g.W)
			defer putF32(b)
			dx = *b
		}
		for n := int(lo); n < int(hi); n++ {
			dy := sampleSlice[uint16](gout, n)
			if sums != nil {
				bf16ToF32s(dyw, dy) // exact, then each row summed in order from zero
				convRowSums(dyw, sums[n*g.O:(n+1)*g.O], g.O, g.P)
			}
			for gi := 0; gi < g.G; gi++ {
				dyg := dy[gi*g.Og*g.P:]
				if dw != nil {
					x := sampleSlice[uint16](in, n)
					dconvPad16(xb, x[gi*g.Cg*g.H*g.W:], g.Cg, g.H, g.W, p.PadH, p.PadW, hp, wp)
					dconvTransposePairs(dyt, dyg, g.Og, g.OH, g.OW, op)
					dconvWeightGradBF16(xb, koff, dyt, wd, acc[gi*op*g.Kc:])
				}
				if gin != nil {
					dconvPadPairs(dyp, dyg, g.Og, g.OH, g.OW, ph2, pw2, hp2, wp2)
					dconvBF16(dyp, wt[gi*cp*k2:], koff2, id, dx[gi*g.Cg*g.H*g.W:], nil)
				}
			}
			if gin != nil {
				f32ToBF16s(sampleSlice[uint16](*gin, n), dx)
			}
		}
		if acc != nil {
			parts.add(lo, acc)
		}
	})
	if dw != nil {
		all := make([]float32, g.G*op*g.Kc)
		parts.sumInto(all)
		for gi := 0; gi < g.G; gi++ {
			dconvUnpack(dw[gi*g.Og*g.Kc:], all[gi*op*g.Kc:], g.Og, g.Kc)
		}
	}
	addSampleSums(db, sums, g.N, g.O)
}
