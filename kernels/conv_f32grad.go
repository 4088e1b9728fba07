package kernels

// Stride-1 float32 convolution gradients on AVX-512 without im2col or col2im
// (conv_f32grad_cgo.go). The im2col path's backward is dominated by moving data, not by
// its GEMMs: per sample it builds the [Kc, P] column matrix, transposes it while packing
// it for the weight GEMM, and scatters the input-gradient GEMM's [Kc, P] result back
// with col2im. Here:
//
//	weight grad:  per (o, k), 16 lane sums along each output row of dy[o] times the
//	              shifted row of the zero-padded input that k reads; the lanes carry over
//	              the worker's samples and are added up once (conv_f32grad_cgo.go).
//	input grad:   the GEMM W^T @ dy on the 12x32 micro-kernel with dy on the padded grid,
//	              each tile added straight into a zero-padded input gradient.
//
// Sums run in a different order from the im2col path (results agree to float32 rounding,
// not bit for bit); they depend on the sample split over workers, as that path's do.

// convF32GradOK reports whether the backward of g runs here: stride 1, float32 dense
// operands (checked by the caller), the AVX-512 kernels, lane sums of at most
// convGradLaneMax floats per worker, and, when the input gradient is wanted, at least
// one 12-row panel of channels a group (with fewer, a tile's rows share a channel and
// their overlapping adds stall: hpusim_conv_dgrad_f32; im2col is faster there).
func convF32GradOK(g convGeom, p ConvParams, input bool) bool {
	return convImplicit && convPerSample && f32DotCPU && f32DotOn && p.StrideH == 1 && p.StrideW == 1 &&
		g.P > 0 && g.Kc > 0 && g.Og > 0 && g.G*g.Og*g.Kc*16 <= convGradLaneMax && (!input || g.Cg >= f32DotMR)
}

// convGradLaneMax bounds the weight gradient's per-worker lane sums (16 floats per weight,
// 4 MiB): larger layers keep the im2col path, whose GEMMs need no such buffer.
const convGradLaneMax = 1 << 20

// convGradBlock is how many samples the weight gradient takes per pass over its tiles:
// each tile's lane sums are loaded and stored once per block (the reference CNN's layer
// 2: 1 sample a pass is 20% slower, 4 no faster than 2).
const convGradBlock = 2

// f32GradScratch is one worker's buffers for the input gradient.
type f32GradScratch struct{ dxp, dyp []float32 }

// convBwdF32Grad is convBwdSamples for convF32GradOK geometries: the requested gradients
// into gin and dw (O*Kc, zeroed) and db (O).
func convBwdF32Grad(gin *Tensor, dw, db []float32, gout, in Tensor, w []float32, g convGeom, p ConvParams) {
	hp, wp := g.H+2*p.PadH, g.W+2*p.PadW
	plane := g.Cg * hp * wp
	// Per group: W^T (Kc rows, inner dimension Og) packed for the micro-kernel, its rows
	// in (kh, kw, c) order (see hpusim_conv_dgrad_f32).
	var pa *[]float32
	aLen := f32DotPanelLen(g.Kc, f32DotMR, g.Og)
	if gin != nil {
		pa = getConvBuf[float32](g.G * aLen)
		defer putConvBuf(pa)
		wt := getConvBuf[float32](g.Kc * g.Og)
		defer putConvBuf(wt)
		khw := g.KH * g.KW
		for gi := 0; gi < g.G; gi++ {
			wg := w[gi*g.Og*g.Kc : (gi+1)*g.Og*g.Kc]
			for c := 0; c < g.Cg; c++ {
				for t := 0; t < khw; t++ {
					row := (*wt)[(t*g.Cg+c)*g.Og : (t*g.Cg+c+1)*g.Og]
					for o := range row {
						row[o] = wg[o*g.Kc+c*khw+t]
					}
				}
			}
			f32DotPackA((*pa)[gi*aLen:(gi+1)*aLen], ptrOf(*wt), int64(g.Og), 1, g.Kc, g.Og)
		}
	}
	q := g.OH * wp
	qp := (q + f32DotNR - 1) / f32DotNR * f32DotNR
	var sums []float32
	if db != nil {
		sums = make([]float32, g.N*g.O)
	}
	var parts gradParts[float32]
	ParallelFor(int64(g.N), sampleCost(g), func(lo, hi int64) {
		xp := getConvBuf[float32](convGradBlock * plane)
		defer putConvBuf(xp)
		var acc *[]float32
		if dw != nil {
			acc = getConvBuf[float32](len(dw) * 16)
			defer putConvBuf(acc)
			clear(*acc)
		}
		var s *f32GradScratch
		if gin != nil {
			b := getConvBuf[float32](g.Og * qp)
			defer putConvBuf(b)
			s = &f32GradScratch{dxp: (*xp)[:plane], dyp: *b}
		}
		for n0 := int(lo); n0 < int(hi); n0 += convGradBlock {
			m := min(convGradBlock, int(hi)-n0)
			if acc != nil {
				for gi := 0; gi < g.G; gi++ {
					f32ConvWeightGrad((*acc)[gi*g.Og*g.Kc*16:], gout, in, n0, m, gi, g, p, *xp)
				}
			}
			for n := n0; n < n0+m; n++ {
				dy := sampleSlice[float32](gout, n)
				if sums != nil {
					convRowSums(dy, sums[n*g.O:(n+1)*g.O], g.O, g.P)
				}
				if s != nil {
					dx := sampleSlice[float32](*gin, n)
					for gi := 0; gi < g.G; gi++ {
						f32ConvInputGrad((*pa)[gi*aLen:(gi+1)*aLen], dy[gi*g.Og*g.P:], dx[gi*g.Cg*g.H*g.W:], g, p, s)
					}
				}
			}
		}
		if acc != nil {
			pdw := make([]float32, len(dw))
			f32LaneSums(*acc, pdw)
			parts.add(lo, pdw)
		}
	})
	parts.sumInto(dw)
	addSampleSums(db, sums, g.N, g.O)
}
