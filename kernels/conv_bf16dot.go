package kernels

import "unsafe"

// bfloat16 convolution on the VDPBF16PS GEMM (gemm_bf16dot.go), one sample at a time as in
// conv_sample.go, with no operand widened in memory: im2col moves bfloat16 bits, the
// products accumulate in float32, and each result is rounded once to bfloat16.
//
//	forward:      Y_n[Og, P]   = W_g[Og, Kc] @ cols_n[Kc, P]               (then bias)
//	weight grad:  dW_w[Og, Kc] += dY_n[Og, P] @ cols_n[Kc, P]^T   (per worker, summed after)
//	input grad:   dcols[Kc, P] = W_g^T @ dY_n[Og, P] (float32), col2im, then rounded

// convBF16DotOK reports whether the VDPBF16PS path takes this convolution: every tensor
// bfloat16 with dense planes (nil ones aside) on a CPU with AVX512-BF16.
func convBF16DotOK(g convGeom, ts ...*Tensor) bool {
	if !gemmBF16Dot || !bf16DotCPU || !convPerSample || g.Kc == 0 || g.P == 0 || g.Og == 0 {
		return false
	}
	for _, t := range ts {
		if t != nil && (t.DType != BFloat16 || !densePlanes(*t)) {
			return false
		}
	}
	return true
}

// packWeightGroups packs each group's weight rows (transposed: its columns) as VDPBF16PS
// A panels, one after another, and returns them with the length of one group's panels.
func packWeightGroups(weight Tensor, g convGeom, transposed bool) ([]uint16, *[]float32, int) {
	rows, k := g.Og, g.Kc
	if transposed {
		rows, k = g.Kc, g.Og
	}
	per := (rows + bf16DotMR - 1) / bf16DotMR * bf16DotMR * ((k + 1) / 2) * 2
	f, buf := bf16Scratch(per * g.G)
	for gi := 0; gi < g.G; gi++ {
		w := at(weight.Ptr, int64(gi*g.Og)*weight.Strides[0]*2)
		if transposed { // A[kc, o] = W[o, kc]
			bf16DotPackA(buf[gi*per:], w, 1, weight.Strides[0], g.Kc, g.Og)
		} else {
			bf16DotPackA(buf[gi*per:], w, weight.Strides[0], 1, g.Og, g.Kc)
		}
	}
	return buf, f, per
}

// groupCols16 is group gi's [Kc, P] column matrix of sample x (bfloat16 bits).
func groupCols16(x, cb []uint16, g convGeom, p ConvParams, gi int) []uint16 {
	if pointwise(g, p) {
		return x[gi*g.Cg*g.P : (gi+1)*g.Cg*g.P]
	}
	if convNoC {
		im2colRows(cb, x, g, p, gi, 1, 0, g.Kc)
	} else {
		im2colU16(cb, x, g, p, gi)
	}
	return cb
}

func convFwdBF16Dot(out, in, weight Tensor, bias *Tensor, g convGeom, p ConvParams) {
	wp, wf, wper := packWeightGroups(weight, g, false)
	defer putF32(wf)
	var b []float32
	if bias != nil {
		b = load1D[float32](*bias)
	}
	bLen := (g.P + bf16DotNR - 1) / bf16DotNR * bf16DotNR * ((g.Kc + 1) / 2) * 2
	ParallelFor(int64(g.N), sampleCost(g), func(lo, hi int64) {
		cf, cb := bf16Scratch(g.Kc * g.P)
		defer putF32(cf)
		pf, pb := bf16Scratch(bLen)
		defer putF32(pf)
		yf := getF32(g.O * g.P)
		defer putF32(yf)
		y := *yf
		for n := int(lo); n < int(hi); n++ {
			x := sampleSlice[uint16](in, n)
			for gi := 0; gi < g.G; gi++ {
				col := groupCols16(x, cb, g, p, gi)
				bf16DotPackB(pb, unsafe.Pointer(&col[0]), int64(g.P), 1, g.Kc, 0, g.P)
				bf16DotGemm(wp[gi*wper:], pb, g.Og, g.P, g.Kc, unsafe.Pointer(&y[gi*g.Og*g.P]), g.P, false)
			}
			if b != nil {
				convBiasAdd(y, b, g.O, g.P)
			}
			f32ToBF16s(sampleSlice[uint16](out, n), y)
		}
	})
}

// convBwdBF16Dot computes the requested gradients; dw (O*Kc, zeroed) and db (O) are the
// float32 results the caller stores.
func convBwdBF16Dot(gin *Tensor, dw, db []float32, gout, in, weight Tensor, g convGeom, p ConvParams) {
	var wt []uint16
	var wper int
	if gin != nil {
		var wf *[]float32
		wt, wf, wper = packWeightGroups(weight, g, true)
		defer putF32(wf)
	}
	var sums []float32
	if db != nil {
		sums = make([]float32, g.N*g.O)
	}
	k2 := func(k int) int { return (k + 1) / 2 }
	aLen := (g.Og + bf16DotMR - 1) / bf16DotMR * bf16DotMR * k2(g.P) * 2  // dY rows, k = P
	bwLen := (g.Kc + bf16DotNR - 1) / bf16DotNR * bf16DotNR * k2(g.P) * 2 // cols^T, k = P
	biLen := (g.P + bf16DotNR - 1) / bf16DotNR * bf16DotNR * k2(g.Og) * 2 // dY, k = Og
	var parts gradParts[float32]                                          // one dW partial per chunk of samples
	ParallelFor(int64(g.N), sampleCost(g), func(lo, hi int64) {
		cf, cb := bf16Scratch(g.Kc * g.P)
		defer putF32(cf)
		bf, pbuf := bf16Scratch(max(bwLen, biLen))
		defer putF32(bf)
		af, pa := bf16Scratch(aLen)
		defer putF32(af)
		var pdw, dcol, dx, dyw []float32
		if sums != nil {
			yf := getF32(g.O * g.P)
			defer putF32(yf)
			dyw = *yf
		}
		if dw != nil {
			pdw = make([]float32, len(dw))
		}
		if gin != nil {
			df := getF32(g.Kc * g.P)
			defer putF32(df)
			xf := getF32(g.C * g.H * g.W)
			defer putF32(xf)
			dcol, dx = *df, *xf
		}
		for n := int(lo); n < int(hi); n++ {
			dy := sampleSlice[uint16](gout, n)
			if sums != nil {
				// Widened exactly, then each row summed in order from zero.
				bf16ToF32s(dyw, dy)
				convRowSums(dyw, sums[n*g.O:(n+1)*g.O], g.O, g.P)
			}
			if pdw != nil {
				x := sampleSlice[uint16](in, n)
				for gi := 0; gi < g.G; gi++ {
					col := groupCols16(x, cb, g, p, gi)
					bf16DotPackA(pa, unsafe.Pointer(&dy[gi*g.Og*g.P]), int64(g.P), 1, g.Og, g.P)
					// B[p, kc] = cols[kc, p]: k = P runs along the column rows.
					bf16DotPackB(pbuf, unsafe.Pointer(&col[0]), 1, int64(g.P), g.P, 0, g.Kc)
					bf16DotGemm(pa, pbuf, g.Og, g.Kc, g.P, unsafe.Pointer(&pdw[gi*g.Og*g.Kc]), g.Kc, true)
				}
			}
			if gin != nil {
				for gi := 0; gi < g.G; gi++ {
					bf16DotPackB(pbuf, unsafe.Pointer(&dy[gi*g.Og*g.P]), int64(g.P), 1, g.Og, 0, g.P)
					bf16DotGemm(wt[gi*wper:], pbuf, g.Kc, g.P, g.Og, unsafe.Pointer(&dcol[0]), g.P, false)
					if pointwise(g, p) {
						copy(dx[gi*g.Cg*g.P:(gi+1)*g.Cg*g.P], dcol[:g.Cg*g.P])
						continue
					}
					col2imSample(dx, dcol, g, p, gi)
				}
				f32ToBF16s(sampleSlice[uint16](*gin, n), dx)
			}
		}
		if pdw != nil {
			parts.add(lo, pdw)
		}
	})
	parts.sumInto(dw)
	addSampleSums(db, sums, g.N, g.O)
}
