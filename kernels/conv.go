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
	if g.N > 0 && g.C > 0 && (g.H == 0 || g.W == 0) {
		// torch's own check (convolution's check_input_shape_forward); the im2col
		// paths assume a non-empty plane
		return g, fmt.Errorf("Only zero batch or zero channel inputs are supported, but got input shape: %v", in.Sizes)
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
	if convBF16DotOK(g, &out, &in, &weight) {
		if convDirectBF16FwdOK(g, p) {
			convFwdDirectBF16(out, in, weight, bias, g, p) // conv_direct_bf16.go
			return nil
		}
		convFwdBF16Dot(out, in, weight, bias, g, p) // conv_bf16dot.go
		return nil
	}
	if x, ok := widenBF16(in); ok {
		if out.DType == BFloat16 && contiguous4(out) {
			defer putF32(x.buf)
			yb := getF32(int(out.Numel()))
			defer putF32(yb)
			convFwd[float32](f32Like(out, *yb), x.t, weight, bias, g, p)
			convertFlat(unsafe.Slice((*uint16)(out.Ptr), len(*yb)), *yb)
			return nil
		}
		putF32(x.buf)
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
	if convBF16DotOK(g, gin, &gout, &in, &weight) {
		var dw, db []float32
		if gw != nil {
			dw = make([]float32, g.O*g.Kc)
		}
		if gb != nil {
			db = make([]float32, g.O)
		}
		if convDirectBF16BwdOK(g, p, gin != nil, gw != nil) {
			convBwdDirectBF16(gin, dw, db, gout, in, weight, g, p) // conv_direct_bf16.go
		} else {
			convBwdBF16Dot(gin, dw, db, gout, in, weight, g, p) // conv_bf16dot.go
		}
		storeConvGrads(gw, gb, dw, db, g)
		return nil
	}
	if gin != nil && gin.DType == BFloat16 && contiguous4(*gin) {
		if x, ok := widenBF16(in); ok {
			if dy, ok := widenBF16(gout); ok {
				defer putF32(x.buf)
				defer putF32(dy.buf)
				gb32 := getF32(int(gin.Numel()))
				defer putF32(gb32)
				fgin := f32Like(*gin, *gb32)
				convBwd[float32](&fgin, gw, gb, dy.t, x.t, weight, g, p)
				convertFlat(unsafe.Slice((*uint16)(gin.Ptr), len(*gb32)), *gb32)
				return nil
			}
			putF32(x.buf)
		}
	}
	if in.DType == Float64 {
		convBwd[float64](gin, gw, gb, gout, in, weight, g, p)
	} else {
		convBwd[float32](gin, gw, gb, gout, in, weight, g, p)
	}
	return nil
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

// f32Half is a contiguous float32 copy of a bfloat16 tensor, in a pooled buffer.
type f32Half struct {
	t   Tensor
	buf *[]float32
}

// widenBF16 copies the contiguous bfloat16 4-D t into a float32 tensor, so that bf16
// convolutions take the float32 per-sample path (exact widening; results are rounded
// once, as the generic path's float32 accumulation is). ok is false for other dtypes or
// layouts, which keep the generic path.
func widenBF16(t Tensor) (f32Half, bool) {
	if !convPerSample || t.DType != BFloat16 || !contiguous4(t) {
		return f32Half{}, false
	}
	b := getF32(int(t.Numel()))
	widenFlat(*b, unsafe.Slice((*uint16)(t.Ptr), len(*b)))
	return f32Half{t: f32Like(t, *b), buf: b}, true
}

// f32Like is a contiguous float32 tensor of t's shape over buf.
func f32Like(t Tensor, buf []float32) Tensor {
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	return Tensor{Ptr: p, DType: Float32, Sizes: t.Sizes, Strides: []int64{t.Sizes[1] * t.Sizes[2] * t.Sizes[3],
		t.Sizes[2] * t.Sizes[3], t.Sizes[3], 1}}
}

// contiguous4 reports whether the non-empty 4-D t is laid out as a contiguous array.
func contiguous4(t Tensor) bool {
	return t.Numel() > 0 && densePlanes(t) && (t.Sizes[0] == 1 || t.Strides[0] == t.Sizes[1]*t.Sizes[2]*t.Sizes[3])
}
