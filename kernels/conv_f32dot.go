package kernels

// Stride-1 float32 convolution forward on the AVX-512 micro-kernel without an im2col
// matrix (hpusim_f32dot_conv_fwd): the weights are packed once per call instead of once
// per sample, and each column panel is read straight from a zero-padded copy of the
// sample. Where the im2col path would run its GEMM on the micro-kernel, this gives the
// same bits; it only replaces that case.

// convImplicit enables this path (tests and benchmarks compare it with the im2col path).
var convImplicit = true

// convF32DotOK reports whether the forward of g runs here: stride 1, float32 on the
// micro-kernel, a long enough inner dimension, and a per-group GEMM (Og x P x Kc) that
// useF32Dot would take.
func convF32DotOK(g convGeom, p ConvParams) bool {
	return convImplicit && convPerSample && p.StrideH == 1 && p.StrideW == 1 && g.Kc >= convImplicitMinK && g.P > 0 &&
		useF32Dot[float32](g.Og, g.P, g.Kc)
}

// convImplicitMinK is the shortest GEMM inner dimension (Cg*KH*KW) taken here: below it
// the column matrix is small and im2col is cheaper than the padded grid's extra columns
// (the reference CNN's first layer, Kc 9, runs 10% slower here; its second, Kc 144,
// 30% faster).
const convImplicitMinK = 32

// f32ConvScratch is one worker's buffers for hpusim_f32dot_conv_fwd.
type f32ConvScratch struct{ xp, pb, yp []float32 }

func f32ConvScratchLens(g convGeom, p ConvParams) (xp, pb, yp int) {
	hp, wp := g.H+2*p.PadH, g.W+2*p.PadW
	q := g.OH * wp
	qp := (q + f32DotNR - 1) / f32DotNR * f32DotNR
	xp = g.Cg*hp*wp + (qp - q) + (g.KW-1)*p.DilW
	pb = g.Kc * f32DotNR
	yp = (g.Og + f32DotMR - 1) / f32DotMR * f32DotMR * qp
	return
}

// convFwdF32Dot is convFwdSamples for convF32DotOK geometries (dense float32 operands).
func convFwdF32Dot(out, in Tensor, w, b []float32, g convGeom, p ConvParams) {
	aLen := f32DotPanelLen(g.Og, f32DotMR, g.Kc)
	pw := getConvBuf[float32](g.G * aLen)
	defer putConvBuf(pw)
	for gi := 0; gi < g.G; gi++ {
		f32DotPackA((*pw)[gi*aLen:(gi+1)*aLen], ptrOf(w[gi*g.Og*g.Kc:]), int64(g.Kc), 1, g.Og, g.Kc)
	}
	xl, pl, yl := f32ConvScratchLens(g, p)
	ParallelFor(int64(g.N), sampleCost(g), func(lo, hi int64) {
		buf := getConvBuf[float32](xl + pl + yl)
		defer putConvBuf(buf)
		s := &f32ConvScratch{xp: (*buf)[:xl:xl], pb: (*buf)[xl : xl+pl : xl+pl], yp: (*buf)[xl+pl:]}
		for n := int(lo); n < int(hi); n++ {
			x, y := sampleSlice[float32](in, n), sampleSlice[float32](out, n)
			for gi := 0; gi < g.G; gi++ {
				f32DotConvFwd((*pw)[gi*aLen:(gi+1)*aLen], x[gi*g.Cg*g.H*g.W:], y[gi*g.Og*g.P:], g, p, s)
			}
			if b != nil {
				convBiasAdd(y, b, g.O, g.P)
			}
		}
	})
}
