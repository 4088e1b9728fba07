package kernels

import (
	"fmt"
	"unsafe"
)

// ConvParams describes a 2-D convolution (1-D convolutions use H = 1).
type ConvParams struct {
	StrideH, StrideW, PadH, PadW, DilH, DilW, Groups int
}

type convGeom struct {
	N, C, H, W, O, KH, KW, OH, OW, G, Cg, Og, Kc, P int
}

func convGeometry(in, weight Tensor, out []int64, p ConvParams) (convGeom, error) {
	if in.Dim() != 4 || weight.Dim() != 4 || len(out) != 4 {
		return convGeom{}, fmt.Errorf("expected 4-D input, weight and output")
	}
	if p.Groups < 1 || p.StrideH < 1 || p.StrideW < 1 || p.DilH < 1 || p.DilW < 1 || p.PadH < 0 || p.PadW < 0 {
		return convGeom{}, fmt.Errorf("invalid convolution parameters %+v", p)
	}
	g := convGeom{N: int(in.Sizes[0]), C: int(in.Sizes[1]), H: int(in.Sizes[2]), W: int(in.Sizes[3]),
		O: int(weight.Sizes[0]), KH: int(weight.Sizes[2]), KW: int(weight.Sizes[3]), G: p.Groups}
	if g.C%g.G != 0 || g.O%g.G != 0 || int(weight.Sizes[1])*g.G != g.C {
		return g, fmt.Errorf("weight %v does not match input %v with groups=%d", weight.Sizes, in.Sizes, g.G)
	}
	g.Cg, g.Og = g.C/g.G, g.O/g.G
	g.OH = (g.H+2*p.PadH-p.DilH*(g.KH-1)-1)/p.StrideH + 1
	g.OW = (g.W+2*p.PadW-p.DilW*(g.KW-1)-1)/p.StrideW + 1
	if g.OH < 0 {
		g.OH = 0
	}
	if g.OW < 0 {
		g.OW = 0
	}
	if out[0] != int64(g.N) || out[1] != int64(g.O) || out[2] != int64(g.OH) || out[3] != int64(g.OW) {
		return g, fmt.Errorf("output %v, expected [%d %d %d %d]", out, g.N, g.O, g.OH, g.OW)
	}
	g.Kc = g.Cg * g.KH * g.KW
	g.P = g.OH * g.OW
	return g, nil
}

// loadPlanes converts t[n] (a strided [A,B,C] block, the tensor's dims 1..3) into dst.
func loadPlanes[T gemmFloat](dst []T, t Tensor, n int) {
	es := int64(t.DType.Size())
	A, B, C := t.Sizes[1], t.Sizes[2], t.Sizes[3]
	base := at(t.Ptr, int64(n)*t.Strides[0]*es)
	if f, ok := any(dst).([]float32); ok && t.DType == BFloat16 && densePlanes(t) {
		widenFlat(f[:A*B*C], unsafe.Slice((*uint16)(base), A*B*C))
		return
	}
	ParallelFor(A*B, C, func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			a, b := r/B, r%B
			d := dst[r*C : (r+1)*C]
			q := at(base, (a*t.Strides[1]+b*t.Strides[2])*es)
			if f, ok := any(d).([]float32); ok {
				loadRowF32(f, q, t.Strides[3]*es, t.DType)
				continue
			}
			loadRowT(d, q, t.Strides[3]*es, t.DType)
		}
	})
}

// storePlanes writes src ([A,B,C] contiguous) into t[n], adding bias[a] when bias != nil.
func storePlanes[T gemmFloat](t Tensor, n int, src []T, bias []T) {
	es := int64(t.DType.Size())
	A, B, C := t.Sizes[1], t.Sizes[2], t.Sizes[3]
	base := at(t.Ptr, int64(n)*t.Strides[0]*es)
	if f, ok := any(src).([]float32); ok && t.DType == BFloat16 && densePlanes(t) {
		f = f[:A*B*C]
		if bias != nil {
			fb := any(bias).([]float32)
			for a := int64(0); a < A; a++ {
				row := f[a*B*C : (a+1)*B*C]
				for i := range row {
					row[i] += fb[a]
				}
			}
		}
		convertFlat(unsafe.Slice((*uint16)(base), A*B*C), f)
		return
	}
	ParallelFor(A*B, C, func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			a, b := r/B, r%B
			row := src[r*C : (r+1)*C]
			if bias != nil {
				for i := range row {
					row[i] += bias[a]
				}
			}
			q := at(base, (a*t.Strides[1]+b*t.Strides[2])*es)
			if f, ok := any(row).([]float32); ok {
				storeRowF32(q, t.Strides[3]*es, t.DType, f)
				continue
			}
			storeRowT(q, t.Strides[3]*es, t.DType, row)
		}
	})
}

// im2col fills col [Cg*KH*KW, OH*OW] from x ([C,H,W] contiguous), channels of group gi.
func im2col[T gemmFloat](col, x []T, g convGeom, p ConvParams, gi int) {
	ParallelFor(int64(g.Kc), int64(g.P), func(lo, hi int64) {
		for r := int(lo); r < int(hi); r++ {
			c, kh, kw := r/(g.KH*g.KW), (r/g.KW)%g.KH, r%g.KW
			plane := x[(gi*g.Cg+c)*g.H*g.W:]
			dst := col[r*g.P : (r+1)*g.P]
			for oh := 0; oh < g.OH; oh++ {
				ih := oh*p.StrideH - p.PadH + kh*p.DilH
				row := dst[oh*g.OW : (oh+1)*g.OW]
				if ih < 0 || ih >= g.H {
					clear(row)
					continue
				}
				src := plane[ih*g.W:]
				for ow := range row {
					iw := ow*p.StrideW - p.PadW + kw*p.DilW
					if iw < 0 || iw >= g.W {
						row[ow] = 0
					} else {
						row[ow] = src[iw]
					}
				}
			}
		}
	})
}

// col2im adds col [Cg*KH*KW, OH*OW] into dx ([C,H,W] contiguous), channels of group gi.
// Parallel over channels, so no two workers write the same element.
func col2im[T gemmFloat](dx, col []T, g convGeom, p ConvParams, gi int) {
	ParallelFor(int64(g.Cg), int64(g.KH*g.KW*g.P), func(lo, hi int64) {
		for c := int(lo); c < int(hi); c++ {
			plane := dx[(gi*g.Cg+c)*g.H*g.W : (gi*g.Cg+c+1)*g.H*g.W]
			for k := 0; k < g.KH*g.KW; k++ {
				kh, kw := k/g.KW, k%g.KW
				src := col[(c*g.KH*g.KW+k)*g.P:]
				for oh := 0; oh < g.OH; oh++ {
					ih := oh*p.StrideH - p.PadH + kh*p.DilH
					if ih < 0 || ih >= g.H {
						continue
					}
					drow := plane[ih*g.W : (ih+1)*g.W]
					srow := src[oh*g.OW : (oh+1)*g.OW]
					for ow, v := range srow {
						iw := ow*p.StrideW - p.PadW + kw*p.DilW
						if iw >= 0 && iw < g.W {
							drow[iw] += v
						}
					}
				}
			}
		}
	})
}

func ptrOf[T gemmFloat](s []T) unsafe.Pointer {
	if len(s) == 0 {
		var z T
		return unsafe.Pointer(&z)
	}
	return unsafe.Pointer(&s[0])
}

// loadAll converts a whole strided 4-D tensor into a contiguous buffer.
func loadAll[T gemmFloat](t Tensor) []T {
	per := int(t.Sizes[1] * t.Sizes[2] * t.Sizes[3])
	buf := make([]T, int(t.Sizes[0])*per)
	for n := 0; n < int(t.Sizes[0]); n++ {
		loadPlanes(buf[n*per:(n+1)*per], t, n)
	}
	return buf
}

func load1D[T gemmFloat](t Tensor) []T {
	buf := make([]T, t.Sizes[0])
	loadRowT(buf, t.Ptr, t.Strides[0]*int64(t.DType.Size()), t.DType)
	return buf
}

func checkFloat(ts ...Tensor) error {
	for _, t := range ts {
		if !isGemmDType(t.DType) {
			return fmt.Errorf("unsupported dtype %v", t.DType)
		}
	}
	return nil
}

// Conv2dForward computes out = conv(in, weight) + bias (bias may be nil) by im2col+GEMM.
func Conv2dForward(out, in, weight Tensor, bias *Tensor, p ConvParams) error {
	g, err := convGeometry(in, weight, out.Sizes, p)
	if err != nil {
		return err
	}
	if err := checkFloat(out, in, weight); err != nil {
		return err
	}
	if bias != nil && (bias.Dim() != 1 || bias.Sizes[0] != int64(g.O)) {
		return fmt.Errorf("bias of shape %v, expected [%d]", bias.Sizes, g.O)
	}
	if in.DType == Float64 {
		convFwd[float64](out, in, weight, bias, g, p)
	} else {
		convFwd[float32](out, in, weight, bias, g, p)
	}
	return nil
}

func pointwise(g convGeom, p ConvParams) bool {
	return g.KH == 1 && g.KW == 1 && p.StrideH == 1 && p.StrideW == 1 && p.PadH == 0 && p.PadW == 0
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
	x := make([]T, g.C*g.H*g.W)
	y := make([]T, g.O*g.P)
	var col []T
	if !pointwise(g, p) {
		col = make([]T, g.Kc*g.P)
	}
	for n := 0; n < g.N; n++ {
		if g.Kc == 0 {
			clear(y)
		} else {
			loadPlanes(x, in, n)
			for gi := 0; gi < g.G; gi++ {
				c := x[gi*g.Cg*g.H*g.W:]
				if col != nil {
					im2col(col, x, g, p, gi)
					c = col
				}
				blasGemm(false, false, g.Og, g.P, g.Kc, T(1), ptrOf(w[gi*g.Og*g.Kc:]), g.Kc,
					ptrOf(c), g.P, T(0), ptrOf(y[gi*g.Og*g.P:]), g.P)
			}
		}
		storePlanes(Tensor{Ptr: out.Ptr, DType: out.DType, Sizes: []int64{int64(g.N), int64(g.O), int64(g.OH), int64(g.OW)},
			Strides: out.Strides}, n, y, b)
	}
}

// Conv2dBackward computes the gradients selected by non-nil outputs: gin (like in), gw
// (like weight), gb ([O]).
func Conv2dBackward(gin, gw, gb *Tensor, gout, in, weight Tensor, p ConvParams) error {
	g, err := convGeometry(in, weight, gout.Sizes, p)
	if err != nil {
		return err
	}
	if err := checkFloat(gout, in, weight); err != nil {
		return err
	}
	for _, x := range []struct {
		t    *Tensor
		want []int64
	}{{gin, in.Sizes}, {gw, weight.Sizes}, {gb, []int64{int64(g.O)}}} {
		if x.t == nil {
			continue
		}
		if err := checkFloat(*x.t); err != nil {
			return err
		}
		if fmt.Sprint(x.t.Sizes) != fmt.Sprint(x.want) {
			return fmt.Errorf("gradient of shape %v, expected %v", x.t.Sizes, x.want)
		}
	}
	if in.DType == Float64 {
		convBwd[float64](gin, gw, gb, gout, in, weight, g, p)
	} else {
		convBwd[float32](gin, gw, gb, gout, in, weight, g, p)
	}
	return nil
}

func convBwd[T gemmFloat](gin, gw, gb *Tensor, gout, in, weight Tensor, g convGeom, p ConvParams) {
	w := loadAll[T](weight) // [O, Kc]
	dy := make([]T, g.O*g.P)
	var x, col, dx, dw, db []T
	pw := pointwise(g, p)
	if gw != nil {
		x = make([]T, g.C*g.H*g.W)
		dw = make([]T, g.O*g.Kc)
	}
	if gin != nil {
		dx = make([]T, g.C*g.H*g.W)
	}
	if !pw && (gw != nil || gin != nil) {
		col = make([]T, g.Kc*g.P)
	}
	if gb != nil {
		db = make([]T, g.O)
	}
	for n := 0; n < g.N; n++ {
		loadPlanes(dy, gout, n)
		if db != nil {
			for o := 0; o < g.O; o++ {
				var s T
				for _, v := range dy[o*g.P : (o+1)*g.P] {
					s += v
				}
				db[o] += s
			}
		}
		if g.P == 0 || g.Kc == 0 {
			if gin != nil {
				clear(dx)
				storePlanes(*gin, n, dx, nil)
			}
			continue
		}
		if gw != nil {
			loadPlanes(x, in, n)
			for gi := 0; gi < g.G; gi++ {
				c := x[gi*g.Cg*g.H*g.W:]
				if !pw {
					im2col(col, x, g, p, gi)
					c = col
				}
				// dW_g += dY_g [Og×P] @ col^T [P×Kc]
				blasGemm(false, true, g.Og, g.Kc, g.P, T(1), ptrOf(dy[gi*g.Og*g.P:]), g.P,
					ptrOf(c), g.P, T(1), ptrOf(dw[gi*g.Og*g.Kc:]), g.Kc)
			}
		}
		if gin != nil {
			clear(dx)
			for gi := 0; gi < g.G; gi++ {
				if pw {
					// dX_g = W_g^T [Cg×Og] @ dY_g [Og×P], written straight into dx.
					blasGemm(true, false, g.Kc, g.P, g.Og, T(1), ptrOf(w[gi*g.Og*g.Kc:]), g.Kc,
						ptrOf(dy[gi*g.Og*g.P:]), g.P, T(0), ptrOf(dx[gi*g.Cg*g.P:]), g.P)
					continue
				}
				blasGemm(true, false, g.Kc, g.P, g.Og, T(1), ptrOf(w[gi*g.Og*g.Kc:]), g.Kc,
					ptrOf(dy[gi*g.Og*g.P:]), g.P, T(0), ptrOf(col), g.P)
				col2im(dx, col, g, p, gi)
			}
			storePlanes(*gin, n, dx, nil)
		}
	}
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

// densePlanes reports whether dims 1..3 of t are laid out as one contiguous block.
func densePlanes(t Tensor) bool {
	want := int64(1)
	for d := 3; d >= 1; d-- {
		if t.Sizes[d] != 1 && t.Strides[d] != want {
			return false
		}
		want *= t.Sizes[d]
	}
	return true
}
