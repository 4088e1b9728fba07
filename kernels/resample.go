package kernels

import (
	"fmt"
	"math"
)

// Resampling modes of one spatial axis: every upsampling mode and the index-map paddings
// are separable, out[o] = Σ_k w[o,k] * in[idx[o,k]] along each axis.
const (
	RsNearest      = 0 // upsample_nearest*d (torch's legacy floor(o * scale))
	RsNearestExact = 1 // _upsample_nearest_exact*d (floor((o + 0.5) * scale))
	RsLinear       = 2 // upsample_{linear1d, bilinear2d, trilinear3d}
	RsCubic        = 3 // upsample_bicubic2d (A = -0.75, clamped taps)
	RsLinearAA     = 4 // _upsample_bilinear2d_aa (triangle filter widened by the scale)
	RsCubicAA      = 5 // _upsample_bicubic2d_aa (Keys cubic, A = -0.5)
	RsReflect      = 6 // reflection_pad*d (pad may be negative: a crop)
	RsReplicate    = 7 // replication_pad*d
)

// AxisMap holds the taps of one axis: output index o reads In indices Idx[o*K:(o+1)*K]
// with weights W[o*K:(o+1)*K].
type AxisMap struct {
	In, Out, K int
	Idx        []int
	W          []float64
	unit       bool // one tap of weight 1 per output: a gather, exact for every dtype
}

// AxisSpec describes one axis for BuildAxis.
type AxisSpec struct {
	Mode, In, Out int
	AlignCorners  bool
	Scale         float64 // the user's scale factor (output/input); <= 0 when not given
	Pad           int     // padding modes: the left pad
	// BF16Math computes a linear axis in bfloat16 arithmetic (scale, source index and
	// weights each rounded), as torch's CPU trilinear kernel does for bfloat16 inputs.
	BF16Math bool
}

// scalesValue and areaScale follow torch's CPU helpers (UpSample.h) in float32
// arithmetic, so indices and weights round exactly as the CPU kernels' do.
func scalesValue(scale float64, in, out int) float32 {
	if scale > 0 {
		return float32(1.0 / scale)
	}
	return float32(in) / float32(out)
}

func areaScale(in, out int, align bool, scale float64) float32 {
	if align {
		if out > 1 {
			return float32(in-1) / float32(out-1)
		}
		return 0
	}
	return scalesValue(scale, in, out)
}

func sourceIndex(scale float32, o int, align, cubic bool) float32 {
	if align {
		return float32(scale * float32(o))
	}
	s := float32(scale*(float32(o)+0.5)) - 0.5
	if !cubic && s < 0 {
		return 0
	}
	return s
}

// guardIndex is torch's guard_index_and_lambda.
func guardIndex(real float32, in int) (int, float32) {
	i := min(int(float32(math.Floor(float64(real)))), in-1)
	l := min(max(real-float32(i), 0), 1)
	return i, l
}

func cubicConv1(x, a float32) float32 {
	return float32(float32(float32(float32((a+2)*x)-(a+3))*x)*x) + 1
}

func cubicConv2(x, a float32) float32 {
	return float32(float32(float32(float32(float32(a*x)-5*a)*x)+8*a)*x) - 4*a
}

func clampIdx(i, n int) int { return min(max(i, 0), n-1) }

// BuildAxis computes the taps of one axis.
func BuildAxis(s AxisSpec) (AxisMap, error) {
	if s.In < 0 || s.Out < 0 {
		return AxisMap{}, fmt.Errorf("negative axis size: %+v", s)
	}
	m := AxisMap{In: s.In, Out: s.Out, K: 1}
	if s.Out > 0 && s.In == 0 {
		return AxisMap{}, fmt.Errorf("resampling an empty axis to %d elements", s.Out)
	}
	set := func(o, k, i int, w float64) {
		m.Idx[o*m.K+k], m.W[o*m.K+k] = i, w
	}
	alloc := func(k int) {
		m.K = k
		m.Idx = make([]int, s.Out*k)
		m.W = make([]float64, s.Out*k)
	}
	switch s.Mode {
	case RsNearest, RsNearestExact, RsReflect, RsReplicate:
		alloc(1)
		m.unit = true
		sc := float32(0)
		if s.Mode <= RsNearestExact && s.Out > 0 {
			sc = scalesValue(s.Scale, s.In, s.Out)
		}
		oStart, iStart := max(0, s.Pad), max(0, -s.Pad)
		for o := 0; o < s.Out; o++ {
			var i int
			switch s.Mode {
			case RsNearest:
				switch {
				case s.Out == s.In:
					i = o
				case s.Out == 2*s.In:
					i = o >> 1
				default:
					i = min(int(float32(math.Floor(float64(float32(float32(o)*sc))))), s.In-1)
				}
			case RsNearestExact:
				i = min(int(math.Floor(float64(float32((float64(o)+0.5)*float64(sc))))), s.In-1)
			case RsReflect:
				switch {
				case o < s.Pad:
					i = 2*s.Pad - o
				case o < s.In+s.Pad:
					i = o
				default:
					i = 2*(s.In+s.Pad-1) - o
				}
				i = i - oStart + iStart
			case RsReplicate:
				switch {
				case o < s.Pad:
					i = s.Pad
				case o < s.In+s.Pad:
					i = o
				default:
					i = s.In + s.Pad - 1
				}
				i = i - oStart + iStart
			}
			set(o, 0, i, 1)
		}
	case RsLinear:
		alloc(2)
		sc := areaScale(s.In, s.Out, s.AlignCorners, s.Scale)
		for o := 0; o < s.Out; o++ {
			if s.In == s.Out {
				set(o, 0, o, 1)
				set(o, 1, o, 0)
				continue
			}
			if s.BF16Math {
				r := func(x float64) float64 { return roundBF16(x) }
				sb := r(float64(sc))
				real := r(sb * float64(o))
				if !s.AlignCorners {
					real = max(r(r(sb*r(float64(o)+0.5))-0.5), 0)
				}
				i0 := min(int(real), s.In-1)
				i1 := i0
				if i0 < s.In-1 {
					i1++
				}
				l1 := r(real - float64(i0))
				set(o, 0, i0, r(1-l1))
				set(o, 1, i1, l1)
				continue
			}
			i0, l1 := guardIndex(sourceIndex(sc, o, s.AlignCorners, false), s.In)
			i1 := i0
			if i0 < s.In-1 {
				i1++
			}
			set(o, 0, i0, float64(1-l1))
			set(o, 1, i1, float64(l1))
		}
	case RsCubic:
		alloc(4)
		sc := areaScale(s.In, s.Out, s.AlignCorners, s.Scale)
		const a = float32(-0.75)
		for o := 0; o < s.Out; o++ {
			i0, t := guardIndex(sourceIndex(sc, o, s.AlignCorners, true), s.In)
			w := [4]float32{cubicConv2(t+1, a), cubicConv1(t, a), cubicConv1(1-t, a), cubicConv2(1-t+1, a)}
			for k := 0; k < 4; k++ {
				set(o, k, clampIdx(i0-1+k, s.In), float64(w[k]))
			}
		}
	case RsLinearAA, RsCubicAA:
		interp := float32(2)
		filter := func(x float32) float32 {
			if x < 0 {
				x = -x
			}
			if x < 1 {
				return 1 - x
			}
			return 0
		}
		if s.Mode == RsCubicAA {
			interp = 4
			filter = func(x float32) float32 {
				if x < 0 {
					x = -x
				}
				if x < 1 {
					return cubicConv1(x, -0.5)
				}
				if x < 2 {
					return cubicConv2(x, -0.5)
				}
				return 0
			}
		}
		sc := areaScale(s.In, s.Out, s.AlignCorners, s.Scale)
		support, invscale := interp*0.5, float32(1)
		if sc >= 1 {
			support = float32(interp*0.5) * sc
			invscale = float32(1.0 / float64(sc))
		}
		alloc(int(math.Ceil(float64(support)))*2 + 1)
		for o := 0; o < s.Out; o++ {
			center := float32(float64(sc) * (float64(o) + 0.5))
			xmin := max(int(float64(center-support)+0.5), 0)
			xsize := min(int(float64(center+support)+0.5), s.In) - xmin
			xsize = min(max(xsize, 0), m.K)
			ws := make([]float32, xsize)
			total := float32(0)
			for j := 0; j < xsize; j++ {
				ws[j] = filter(float32((float64(float32(j+xmin)-center) + 0.5) * float64(invscale)))
				total += ws[j]
			}
			for j := 0; j < m.K; j++ {
				w := float32(0)
				if j < xsize && total != 0 {
					w = ws[j] / total
				}
				set(o, j, min(xmin+j, s.In-1), float64(w))
			}
		}
	default:
		return AxisMap{}, fmt.Errorf("unknown resampling mode %d", s.Mode)
	}
	for _, i := range m.Idx {
		if i < 0 || i >= s.In {
			return AxisMap{}, fmt.Errorf("resampling index %d outside an axis of %d", i, s.In)
		}
	}
	return m, nil
}

func checkMaps(out, in Tensor, maps [3]AxisMap) error {
	if err := checkVol(out, in); err != nil {
		return err
	}
	for a, m := range maps {
		if int64(m.In) != in.Sizes[2+a] || int64(m.Out) != out.Sizes[2+a] {
			return fmt.Errorf("axis %d maps %d -> %d, tensors are %v -> %v", a, m.In, m.Out, in.Sizes, out.Sizes)
		}
	}
	return nil
}

// roundBF16 rounds to bfloat16 through float32, as c10::BFloat16 arithmetic does.
func roundBF16(x float64) float64 { return float64(BF16ToF32(F32ToBF16(float32(x)))) }

// pass applies one axis map to a row-major block [outer, n, inner] -> [outer, m.Out, inner].
// With rb >= 1 the weights are rounded to bfloat16 first: torch's CPU kernels keep the
// weights of bfloat16 interpolation in bfloat16 (and sum in float32), and op_db compares
// against that; with rb == 2 every product and partial sum rounds to bfloat16 too.
func (m AxisMap) pass(dst, src []float64, outer, inner int, rb int) {
	for p := 0; p < outer; p++ {
		s := src[p*m.In*inner : (p+1)*m.In*inner]
		d := dst[p*m.Out*inner : (p+1)*m.Out*inner]
		for o := 0; o < m.Out; o++ {
			row := d[o*inner : (o+1)*inner]
			for j := range row {
				row[j] = 0
			}
			for k := 0; k < m.K; k++ {
				w := m.W[o*m.K+k]
				if w == 0 {
					continue
				}
				sr := s[m.Idx[o*m.K+k]*inner:]
				if rb >= 1 {
					w = roundBF16(w)
				}
				if rb == 2 {
					for j := range row {
						row[j] = roundBF16(row[j] + roundBF16(w*sr[j]))
					}
					continue
				}
				for j := range row {
					row[j] += w * sr[j]
				}
			}
		}
	}
}

// passT is pass transposed (the backward): [outer, m.Out, inner] -> [outer, m.In, inner].
func (m AxisMap) passT(dst, src []float64, outer, inner int) {
	for i := range dst[:outer*m.In*inner] {
		dst[i] = 0
	}
	for p := 0; p < outer; p++ {
		s := src[p*m.Out*inner : (p+1)*m.Out*inner]
		d := dst[p*m.In*inner : (p+1)*m.In*inner]
		for o := 0; o < m.Out; o++ {
			row := s[o*inner : (o+1)*inner]
			for k := 0; k < m.K; k++ {
				w := m.W[o*m.K+k]
				if w == 0 {
					continue
				}
				dr := d[m.Idx[o*m.K+k]*inner:]
				for j, v := range row {
					dr[j] += w * v
				}
			}
		}
	}
}

// Resample writes out = the separable resampling of in by maps (axes D, H, W of 5-D
// tensors), summing along W first, then H, then D, as torch's CPU kernels nest their sums.
// Index-only maps (nearest, padding) copy elements and serve every dtype.
func Resample(out, in Tensor, maps [3]AxisMap, rb int) error {
	if err := checkMaps(out, in, maps); err != nil {
		return err
	}
	if out.DType != in.DType {
		return fmt.Errorf("dtypes: out %v, input %v", out.DType, in.DType)
	}
	vi, vo := vol{in}, vol{out}
	if vo.count() == 0 || vo.size() == 0 {
		return nil
	}
	offI, offO := make([]int64, vi.size()), make([]int64, vo.size())
	vi.offsets(offI)
	vo.offsets(offO)
	md, mh, mw := maps[0], maps[1], maps[2]
	D, H, W := vi.d(), vi.h(), vi.w()
	OD, OH, OW := vo.d(), vo.h(), vo.w()
	if md.unit && mh.unit && mw.unit {
		es := in.DType.Size()
		src := make([]int64, vo.size())
		i := 0
		for od := 0; od < OD; od++ {
			for oh := 0; oh < OH; oh++ {
				r := (md.Idx[od]*H + mh.Idx[oh]) * W
				for ow := 0; ow < OW; ow++ {
					src[i] = offI[r+mw.Idx[ow]]
					i++
				}
			}
		}
		ParallelFor(vo.count(), int64(vo.size()), func(lo, hi int64) {
			for pc := lo; pc < hi; pc++ {
				bi, bo := at(in.Ptr, vi.base(pc)), at(out.Ptr, vo.base(pc))
				for j, o := range offO {
					copyElem(at(bo, o), at(bi, src[j]), es)
				}
			}
		})
		return nil
	}
	if !in.DType.IsFloat() {
		return fmt.Errorf("interpolation of %v tensors", in.DType)
	}
	ParallelFor(vo.count(), int64(vi.size()+vo.size()*(md.K+mh.K+mw.K)), func(lo, hi int64) {
		x := make([]float64, D*H*W)
		t1 := make([]float64, D*H*OW)
		t2 := make([]float64, D*OH*OW)
		y := make([]float64, OD*OH*OW)
		for pc := lo; pc < hi; pc++ {
			vi.load(pc, offI, x)
			mw.pass(t1, x, D*H, 1, rb)
			mh.pass(t2, t1, D, OW, rb)
			md.pass(y, t2, 1, OH*OW, rb)
			vo.store(pc, offO, y)
		}
	})
	return nil
}

// ResampleBackward writes gin = the transpose of Resample applied to gout (float dtypes).
// Index-only maps scatter the gradient in output order; with rb each addition rounds to
// bfloat16, as torch's CPU padding backward accumulates into a bfloat16 gradient.
func ResampleBackward(gin, gout Tensor, maps [3]AxisMap, rb bool) error {
	if err := checkMaps(gout, gin, maps); err != nil {
		return err
	}
	if !gin.DType.IsFloat() || !gout.DType.IsFloat() {
		return fmt.Errorf("dtypes: grad_input %v, grad_output %v", gin.DType, gout.DType)
	}
	vi, vo := vol{gin}, vol{gout}
	if vi.count() == 0 || vi.size() == 0 {
		return nil
	}
	offI, offO := make([]int64, vi.size()), make([]int64, vo.size())
	vi.offsets(offI)
	vo.offsets(offO)
	md, mh, mw := maps[0], maps[1], maps[2]
	D, H, W := vi.d(), vi.h(), vi.w()
	OD, OH, OW := vo.d(), vo.h(), vo.w()
	if md.unit && mh.unit && mw.unit {
		dst := make([]int, vo.size())
		i := 0
		for od := 0; od < OD; od++ {
			for oh := 0; oh < OH; oh++ {
				r := (md.Idx[od]*H + mh.Idx[oh]) * W
				for ow := 0; ow < OW; ow++ {
					dst[i] = r + mw.Idx[ow]
					i++
				}
			}
		}
		ParallelFor(vi.count(), int64(vi.size()+vo.size()), func(lo, hi int64) {
			g := make([]float64, vo.size())
			x := make([]float64, vi.size())
			for pc := lo; pc < hi; pc++ {
				vo.load(pc, offO, g)
				for j := range x {
					x[j] = 0
				}
				if rb {
					for j, v := range g {
						x[dst[j]] = roundBF16(x[dst[j]] + v)
					}
				} else {
					for j, v := range g {
						x[dst[j]] += v
					}
				}
				vi.store(pc, offI, x)
			}
		})
		return nil
	}
	ParallelFor(vi.count(), int64(vi.size()+vo.size()*(md.K+mh.K+mw.K)), func(lo, hi int64) {
		g := make([]float64, vo.size())
		t2 := make([]float64, D*OH*OW)
		t1 := make([]float64, D*H*OW)
		x := make([]float64, D*H*W)
		for pc := lo; pc < hi; pc++ {
			vo.load(pc, offO, g)
			md.passT(t2, g, 1, OH*OW)
			mh.passT(t1, t2, D, OW)
			mw.passT(x, t1, D*H, 1)
			vi.store(pc, offI, x)
		}
	})
	return nil
}
