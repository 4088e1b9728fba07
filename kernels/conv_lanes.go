package kernels

// Direct float32 convolution forward with the output positions in the vector lanes
// (conv_lanes_cgo.go), for layers with few taps (Cg*KH*KW < dconvMinK: the reference
// CNN's first layer, 1 input channel, 9 taps). conv_direct.go's kernel puts the output
// channels in the lanes and has to transpose every result tile back into the channel
// planes, which costs more than its 9 FMAs per position here; the im2col path writes and
// re-reads a [Kc, P] column matrix per sample and runs a GEMM with an inner dimension of
// 9. Here a register tile is up to 16 output channels times 16 consecutive output
// positions of one output row: per tap k = (c, kh, kw) one load of the zero-padded
// input's 16 positions and one FMA per channel with the tap's weight broadcast; the
// results (plus the bias) are stored straight into the output planes:
//
//	y[o][oh][ow..ow+16) = sum_k W[o][k] * xp[koff(k) + oh*sh*Wp + ow..]   (+ bias[o])
//
// Each output element's taps are summed in k order from zero (bias added last), as in
// conv_direct.go, so results agree with the im2col path to float32 rounding.

// convLanesFwdOK reports whether the forward of g runs here (dense float32 operands
// checked by the caller): stride 1 along W (the lanes read consecutive input columns),
// few taps, and enough output channels to give the tile independent FMA chains.
func convLanesFwdOK(g convGeom, p ConvParams) bool {
	return convDirect && convPerSample && f32DotCPU && p.StrideW == 1 && g.Kc > 0 && g.Kc < dconvMinK &&
		g.Og >= convLanesMinO && g.P > 0 && !pointwise(g, p)
}

// convLanesMinO is the fewest output channels a group needs here: each channel is one
// accumulator chain of the tile, and fewer than 8 leave the FMA units waiting on latency.
const convLanesMinO = 8

// convFwdLanes is convFwdSamples for convLanesFwdOK geometries (dense float32).
func convFwdLanes(out, in Tensor, w, b []float32, g convGeom, p ConvParams) {
	// weights per group as [Kc][Og]: a tap's channel weights side by side
	wt := getConvBuf[float32](g.G * g.Kc * g.Og)
	defer putConvBuf(wt)
	for gi := 0; gi < g.G; gi++ {
		wg, dst := w[gi*g.Og*g.Kc:], (*wt)[gi*g.Kc*g.Og:]
		for o := 0; o < g.Og; o++ {
			for k := 0; k < g.Kc; k++ {
				dst[k*g.Og+o] = wg[o*g.Kc+k]
			}
		}
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
				lconvF32(*xb, (*wt)[gi*g.Kc*g.Og:], koff, d, y[gi*g.Og*g.P:], bg)
			}
		}
	})
}
