package kernels

// Direct float32 convolution with the output channels in the vector lanes
// (conv_direct_cgo.go), for layers with enough taps and channels to fill the AVX-512
// register tiles (the reference CNN's 16->32 layer: the im2col and padded-grid paths ran
// it at 0.6-0.75x of oneDNN per core, mostly in moving data and in lanes wasted on grid
// padding and 12-row panels of 32 channels):
//
//	forward:      y[o][oh][ow]  = sum_k W[o][k] * xp[koff(k) + oh*sh*Wp + ow]
//	input grad:   the forward of dy, zero-padded by dil*(K-1)-pad, with W flipped and
//	              transposed (stride 1 only)
//	weight grad:  dW[o][k]     += sum_p dy[o][p] * xp[koff(k) + p's offset], with dy
//	              transposed per sample so that its channels fill the lanes; per-worker
//	              sums added in sample order at the end
//
// xp is the sample's group zero-padded to [Cg][H+2ph][W+2pw]; koff(k) the offset of tap
// k = (c, kh, kw) in it. Each output element's taps are summed in k order from zero, so
// results agree with the im2col path to float32 rounding, not bit for bit.

// convDirect enables these paths (tests and benchmarks compare them with the others).
var convDirect = true

// dconvCPU reports whether the float32 direct kernels run on this CPU: the AVX-512 ones
// (conv_direct_cgo.go) or the AVX2 + FMA ones (conv_direct_avx2_cgo.go).
func dconvCPU() bool { return f32DotCPU || dconvAVX2 }

// dconvMinK is the fewest taps (Cg*KH*KW) worth a register tile: the first CNN layer
// (Kc 9) is faster as im2col + GEMM.
const dconvMinK = 32

// dconvMinO is the fewest output channels a group needs: fewer leave most lanes empty.
const dconvMinO = 12

// dconvGeom is one direct convolution: K taps, O output channels of OH x OW, input rows
// of Wp floats (padded), row stride SH along H (1 along W).
type dconvGeom struct{ K, O, OH, OW, Wp, SH int }

// convDirectFwdOK reports whether the forward of g runs here (dense float32 operands
// checked by the caller).
func convDirectFwdOK(g convGeom, p ConvParams) bool {
	return convDirect && convPerSample && dconvCPU() && p.StrideW == 1 && g.Kc >= dconvMinK && g.Og >= dconvMinO &&
		g.P > 0 && dconvChainOK(g.Kc)
}

// dconvAVX2MaxK is the most taps the AVX2 kernels sum in one float32 chain per element:
// longer chains (r3d_18's 64-channel 3x3x3 input gradients, 576 taps a 2-D slice) lost
// enough that batch norm's backward amplified it into the stem's weight gradient
// (tests/test_conv_any.py::test_r3d_18_trains_without_fallback: 1.5e-3 of the largest
// value against CPU's 1e-5); those keep the im2col path's blocked GEMM sums.
const dconvAVX2MaxK = 512

// dconvChainOK reports whether a direct sum over k taps is short enough for this CPU's
// kernels (the AVX-512 ones keep their previous routing).
func dconvChainOK(k int) bool { return f32DotCPU || k <= dconvAVX2MaxK }

// convDirectBwdOK reports whether the requested gradients of g run here: stride 1, and
// for the input gradient padding at most dil*(K-1) (the flipped convolution's padding
// is not negative) with enough taps and input channels.
func convDirectBwdOK(g convGeom, p ConvParams, input, weight bool) bool {
	if !convDirect || !convPerSample || !dconvCPU() || p.StrideH != 1 || p.StrideW != 1 || g.P == 0 ||
		g.Kc == 0 || g.Og == 0 {
		return false
	}
	if weight && (g.Og < dconvMinO || g.Kc < dconvMinK) {
		return false
	}
	if input && (g.Cg < dconvMinO || g.Og*g.KH*g.KW < dconvMinK || !dconvChainOK(g.Og*g.KH*g.KW) || p.PadH > p.DilH*(g.KH-1) ||
		p.PadW > p.DilW*(g.KW-1)) {
		return false
	}
	return weight || input
}

func roundUp16(n int) int { return (n + 15) / 16 * 16 }

// dconvPack packs rows [0, o) of a weight matrix (element (i, k) = get(i, k), k < K)
// for hpusim_dconv_f32: per block of 32 rows at o0, [K][width] at o0*K (width 16 when at
// most 16 rows remain), zero past o.
func dconvPack[E float32 | uint32](dst []E, o, k int, get func(i, k int) E) {
	for o0 := 0; o0 < o; o0 += 32 {
		width := 32
		if o-o0 <= 16 {
			width = 16
		}
		blk := dst[o0*k : o0*k+k*width]
		for kk := 0; kk < k; kk++ {
			row := blk[kk*width : (kk+1)*width]
			for i := range row {
				if o0+i < o {
					row[i] = get(o0+i, kk)
				} else {
					row[i] = 0
				}
			}
		}
	}
}

// dconvUnpack adds the sums in hpusim_dconv_f32's weight layout into dst[i*k + kk].
func dconvUnpack(dst, src []float32, o, k int) {
	for o0 := 0; o0 < o; o0 += 32 {
		width := 32
		if o-o0 <= 16 {
			width = 16
		}
		for kk := 0; kk < k; kk++ {
			row := src[o0*k+kk*width : o0*k+(kk+1)*width]
			for i := 0; i < width && o0+i < o; i++ {
				dst[(o0+i)*k+kk] += row[i]
			}
		}
	}
}

// dconvOffsets returns the tap offsets koff(k), k = (c, kh, kw), in padded planes of
// hp x wp.
func dconvOffsets(c, kh, kw, dh, dw, hp, wp int) []int64 {
	koff := make([]int64, 0, c*kh*kw)
	for ci := 0; ci < c; ci++ {
		for i := 0; i < kh; i++ {
			for j := 0; j < kw; j++ {
				koff = append(koff, int64(ci*hp*wp+i*dh*wp+j*dw))
			}
		}
	}
	return koff
}

// convFwdDirect is convFwdSamples for convDirectFwdOK geometries (dense float32).
func convFwdDirect(out, in Tensor, w, b []float32, g convGeom, p ConvParams) {
	op := roundUp16(g.Og)
	wt := getConvBuf[float32](g.G * op * g.Kc)
	defer putConvBuf(wt)
	for gi := 0; gi < g.G; gi++ {
		wg := w[gi*g.Og*g.Kc:]
		dconvPack((*wt)[gi*op*g.Kc:], g.Og, g.Kc, func(i, k int) float32 { return wg[i*g.Kc+k] })
	}
	hp, wp := g.H+2*p.PadH, g.W+2*p.PadW
	koff := dconvOffsets(g.Cg, g.KH, g.KW, p.DilH, p.DilW, hp, wp)
	d := dconvGeom{K: g.Kc, O: g.Og, OH: g.OH, OW: g.OW, Wp: wp, SH: p.StrideH}
	ParallelFor(int64(g.N), sampleCost(g), func(lo, hi int64) {
		xb := getConvBuf[float32](g.Cg * hp * wp)
		defer putConvBuf(xb)
		for n := int(lo); n < int(hi); n++ {
			x, y := sampleSlice[float32](in, n), sampleSlice[float32](out, n)
			for gi := 0; gi < g.G; gi++ {
				dconvPad(*xb, x[gi*g.Cg*g.H*g.W:], g.Cg, g.H, g.W, p.PadH, p.PadW, hp, wp)
				var bg []float32
				if b != nil {
					bg = b[gi*g.Og:]
				}
				dconvF32(*xb, (*wt)[gi*op*g.Kc:], koff, d, y[gi*g.Og*g.P:], bg)
			}
		}
	})
}

// convBwdDirect is convBwdSamples for convDirectBwdOK geometries: the requested
// gradients into gin, dw (O*Kc, zeroed) and db (O).
func convBwdDirect(gin *Tensor, dw, db []float32, gout, in Tensor, w []float32, g convGeom, p ConvParams) {
	hp, wp := g.H+2*p.PadH, g.W+2*p.PadW
	koff := dconvOffsets(g.Cg, g.KH, g.KW, p.DilH, p.DilW, hp, wp)
	wd := dconvGeom{K: g.Kc, O: g.Og, OH: g.OH, OW: g.OW, Wp: wp, SH: 1}
	// The input gradient: a convolution of dy padded by (ph2, pw2) with the flipped weights.
	ph2, pw2 := p.DilH*(g.KH-1)-p.PadH, p.DilW*(g.KW-1)-p.PadW
	hp2, wp2 := g.OH+2*ph2, g.OW+2*pw2
	k2 := g.Og * g.KH * g.KW
	cp := roundUp16(g.Cg)
	var wt *[]float32
	var koff2 []int64
	if gin != nil {
		wt = getConvBuf[float32](g.G * cp * k2)
		defer putConvBuf(wt)
		khw := g.KH * g.KW
		for gi := 0; gi < g.G; gi++ {
			wg := w[gi*g.Og*g.Kc:]
			// W'[c][(o, kh, kw)] = W[o][c][KH-1-kh][KW-1-kw]
			dconvPack((*wt)[gi*cp*k2:], g.Cg, k2, func(c, k int) float32 {
				o, t := k/khw, k%khw
				return wg[o*g.Kc+c*khw+khw-1-t]
			})
		}
		koff2 = dconvOffsets(g.Og, g.KH, g.KW, p.DilH, p.DilW, hp2, wp2)
	}
	id := dconvGeom{K: k2, O: g.Cg, OH: g.H, OW: g.W, Wp: wp2, SH: 1}
	op := roundUp16(g.Og)
	var sums []float32
	if db != nil {
		sums = make([]float32, g.N*g.O)
	}
	// The weight gradient sums fixed blocks of samples, each from zero, and adds the
	// blocks up in order: the same bits whatever the number of workers.
	nb, bs := g.N, 1
	if dw != nil {
		nb, bs = dconvWeightBlocks(g.N, g.G*op*g.Kc)
	}
	var parts gradParts[float32]
	ParallelFor(int64(nb), sampleCost(g)*int64(bs), func(lo, hi int64) {
		var xb, dyt, dyp *[]float32
		if dw != nil {
			xb = getConvBuf[float32](g.Cg * hp * wp)
			defer putConvBuf(xb)
			dyt = getConvBuf[float32](g.P * op)
			defer putConvBuf(dyt)
		}
		if gin != nil {
			dyp = getConvBuf[float32](g.Og * hp2 * wp2)
			defer putConvBuf(dyp)
		}
		for b := int(lo); b < int(hi); b++ {
			var acc []float32
			if dw != nil {
				acc = make([]float32, g.G*op*g.Kc)
			}
			for n := b * bs; n < min((b+1)*bs, g.N); n++ {
				dy := sampleSlice[float32](gout, n)
				if sums != nil {
					convRowSums(dy, sums[n*g.O:(n+1)*g.O], g.O, g.P)
				}
				for gi := 0; gi < g.G; gi++ {
					dyg := dy[gi*g.Og*g.P:]
					if dw != nil {
						x := sampleSlice[float32](in, n)
						dconvPad(*xb, x[gi*g.Cg*g.H*g.W:], g.Cg, g.H, g.W, p.PadH, p.PadW, hp, wp)
						dconvTranspose(*dyt, dyg, g.Og, g.P, op)
						dconvWeightGradF32(*xb, koff, *dyt, wd, acc[gi*op*g.Kc:])
					}
					if gin != nil {
						dx := sampleSlice[float32](*gin, n)
						dconvPad(*dyp, dyg, g.Og, g.OH, g.OW, ph2, pw2, hp2, wp2)
						dconvF32(*dyp, (*wt)[gi*cp*k2:], koff2, id, dx[gi*g.Cg*g.H*g.W:], nil)
					}
				}
			}
			if acc != nil {
				parts.add(int64(b), acc)
			}
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

// dconvPartsMax bounds the floats of the weight gradient's per-block partial sums.
const dconvPartsMax = 1 << 22

// dconvWeightBlocks splits n samples into nb blocks of bs (the last may be shorter) for
// per-block weight-gradient partials of size floats each: up to 16 blocks (2 when the
// partials would pass dconvPartsMax), a function of n and size only.
func dconvWeightBlocks(n, size int) (nb, bs int) {
	nb = min(n, 16)
	if nb*size > dconvPartsMax {
		nb = min(n, max(2, dconvPartsMax/max(size, 1)))
	}
	nb = max(nb, 1)
	bs = max(1, (n+nb-1)/nb)
	return (n + bs - 1) / bs, bs
}
