package kernels

import "unsafe"

// Convolution by im2col + GEMM over blocks of samples: the column matrix of a block of m
// samples is [Kc, m*P] (row r = (c, kh, kw) holds the m samples' P output positions one
// after another), so each layer is a few large GEMMs instead of one small GEMM a sample.
//
//	forward:      Y[Og, m*P]   = W_g[Og, Kc] @ cols[Kc, m*P]           (then bias, store)
//	weight grad:  dW_g[Og, Kc] += dY_g[Og, m*P] @ cols[Kc, m*P]^T      (one GEMM a block)
//	input grad:   dcols[Kc, m*P] = W_g^T @ dY_g[Og, m*P], then col2im
//
// Activations and gradients in the GEMM's "channel-major" layout [O, m, P] are gathered
// from / scattered to the tensors' [m, O, P] layout row by row (P elements at a time).

// convColFloats is how many column-matrix elements a block of samples aims for: large
// enough for efficient GEMMs, small enough to stay in cache between im2col and the GEMM.
var convColFloats = 1 << 18

// convBlock returns how many samples share one column matrix (blocks balanced in size).
func convBlock(g convGeom) int {
	if g.N <= 1 {
		return 1
	}
	nb := min(max(convColFloats/max(g.Kc*g.P, 1), 1), g.N)
	blocks := (g.N + nb - 1) / nb
	return (g.N + blocks - 1) / blocks
}

// directSamples returns samples n0..n0+m of t as a slice of t's own memory when t stores
// them contiguously in the compute type T, else nil.
func directSamples[T gemmFloat](t Tensor, n0, m int) []T {
	if !nativeOf[T](t.DType) || !densePlanes(t) {
		return nil
	}
	per := t.Sizes[1] * t.Sizes[2] * t.Sizes[3]
	if per == 0 || m == 0 || (m > 1 && t.Strides[0] != per) {
		return nil
	}
	base := at(t.Ptr, int64(n0)*t.Strides[0]*int64(t.DType.Size()))
	return unsafe.Slice((*T)(base), int64(m)*per)
}

// convRows visits the (sample, channel) planes of samples n0..n0+m of t in parallel:
// fn(u, base, dense) with u = n*A + a, base the plane's address; dense means its B*C
// elements are contiguous.
func convRows(t Tensor, n0, m int, fn func(n, a int64, base unsafe.Pointer)) {
	es := int64(t.DType.Size())
	A, P := t.Sizes[1], t.Sizes[2]*t.Sizes[3]
	ParallelFor(int64(m)*A, P, func(lo, hi int64) {
		for u := lo; u < hi; u++ {
			n, a := u/A, u%A
			fn(n, a, at(t.Ptr, ((int64(n0)+n)*t.Strides[0]+a*t.Strides[1])*es))
		}
	})
}

// loadPlane converts one [B, C] plane of t at base into dst (B*C elements).
func loadPlane[T gemmFloat](dst []T, t Tensor, base unsafe.Pointer, dense bool) {
	es := int64(t.DType.Size())
	B, C := t.Sizes[2], t.Sizes[3]
	if dense {
		B, C = 1, B*C
	}
	for b := int64(0); b < B; b++ {
		d := dst[b*C : (b+1)*C]
		q := at(base, b*t.Strides[2]*es)
		s := t.Strides[3] * es
		if dense {
			s = es
		}
		if f, ok := any(d).([]float32); ok {
			loadRowF32(f, q, s, t.DType)
			continue
		}
		loadRowT(d, q, s, t.DType)
	}
}

// storePlane rounds src (B*C elements) into one [B, C] plane of t at base.
func storePlane[T gemmFloat](t Tensor, base unsafe.Pointer, dense bool, src []T) {
	es := int64(t.DType.Size())
	B, C := t.Sizes[2], t.Sizes[3]
	if dense {
		B, C = 1, B*C
	}
	for b := int64(0); b < B; b++ {
		row := src[b*C : (b+1)*C]
		q := at(base, b*t.Strides[2]*es)
		s := t.Strides[3] * es
		if dense {
			s = es
		}
		if f, ok := any(row).([]float32); ok {
			storeRowF32(q, s, t.DType, f)
			continue
		}
		storeRowT(q, s, t.DType, row)
	}
}

// loadSamples returns samples n0..n0+m of t as [m, A, B*C] contiguous T: t's own memory
// when possible, else converted into dst.
func loadSamples[T gemmFloat](dst []T, t Tensor, n0, m int) []T {
	if d := directSamples[T](t, n0, m); d != nil {
		return d
	}
	A, P := t.Sizes[1], t.Sizes[2]*t.Sizes[3]
	dense := densePlanes(t)
	convRows(t, n0, m, func(n, a int64, base unsafe.Pointer) {
		loadPlane(dst[(n*A+a)*P:(n*A+a+1)*P], t, base, dense)
	})
	return dst[:int64(m)*A*P]
}

// gatherChannelMajor loads samples n0..n0+m of t into dst laid out [A, m, P] and, when
// sums != nil, sets sums[n*A+a] to the sum of plane (n, a).
func gatherChannelMajor[T gemmFloat](dst []T, t Tensor, n0, m int, sums []T) []T {
	A, P := t.Sizes[1], t.Sizes[2]*t.Sizes[3]
	dense := densePlanes(t)
	mm := int64(m)
	convRows(t, n0, m, func(n, a int64, base unsafe.Pointer) {
		d := dst[(a*mm+n)*P : (a*mm+n+1)*P]
		loadPlane(d, t, base, dense)
		if sums != nil {
			var s T
			for _, v := range d {
				s += v
			}
			sums[n*A+a] = s
		}
	})
	return dst[:mm*A*P]
}

// storeBlock rounds src into samples n0..n0+m of t, adding bias[a] when bias != nil.
// src is [A, m, P] (channelMajor, a GEMM result) or [m, A, P].
func storeBlock[T gemmFloat](t Tensor, n0, m int, src []T, bias []T, channelMajor bool) {
	A, P := t.Sizes[1], t.Sizes[2]*t.Sizes[3]
	dense := densePlanes(t)
	mm := int64(m)
	convRows(t, n0, m, func(n, a int64, base unsafe.Pointer) {
		off := (n*A + a) * P
		if channelMajor {
			off = (a*mm + n) * P
		}
		s := src[off : off+P]
		if bias != nil {
			bv := bias[a]
			for i := range s {
				s[i] += bv
			}
		}
		storePlane(t, base, dense, s)
	})
}

// convSpan returns the output columns [lo, hi) whose input column ow*stride+off, with
// off = k*dil-pad, lies in [0, w).
func convSpan(k, w, ow, stride, pad, dil int) (lo, hi, off int) {
	off = k*dil - pad
	if off < 0 {
		lo = (-off + stride - 1) / stride
	}
	if w-1-off >= 0 {
		hi = (w-1-off)/stride + 1
	}
	lo, hi = min(lo, ow), min(hi, ow)
	hi = max(hi, lo)
	return lo, hi, off
}

// im2colBlock fills col [Kc, m*P] from x ([m, C, H, W] contiguous), channels of group gi.
func im2colBlock[T gemmFloat](col, x []T, g convGeom, p ConvParams, gi, m int) {
	ParallelFor(int64(g.Kc*m), int64(g.P), func(lo, hi int64) {
		im2colRows(col, x, g, p, gi, m, int(lo), int(hi))
	})
}

// colElem is what im2col moves: the compute types, and bfloat16 bits (conv_bf16dot.go).
type colElem interface{ float32 | float64 | uint16 }

// im2colRows fills rows [lo, hi) of im2colBlock's column matrix (row u = r*m + n).
func im2colRows[T colElem](col, x []T, g convGeom, p ConvParams, gi, m, lo, hi int) {
	khw, hw := g.KH*g.KW, g.H*g.W
	pw := pointwise(g, p)
	{
		for u := lo; u < hi; u++ {
			r, n := u/m, u%m
			c, k := r/khw, r%khw
			kh, kw := k/g.KW, k%g.KW
			plane := x[(n*g.C+gi*g.Cg+c)*hw : (n*g.C+gi*g.Cg+c+1)*hw]
			dst := col[u*g.P : (u+1)*g.P]
			if pw {
				copy(dst, plane)
				continue
			}
			wlo, whi, off := convSpan(kw, g.W, g.OW, p.StrideW, p.PadW, p.DilW)
			for oh := 0; oh < g.OH; oh++ {
				ih := oh*p.StrideH - p.PadH + kh*p.DilH
				row := dst[oh*g.OW : (oh+1)*g.OW]
				if ih < 0 || ih >= g.H {
					clear(row)
					continue
				}
				src := plane[ih*g.W : (ih+1)*g.W]
				clear(row[:wlo])
				clear(row[whi:])
				if whi == wlo {
					// no column of this tap is inside the input (kernel wider than the
					// padded row): src[wlo+off:] would lie outside the plane
					continue
				}
				if p.StrideW == 1 {
					copy(row[wlo:whi], src[wlo+off:whi+off])
					continue
				}
				for ow := wlo; ow < whi; ow++ {
					row[ow] = src[ow*p.StrideW+off]
				}
			}
		}
	}
}

// col2imBlock sets the group-gi channels of dx ([m, C, H, W] contiguous) to the sum of
// col [Kc, m*P]'s entries. Parallel over (sample, channel) planes, so no two workers
// write the same element; each element sums its terms in (kh, kw) order.
func col2imBlock[T gemmFloat](dx, col []T, g convGeom, p ConvParams, gi, m int) {
	ParallelFor(int64(m*g.Cg), int64(g.KH*g.KW*g.P), func(lo, hi int64) {
		col2imRows(dx, col, g, p, gi, m, int(lo), int(hi))
	})
}

// col2imRows does col2imBlock's planes [lo, hi) (plane u = n*Cg + c).
func col2imRows[T gemmFloat](dx, col []T, g convGeom, p ConvParams, gi, m, lo, hi int) {
	khw, hw := g.KH*g.KW, g.H*g.W
	pw := pointwise(g, p)
	{
		for u := lo; u < hi; u++ {
			n, c := u/g.Cg, u%g.Cg
			plane := dx[(n*g.C+gi*g.Cg+c)*hw : (n*g.C+gi*g.Cg+c+1)*hw]
			if pw {
				copy(plane, col[(c*m+n)*g.P:(c*m+n+1)*g.P])
				continue
			}
			clear(plane)
			for k := 0; k < khw; k++ {
				kh, kw := k/g.KW, k%g.KW
				src := col[((c*khw+k)*m+n)*g.P : ((c*khw+k)*m+n+1)*g.P]
				wlo, whi, off := convSpan(kw, g.W, g.OW, p.StrideW, p.PadW, p.DilW)
				if whi == wlo {
					continue
				}
				for oh := 0; oh < g.OH; oh++ {
					ih := oh*p.StrideH - p.PadH + kh*p.DilH
					if ih < 0 || ih >= g.H {
						continue
					}
					drow := plane[ih*g.W : (ih+1)*g.W]
					srow := src[oh*g.OW : (oh+1)*g.OW]
					if p.StrideW == 1 {
						d, s := drow[wlo+off:whi+off], srow[wlo:whi]
						for i := range d {
							d[i] += s[i]
						}
						continue
					}
					for ow := wlo; ow < whi; ow++ {
						drow[ow*p.StrideW+off] += srow[ow]
					}
				}
			}
		}
	}
}

func convFwd[T gemmFloat](out, in, weight Tensor, bias *Tensor, g convGeom, p ConvParams) {
	if g.N == 0 || g.O == 0 || g.P == 0 {
		return
	}
	w := loadAll[T](weight) // [O, Kc]
	var b []T
	if bias != nil {
		b = load1D[T](*bias)
	}
	out = Tensor{Ptr: out.Ptr, DType: out.DType, Sizes: []int64{int64(g.N), int64(g.O), int64(g.OH), int64(g.OW)},
		Strides: out.Strides}
	if g.Kc > 0 && sampleConvOK[T](&out, &in) {
		convFwdSamples(out, in, w, b, g, p) // conv_sample.go
		return
	}
	nb := convBlock(g)
	per := g.C * g.H * g.W
	xb := getConvBuf[T](nb * per)
	defer putConvBuf(xb)
	yb := getConvBuf[T](g.O * nb * g.P)
	defer putConvBuf(yb)
	cb := getConvBuf[T](g.Kc * nb * g.P)
	defer putConvBuf(cb)
	for n0 := 0; n0 < g.N; n0 += nb {
		m := min(nb, g.N-n0)
		mp := m * g.P
		y := (*yb)[:g.O*mp]
		if g.Kc == 0 {
			clear(y)
		} else {
			x := loadSamples((*xb)[:m*per], in, n0, m)
			col := (*cb)[:g.Kc*mp]
			for gi := 0; gi < g.G; gi++ {
				im2colBlock(col, x, g, p, gi, m)
				blasGemm(false, false, g.Og, mp, g.Kc, T(1), ptrOf(w[gi*g.Og*g.Kc:]), g.Kc,
					ptrOf(col), mp, T(0), ptrOf(y[gi*g.Og*mp:]), mp)
			}
		}
		storeBlock(out, n0, m, y, b, true)
	}
}

func convBwd[T gemmFloat](gin, gw, gb *Tensor, gout, in, weight Tensor, g convGeom, p ConvParams) {
	w := loadAll[T](weight) // [O, Kc]
	nb := convBlock(g)
	per := g.C * g.H * g.W
	var dw, db, sums []T
	var dw2 []T // second partial sum of dW when its GEMM is split over the inner dim
	if gw != nil {
		dw = make([]T, g.O*g.Kc)
		if g.Og*g.Kc <= splitWeightGradMax && Workers() >= 2 {
			dw2 = make([]T, g.O*g.Kc)
		}
	}
	if gb != nil {
		db = make([]T, g.O)
		sums = make([]T, nb*g.O)
	}
	empty := g.P == 0 || g.Kc == 0
	if !empty && sampleConvOK[T](gin, &gout, &in) {
		convBwdSamples(gin, dw, db, gout, in, w, g, p) // conv_sample.go
		storeConvGrads(gw, gb, dw, db, g)
		return
	}
	dyb := getConvBuf[T](g.O * nb * g.P)
	defer putConvBuf(dyb)
	var xb, cb, dxb *[]T
	if gw != nil && !empty {
		xb = getConvBuf[T](nb * per)
		defer putConvBuf(xb)
	}
	if (gw != nil || gin != nil) && !empty {
		cb = getConvBuf[T](g.Kc * nb * g.P)
		defer putConvBuf(cb)
	}
	if gin != nil {
		dxb = getConvBuf[T](nb * per)
		defer putConvBuf(dxb)
	}
	for n0 := 0; n0 < g.N; n0 += nb {
		m := min(nb, g.N-n0)
		mp := m * g.P
		var dy []T
		if gb != nil || !empty {
			dy = gatherChannelMajor((*dyb)[:g.O*mp], gout, n0, m, sums)
		}
		if gb != nil {
			for n := 0; n < m; n++ {
				for o := 0; o < g.O; o++ {
					db[o] += sums[n*g.O+o]
				}
			}
		}
		if empty {
			if gin != nil {
				dx := (*dxb)[:m*per]
				clear(dx)
				storeBlock(*gin, n0, m, dx, nil, false)
			}
			continue
		}
		col := (*cb)[:g.Kc*mp]
		if gw != nil {
			x := loadSamples((*xb)[:m*per], in, n0, m)
			for gi := 0; gi < g.G; gi++ {
				im2colBlock(col, x, g, p, gi, m)
				if dw2 != nil {
					weightGradSplit(dw[gi*g.Og*g.Kc:], dw2[gi*g.Og*g.Kc:], dy[gi*g.Og*mp:], col, g.Og, g.Kc, mp)
					continue
				}
				blasGemm(false, true, g.Og, g.Kc, mp, T(1), ptrOf(dy[gi*g.Og*mp:]), mp,
					ptrOf(col), mp, T(1), ptrOf(dw[gi*g.Og*g.Kc:]), g.Kc)
			}
		}
		if gin != nil {
			dx := directSamples[T](*gin, n0, m)
			direct := dx != nil
			if !direct {
				dx = (*dxb)[:m*per]
			}
			for gi := 0; gi < g.G; gi++ {
				blasGemm(true, false, g.Kc, mp, g.Og, T(1), ptrOf(w[gi*g.Og*g.Kc:]), g.Kc,
					ptrOf(dy[gi*g.Og*mp:]), mp, T(0), ptrOf(col), mp)
				col2imBlock(dx, col, g, p, gi, m)
			}
			if !direct {
				storeBlock(*gin, n0, m, dx, nil, false)
			}
		}
	}
	for i := range dw2 {
		dw[i] += dw2[i]
	}
	storeConvGrads(gw, gb, dw, db, g)
}

// storeConvGrads rounds the weight and bias gradients into gw and gb (when requested).
func storeConvGrads[T gemmFloat](gw, gb *Tensor, dw, db []T, g convGeom) {
	if gw != nil {
		per := g.Cg * g.KH * g.KW
		for o := 0; o < g.O; o++ {
			storePlanes(*gw, o, dw[o*per:(o+1)*per], nil)
		}
	}
	if gb != nil {
		storeRowT(gb.Ptr, gb.Strides[0]*int64(gb.DType.Size()), gb.DType, db)
	}
}

// splitWeightGradMax is the largest per-group dW (Og*Kc elements) whose GEMM is split in
// two along its long inner dimension: OpenBLAS runs such a small-output, long-K GEMM on
// one thread, so two concurrent single-GEMM halves use both cores.
const splitWeightGradMax = 32 * 32

// weightGradSplit adds dy[Og, k] @ col[Kc, k]^T (both with row stride k) into dw and dw2,
// the first half of the inner dimension into dw and the second into dw2, concurrently.
func weightGradSplit[T gemmFloat](dw, dw2, dy, col []T, og, kc, k int) {
	h := k / 2
	ParallelFor(2, Grain, func(lo, hi int64) {
		for w := lo; w < hi; w++ {
			off, n, d := 0, h, dw
			if w == 1 {
				off, n, d = h, k-h, dw2
			}
			if n == 0 {
				continue
			}
			blasGemmSerial(false, true, og, kc, n, T(1), ptrOf(dy[off:]), k, ptrOf(col[off:]), k, T(1), ptrOf(d), kc)
		}
	})
}
