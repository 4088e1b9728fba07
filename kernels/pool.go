package kernels

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// PoolParams describes a 2-D pooling window.
type PoolParams struct {
	KH, KW, StrideH, StrideW, PadH, PadW, DilH, DilW int
}

// plane addresses the 2-D planes (dims 2,3) of a 4-D tensor, numbered n*C+c.
type plane struct {
	t Tensor
}

func (p plane) count() int64 { return p.t.Sizes[0] * p.t.Sizes[1] }
func (p plane) h() int       { return int(p.t.Sizes[2]) }
func (p plane) w() int       { return int(p.t.Sizes[3]) }

func (p plane) row(pc int64, r int) (base int64, stride int64) {
	es := int64(p.t.DType.Size())
	n, c := pc/p.t.Sizes[1], pc%p.t.Sizes[1]
	return (n*p.t.Strides[0] + c*p.t.Strides[1] + int64(r)*p.t.Strides[2]) * es, p.t.Strides[3] * es
}

func (p plane) load(pc int64, dst []float64) {
	for r := 0; r < p.h(); r++ {
		off, s := p.row(pc, r)
		loadRowT(dst[r*p.w():(r+1)*p.w()], at(p.t.Ptr, off), s, p.t.DType)
	}
}

func (p plane) store(pc int64, src []float64) {
	for r := 0; r < p.h(); r++ {
		off, s := p.row(pc, r)
		storeRowT(at(p.t.Ptr, off), s, p.t.DType, src[r*p.w():(r+1)*p.w()])
	}
}

func (p plane) loadIdx(pc int64, dst []int64) {
	for r := 0; r < p.h(); r++ {
		off, s := p.row(pc, r)
		for i := 0; i < p.w(); i++ {
			dst[r*p.w()+i] = *(*int64)(at(p.t.Ptr, off+int64(i)*s))
		}
	}
}

func (p plane) storeIdx(pc int64, src []int64) {
	for r := 0; r < p.h(); r++ {
		off, s := p.row(pc, r)
		for i := 0; i < p.w(); i++ {
			*(*int64)(at(p.t.Ptr, off+int64(i)*s)) = src[r*p.w()+i]
		}
	}
}

func checkPlanes(pairs ...Tensor) error {
	for _, t := range pairs {
		if t.Dim() != 4 {
			return fmt.Errorf("expected 4-D tensors, got %v", t.Sizes)
		}
	}
	for _, t := range pairs[1:] {
		if t.Sizes[0] != pairs[0].Sizes[0] || t.Sizes[1] != pairs[0].Sizes[1] {
			return fmt.Errorf("batch/channel mismatch: %v vs %v", t.Sizes, pairs[0].Sizes)
		}
	}
	return nil
}

func (p PoolParams) valid() error {
	if p.KH < 1 || p.KW < 1 || p.StrideH < 1 || p.StrideW < 1 || p.PadH < 0 || p.PadW < 0 || p.DilH < 1 || p.DilW < 1 {
		return fmt.Errorf("invalid pooling parameters %+v", p)
	}
	return nil
}

// MaxPool2d writes the window maxima and their flat in-plane indices (torch's CPU rule:
// the first maximum wins, NaN propagates).
func MaxPool2d(out, idx, in Tensor, p PoolParams) error {
	if err := checkPlanes(out, idx, in); err != nil {
		return err
	}
	if err := p.valid(); err != nil {
		return err
	}
	if idx.DType != Int64 || !in.DType.IsFloat() || out.DType != in.DType {
		return fmt.Errorf("dtypes: out %v, indices %v, input %v", out.DType, idx.DType, in.DType)
	}
	if out.Sizes[2] != idx.Sizes[2] || out.Sizes[3] != idx.Sizes[3] {
		return fmt.Errorf("indices %v and output %v differ", idx.Sizes, out.Sizes)
	}
	pi, po, px := plane{in}, plane{out}, plane{idx}
	H, W, OH, OW := pi.h(), pi.w(), po.h(), po.w()
	if denseInPlane(in) && denseInPlane(out) && denseInPlane(idx) {
		if in.DType == Float32 && isPlain2x2(p, in, out) {
			maxPool2x2F32(out, idx, in)
			return nil
		}
		if in.DType == BFloat16 && !noPoolBF16Fast && isPlain2x2(p, in, out) && denseBMN(flat3(in)) && denseBMN(flat3(out)) &&
			denseBMN(flat3(idx)) {
			maxPool2x2BF16(out, idx, in)
			return nil
		}
		switch in.DType {
		case Float32:
			maxPoolForwardNative[float32](out, idx, in, p)
			return nil
		case Float64:
			maxPoolForwardNative[float64](out, idx, in, p)
			return nil
		}
	}
	ParallelFor(pi.count(), int64(H*W+OH*OW*p.KH*p.KW), func(lo, hi int64) {
		x := make([]float64, H*W)
		y := make([]float64, OH*OW)
		ix := make([]int64, OH*OW)
		for pc := lo; pc < hi; pc++ {
			pi.load(pc, x)
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					h0, w0 := oh*p.StrideH-p.PadH, ow*p.StrideW-p.PadW
					h1, w1 := min(h0+(p.KH-1)*p.DilH+1, H), min(w0+(p.KW-1)*p.DilW+1, W)
					for h0 < 0 {
						h0 += p.DilH
					}
					for w0 < 0 {
						w0 += p.DilW
					}
					mi, mv := int64(h0*W+w0), math.Inf(-1)
					for ih := h0; ih < h1; ih += p.DilH {
						for iw := w0; iw < w1; iw += p.DilW {
							// Branch-free select: max-pool windows of real data mispredict
							// a compare-and-branch about half the time.
							v := x[ih*W+iw]
							m := uint64(0)
							if v > mv {
								m = ^uint64(0)
							}
							if v != v { // NaN wins, as in torch
								m = ^uint64(0)
							}
							mv = math.Float64frombits(math.Float64bits(v)&m | math.Float64bits(mv)&^m)
							k := int64(ih*W + iw)
							mi = k&int64(m) | mi&^int64(m)
						}
					}
					y[oh*OW+ow], ix[oh*OW+ow] = mv, mi
				}
			}
			po.store(pc, y)
			px.storeIdx(pc, ix)
		}
	})
	return nil
}

// denseInPlane reports whether each [H, W] plane of the 4-D t is contiguous.
func denseInPlane(t Tensor) bool {
	return (t.Sizes[3] == 1 || t.Strides[3] == 1) && (t.Sizes[2] == 1 || t.Strides[2] == t.Sizes[3])
}

// maxPoolForwardNative is MaxPool2d for float32/float64 tensors with dense planes,
// comparing in the operand dtype (exact, so the same maxima and indices).
func maxPoolForwardNative[T float32 | float64](out, idx, in Tensor, p PoolParams) {
	H, W := int(in.Sizes[2]), int(in.Sizes[3])
	OH, OW := int(out.Sizes[2]), int(out.Sizes[3])
	C := in.Sizes[1]
	es := int64(unsafe.Sizeof(T(0)))
	ParallelFor(in.Sizes[0]*C, int64(H*W+OH*OW*p.KH*p.KW), func(lo, hi int64) {
		for pc := lo; pc < hi; pc++ {
			n, c := pc/C, pc%C
			x := unsafe.Slice((*T)(at(in.Ptr, (n*in.Strides[0]+c*in.Strides[1])*es)), H*W)
			y := unsafe.Slice((*T)(at(out.Ptr, (n*out.Strides[0]+c*out.Strides[1])*es)), OH*OW)
			ix := unsafe.Slice((*int64)(at(idx.Ptr, (n*idx.Strides[0]+c*idx.Strides[1])*8)), OH*OW)
			for oh := 0; oh < OH; oh++ {
				h0 := oh*p.StrideH - p.PadH
				h1 := min(h0+(p.KH-1)*p.DilH+1, H)
				for h0 < 0 {
					h0 += p.DilH
				}
				for ow := 0; ow < OW; ow++ {
					w0 := ow*p.StrideW - p.PadW
					w1 := min(w0+(p.KW-1)*p.DilW+1, W)
					for w0 < 0 {
						w0 += p.DilW
					}
					mi, mv := h0*W+w0, T(math.Inf(-1))
					for ih := h0; ih < h1; ih += p.DilH {
						row := x[ih*W : ih*W+W]
						for iw := w0; iw < w1; iw += p.DilW {
							// First maximum wins; a NaN always takes over, as in torch.
							// Selected without branches: real data mispredicts a
							// compare-and-branch about half the time.
							v := row[iw]
							take := int(b2i(v > mv) | b2i(v != v))
							mv = selectT(take, v, mv)
							mi = take*(ih*W+iw) + (1-take)*mi
						}
					}
					y[oh*OW+ow], ix[oh*OW+ow] = mv, int64(mi)
				}
			}
		}
	})
}

// selectT returns a when take == 1, b when take == 0, without a branch.
func selectT[T float32 | float64](take int, a, b T) T {
	m := -uint64(take)
	if unsafe.Sizeof(a) == 4 {
		ab, bb := uint32(math.Float32bits(float32(a))), math.Float32bits(float32(b))
		return T(math.Float32frombits(ab&uint32(m) | bb&^uint32(m)))
	}
	return T(math.Float64frombits(math.Float64bits(float64(a))&m | math.Float64bits(float64(b))&^m))
}

// MaxPool2dBackward scatters gout into gin at the saved indices (gin is overwritten).
func MaxPool2dBackward(gin, gout, idx Tensor) error {
	if err := checkPlanes(gin, gout, idx); err != nil {
		return err
	}
	if idx.DType != Int64 || !gin.DType.IsFloat() || !gout.DType.IsFloat() {
		return fmt.Errorf("dtypes: grad_input %v, grad_output %v, indices %v", gin.DType, gout.DType, idx.DType)
	}
	if gout.Sizes[2] != idx.Sizes[2] || gout.Sizes[3] != idx.Sizes[3] {
		return fmt.Errorf("indices %v and grad_output %v differ", idx.Sizes, gout.Sizes)
	}
	pi, po, px := plane{gin}, plane{gout}, plane{idx}
	H, W, OH, OW := pi.h(), pi.w(), po.h(), po.w()
	if gin.DType == BFloat16 && gout.DType == BFloat16 && !noPoolBF16Fast && denseBMN(flat3(gin)) && denseBMN(flat3(gout)) &&
		denseBMN(flat3(idx)) {
		return maxPoolBackwardBF16(gin, gout, idx)
	}
	if gin.DType == gout.DType && (gin.DType == Float32 || gin.DType == Float64) {
		if gin.DType == Float32 {
			return maxPoolBackwardNative[float32](gin, gout, idx)
		}
		return maxPoolBackwardNative[float64](gin, gout, idx)
	}
	var bad error
	var mu sync.Mutex
	ParallelFor(pi.count(), int64(H*W+OH*OW), func(lo, hi int64) {
		g := make([]float64, H*W)
		gy := make([]float64, OH*OW)
		ix := make([]int64, OH*OW)
		for pc := lo; pc < hi; pc++ {
			clear(g)
			po.load(pc, gy)
			px.loadIdx(pc, ix)
			for i, k := range ix {
				if k < 0 || k >= int64(H*W) {
					mu.Lock()
					bad = fmt.Errorf("index %d out of range for a %dx%d plane", k, H, W)
					mu.Unlock()
					continue
				}
				g[k] += gy[i]
			}
			pi.store(pc, g)
		}
	})
	return bad
}

// maxPoolBackwardNative is MaxPool2dBackward for float32/float64 gradients of one dtype:
// each plane's gradients are added in the operand dtype in increasing output order, as
// torch's CPU kernel does, so overlapping windows round exactly as there.
func maxPoolBackwardNative[T float32 | float64](gin, gout, idx Tensor) error {
	H, W := gin.Sizes[2], gin.Sizes[3]
	OH, OW := gout.Sizes[2], gout.Sizes[3]
	C := gin.Sizes[1]
	es := int64(unsafe.Sizeof(T(0)))
	hw := H * W
	var bad error
	var mu sync.Mutex
	ParallelFor(gin.Sizes[0]*C, hw+OH*OW, func(lo, hi int64) {
		for pc := lo; pc < hi; pc++ {
			n, c := pc/C, pc%C
			gb := at(gin.Ptr, (n*gin.Strides[0]+c*gin.Strides[1])*es)
			ob := at(gout.Ptr, (n*gout.Strides[0]+c*gout.Strides[1])*es)
			xb := at(idx.Ptr, (n*idx.Strides[0]+c*idx.Strides[1])*8)
			gs2, gs3 := gin.Strides[2], gin.Strides[3]
			dense := gs3 == 1 && gs2 == W
			if dense && idx.Strides[3] == 1 && idx.Strides[2] == OW && gout.Strides[3] == 1 && gout.Strides[2] == OW {
				g := unsafe.Slice((*T)(gb), hw)
				ks := unsafe.Slice((*int64)(xb), OH*OW)
				ys := unsafe.Slice((*T)(ob), OH*OW)[:len(ks)]
				clear(g)
				for i, k := range ks {
					if uint64(k) >= uint64(hw) {
						mu.Lock()
						bad = fmt.Errorf("index %d out of range for a %dx%d plane", k, H, W)
						mu.Unlock()
						continue
					}
					g[k] += ys[i]
				}
				continue
			}
			for h := int64(0); h < H; h++ {
				if gs3 == 1 {
					clear(unsafe.Slice((*T)(at(gb, h*gs2*es)), W))
					continue
				}
				for w := int64(0); w < W; w++ {
					*(*T)(at(gb, (h*gs2+w*gs3)*es)) = 0
				}
			}
			for oh := int64(0); oh < OH; oh++ {
				for ow := int64(0); ow < OW; ow++ {
					k := *(*int64)(at(xb, (oh*idx.Strides[2]+ow*idx.Strides[3])*8))
					if k < 0 || k >= hw {
						mu.Lock()
						bad = fmt.Errorf("index %d out of range for a %dx%d plane", k, H, W)
						mu.Unlock()
						continue
					}
					off := k
					if !dense {
						off = k/W*gs2 + k%W*gs3
					}
					*(*T)(at(gb, off*es)) += *(*T)(at(ob, (oh*gout.Strides[2]+ow*gout.Strides[3])*es))
				}
			}
		}
	})
	return bad
}

// avgWindow returns the clipped window and torch's divisor for output (oh, ow).
func avgWindow(oh, ow, H, W int, p PoolParams, countIncludePad bool, divisor int) (h0, h1, w0, w1 int, div float64) {
	h0, w0 = oh*p.StrideH-p.PadH, ow*p.StrideW-p.PadW
	h1, w1 = min(h0+p.KH, H+p.PadH), min(w0+p.KW, W+p.PadW)
	size := (h1 - h0) * (w1 - w0)
	h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, H), min(w1, W)
	switch {
	case divisor != 0:
		div = float64(divisor)
	case countIncludePad:
		div = float64(size)
	default:
		div = float64((h1 - h0) * (w1 - w0))
	}
	return
}

// AvgPool2d averages windows as torch's CPU kernel does (count_include_pad, divisor_override
// given as divisor != 0).
func AvgPool2d(out, in Tensor, p PoolParams, countIncludePad bool, divisor int) error {
	if err := checkPlanes(out, in); err != nil {
		return err
	}
	if err := p.valid(); err != nil {
		return err
	}
	pi, po := plane{in}, plane{out}
	H, W, OH, OW := pi.h(), pi.w(), po.h(), po.w()
	ParallelFor(pi.count(), int64(H*W+OH*OW*p.KH*p.KW), func(lo, hi int64) {
		x := make([]float64, H*W)
		y := make([]float64, OH*OW)
		for pc := lo; pc < hi; pc++ {
			pi.load(pc, x)
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					h0, h1, w0, w1, div := avgWindow(oh, ow, H, W, p, countIncludePad, divisor)
					if h0 >= h1 || w0 >= w1 {
						y[oh*OW+ow] = 0
						continue
					}
					s := 0.0
					for ih := h0; ih < h1; ih++ {
						for iw := w0; iw < w1; iw++ {
							s += x[ih*W+iw]
						}
					}
					y[oh*OW+ow] = s / div
				}
			}
			po.store(pc, y)
		}
	})
	return nil
}

// AvgPool2dBackward spreads each output gradient over its window (gin is overwritten).
func AvgPool2dBackward(gin, gout Tensor, p PoolParams, countIncludePad bool, divisor int) error {
	if err := checkPlanes(gin, gout); err != nil {
		return err
	}
	if err := p.valid(); err != nil {
		return err
	}
	pi, po := plane{gin}, plane{gout}
	H, W, OH, OW := pi.h(), pi.w(), po.h(), po.w()
	acc := gradAcc{gin.DType}
	ParallelFor(pi.count(), int64(H*W+OH*OW*p.KH*p.KW), func(lo, hi int64) {
		g := make([]float64, H*W)
		gy := make([]float64, OH*OW)
		for pc := lo; pc < hi; pc++ {
			clear(g)
			po.load(pc, gy)
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					h0, h1, w0, w1, div := avgWindow(oh, ow, H, W, p, countIncludePad, divisor)
					spreadGrad(g, W, h0, h1, w0, w1, acc.div(gy[oh*OW+ow], div), acc)
				}
			}
			pi.store(pc, g)
		}
	})
	return nil
}

func adaptiveRange(o, in, out int) (int, int) {
	return (o * in) / out, ((o+1)*in + out - 1) / out
}

// AdaptiveAvgPool2d averages torch's adaptive windows; backward when grad is true
// (then a is grad_input and b grad_output).
func AdaptiveAvgPool2d(a, b Tensor, grad bool) error {
	if err := checkPlanes(a, b); err != nil {
		return err
	}
	x, y := plane{b}, plane{a} // forward: a = out, b = in
	if grad {
		x, y = plane{a}, plane{b} // x: grad_input plane geometry, y: grad_output
	}
	H, W, OH, OW := x.h(), x.w(), y.h(), y.w()
	if OH == 0 || OW == 0 {
		if grad {
			ParallelFor(x.count(), int64(H*W), func(lo, hi int64) {
				z := make([]float64, H*W)
				for pc := lo; pc < hi; pc++ {
					x.store(pc, z)
				}
			})
		}
		return nil
	}
	acc := gradAcc{a.DType}
	ParallelFor(x.count(), int64(2*H*W+OH*OW), func(lo, hi int64) {
		xb := make([]float64, H*W)
		yb := make([]float64, OH*OW)
		for pc := lo; pc < hi; pc++ {
			if grad {
				clear(xb)
				y.load(pc, yb)
			} else {
				x.load(pc, xb)
			}
			for oh := 0; oh < OH; oh++ {
				h0, h1 := adaptiveRange(oh, H, OH)
				for ow := 0; ow < OW; ow++ {
					w0, w1 := adaptiveRange(ow, W, OW)
					n := float64((h1 - h0) * (w1 - w0))
					if grad {
						// torch divides by the window height, then by its width
						v := acc.div(acc.div(yb[oh*OW+ow], float64(h1-h0)), float64(w1-w0))
						spreadGrad(xb, W, h0, h1, w0, w1, v, acc)
						continue
					}
					s := 0.0
					for ih := h0; ih < h1; ih++ {
						for iw := w0; iw < w1; iw++ {
							s += xb[ih*W+iw]
						}
					}
					yb[oh*OW+ow] = s / n
				}
			}
			if grad {
				x.store(pc, xb)
			} else {
				y.store(pc, yb)
			}
		}
	})
	return nil
}

// gradAcc does the arithmetic of torch's CPU avg-pool backward kernels in the gradient's
// own dtype: they compute grad_output / divisor and add it into grad_input with scalar_t
// operations, so float32 rounds every step to float32 and bfloat16/float16 (c10 scalar
// arithmetic: float math, then rounding) to their precision; float64 stays float64.
type gradAcc struct{ dt DType }

func (a gradAcc) round(v float64) float64 {
	if a.dt == Float64 {
		return v
	}
	return float64(roundTo(a.dt, float32(v)))
}

func (a gradAcc) div(g, d float64) float64 {
	if a.dt == Float64 {
		return g / d
	}
	return float64(roundTo(a.dt, float32(g)/float32(d)))
}

// spreadGrad adds v to the window [h0,h1)x[w0,w1) of the row-major plane g (row length W),
// rounding each sum as the gradient's dtype does.
func spreadGrad(g []float64, W, h0, h1, w0, w1 int, v float64, a gradAcc) {
	for ih := h0; ih < h1; ih++ {
		row := g[ih*W : (ih+1)*W]
		for iw := w0; iw < w1; iw++ {
			row[iw] = a.round(row[iw] + v)
		}
	}
}

// isPlain2x2 reports the CNN's pooling (2x2 windows, stride 2, no padding or dilation)
// with every window inside the input, which maxPool2x2F32 serves.
func isPlain2x2(p PoolParams, in, out Tensor) bool {
	return p.KH == 2 && p.KW == 2 && p.StrideH == 2 && p.StrideW == 2 && p.PadH == 0 && p.PadW == 0 &&
		p.DilH == 1 && p.DilW == 1 && 2*out.Sizes[2] <= in.Sizes[2] && 2*out.Sizes[3] <= in.Sizes[3]
}

// maxPool2x2F32 is maxPoolForwardNative for plain 2x2/2 windows, a range of planes per
// call on both cores (pool2x2Planes: C when built with cgo, else Go).
func maxPool2x2F32(out, idx, in Tensor) {
	H, W := in.Sizes[2], in.Sizes[3]
	OH, OW := out.Sizes[2], out.Sizes[3]
	ParallelFor(in.Sizes[0]*in.Sizes[1], H*W+4*OH*OW, func(lo, hi int64) {
		pool2x2Planes(in, out, idx, lo, hi)
	})
}

// pool2x2PlanesGo runs pool2x2PlaneGo over planes [lo, hi).
func pool2x2PlanesGo(in, out, idx Tensor, lo, hi int64) {
	C := in.Sizes[1]
	for pc := lo; pc < hi; pc++ {
		n, c := pc/C, pc%C
		pool2x2PlaneGo(at(in.Ptr, (n*in.Strides[0]+c*in.Strides[1])*4), at(out.Ptr, (n*out.Strides[0]+c*out.Strides[1])*4),
			at(idx.Ptr, (n*idx.Strides[0]+c*idx.Strides[1])*8), in.Sizes[3], out.Sizes[2], out.Sizes[3])
	}
}

// pool2x2PlaneGo is one plane of maxPool2x2F32: the four candidates of a window compared
// in the generic kernel's order (row by row, first maximum wins, a NaN takes over).
func pool2x2PlaneGo(xp, yp, ip unsafe.Pointer, W, OH, OW int64) {
	x := unsafe.Slice((*float32)(xp), (2*OH-1)*W+2*OW)
	y := unsafe.Slice((*float32)(yp), OH*OW)
	ix := unsafe.Slice((*int64)(ip), OH*OW)
	for oh := int64(0); oh < OH; oh++ {
		base := 2 * oh * W
		r0, r1 := x[base:base+2*OW], x[base+W:base+W+2*OW]
		yr, ir := y[oh*OW:oh*OW+OW], ix[oh*OW:oh*OW+OW]
		for ow := range yr {
			k := int64(2 * ow)
			mv, mi := r0[k], base+k
			for j, v := range [3]float32{r0[k+1], r1[k], r1[k+1]} {
				t := b2i(v > mv) | b2i(v != v)
				pos := base + k + [3]int64{1, W, W + 1}[j]
				mv, mi = sel32(t != 0, v, mv), t*pos+(1-t)*mi
			}
			yr[ow], ir[ow] = mv, mi
		}
	}
}

// noPoolBF16Fast turns the bfloat16 fast paths off (tests compare them with the generic
// kernels).
var noPoolBF16Fast bool

// flat3 views a 4-D [N, C, H, W] tensor as [N*C, H, W] for layout checks (denseBMN):
// planes one stride apart when the N and C strides chain (a size-1 dim's stride is free).
func flat3(t Tensor) Tensor {
	st0 := t.Strides[1]
	if t.Sizes[1] == 1 {
		st0 = t.Strides[0]
	} else if t.Sizes[0] > 1 && t.Strides[0] != t.Sizes[1]*t.Strides[1] {
		st0 = -1 // not a single stride: denseBMN fails
	}
	return Tensor{Ptr: t.Ptr, DType: t.DType, Sizes: []int64{t.Sizes[0] * t.Sizes[1], t.Sizes[2], t.Sizes[3]},
		Strides: []int64{st0, t.Strides[2], t.Strides[3]}}
}

// maxPool2x2BF16 is the generic kernel's 2x2/2 pooling for contiguous bfloat16 tensors:
// widening is exact and keeps the order, so the float32 fast path picks the same maxima
// and indices, and narrowing them back is exact.
func maxPool2x2BF16(out, idx, in Tensor) {
	H, W := in.Sizes[2], in.Sizes[3]
	OH, OW := out.Sizes[2], out.Sizes[3]
	ParallelFor(in.Sizes[0]*in.Sizes[1], H*W+4*OH*OW, func(lo, hi int64) {
		n := hi - lo
		xb, yb := getF32(int(n*H*W)), getF32(int(n*OH*OW))
		defer putF32(xb)
		defer putF32(yb)
		bf16ToF32s(*xb, unsafe.Slice((*uint16)(at(in.Ptr, lo*H*W*2)), n*H*W))
		xt := Tensor{Ptr: unsafe.Pointer(&(*xb)[0]), DType: Float32, Sizes: []int64{1, n, H, W},
			Strides: []int64{n * H * W, H * W, W, 1}}
		osz, ost := []int64{1, n, OH, OW}, []int64{n * OH * OW, OH * OW, OW, 1}
		yt := Tensor{Ptr: unsafe.Pointer(&(*yb)[0]), DType: Float32, Sizes: osz, Strides: ost}
		it := Tensor{Ptr: at(idx.Ptr, lo*OH*OW*8), DType: Int64, Sizes: osz, Strides: ost}
		pool2x2Planes(xt, yt, it, 0, n)
		f32ToBF16s(unsafe.Slice((*uint16)(at(out.Ptr, lo*OH*OW*2)), n*OH*OW), *yb)
	})
}

// maxPoolBackwardBF16 is MaxPool2dBackward for contiguous bfloat16 tensors: the generic
// kernel's float64 sums per plane and one rounding per element, without its per-element
// row loads. A plane whose indices are all distinct (windows that do not overlap, as in
// the usual 2x2 stride-2 pool) has one term per sum, so its result is that term as the
// sum would round it (-0 becomes +0, a NaN the quiet 0x7fc0), scattered straight into
// the zeroed plane; only a plane with a repeated index takes the float64 sums.
func maxPoolBackwardBF16(gin, gout, idx Tensor) error {
	hw := gin.Sizes[2] * gin.Sizes[3]
	ohw := gout.Sizes[2] * gout.Sizes[3]
	var bad error
	var mu sync.Mutex
	ParallelFor(gin.Sizes[0]*gin.Sizes[1], hw+ohw, func(lo, hi int64) {
		var acc []float64
		seen := make([]bool, hw)
		for pc := lo; pc < hi; pc++ {
			g := unsafe.Slice((*uint16)(at(gin.Ptr, pc*hw*2)), hw)
			ys := unsafe.Slice((*uint16)(at(gout.Ptr, pc*ohw*2)), ohw)
			ks := unsafe.Slice((*int64)(at(idx.Ptr, pc*ohw*8)), ohw)
			clear(g)
			clear(seen)
			repeated := false
			for i, k := range ks {
				if uint64(k) >= uint64(hw) {
					continue // reported by the float64 pass below
				}
				if seen[k] {
					repeated = true
					break
				}
				seen[k] = true
				g[k] = poolGradTerm(ys[i])
			}
			if !repeated {
				for _, k := range ks {
					if uint64(k) >= uint64(hw) {
						repeated = true // take the pass that reports it
						break
					}
				}
			}
			if !repeated {
				continue
			}
			if acc == nil {
				acc = make([]float64, hw)
			}
			clear(acc)
			for i, k := range ks {
				if uint64(k) >= uint64(hw) {
					mu.Lock()
					bad = fmt.Errorf("index %d out of range for a %dx%d plane", k, gin.Sizes[2], gin.Sizes[3])
					mu.Unlock()
					continue
				}
				acc[k] += float64(BF16ToF32(ys[i]))
			}
			for i, v := range acc {
				g[i] = F32ToBF16(float32(v))
			}
		}
	})
	return bad
}

// poolGradTerm is F32ToBF16(float32(0.0 + float64(y))) for bfloat16 bits y: a sum of
// one term.
func poolGradTerm(y uint16) uint16 {
	switch {
	case y&0x7fff == 0:
		return 0 // +0 + -0 is +0
	case y&0x7fff > 0x7f80:
		return 0x7fc0 // NaN, quieted
	}
	return y
}
