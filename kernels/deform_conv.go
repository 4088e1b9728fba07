package kernels

import (
	"fmt"
	"math"
	"slices"
)

// The sampling halves of torchvision::deform_conv2d (and its backward), which Gaudi runs on
// the device: the deformable im2col (bilinear samples at offset kernel taps, times the
// modulation mask), its adjoint into the input gradient (col2im), and the offset and mask
// gradients (col2im_coord). The GEMMs around them are ordinary hpu matmuls in the Python
// lowering (_ops/torchvision_ops.py). The arithmetic follows torchvision's CPU kernels in
// the compute type (float32 for float32 and bfloat16, float64 for float64).
//
// Columns are [C*KH*KW, B*OH*OW]: row c*KH*KW + i*KW + j, column b*OH*OW + y*OW + x.

// DeformParams are deform_conv2d's attributes.
type DeformParams struct {
	KH, KW, PadH, PadW, StrideH, StrideW, DilH, DilW int
	OffsetGroups                                     int
	UseMask                                          bool
}

type deformShape struct {
	b, c, h, w, oh, ow, cpg int
}

func deformCheck(op string, cols, in, offset, mask Tensor, p DeformParams) (deformShape, error) {
	for _, t := range []struct {
		t    Tensor
		what string
	}{{in, "input"}, {offset, "offset"}} {
		if err := dims(op, t.t, 4, t.what); err != nil {
			return deformShape{}, err
		}
	}
	if err := dims(op, cols, 2, "columns"); err != nil {
		return deformShape{}, err
	}
	if p.KH <= 0 || p.KW <= 0 || p.StrideH <= 0 || p.StrideW <= 0 || p.DilH <= 0 || p.DilW <= 0 ||
		p.PadH < 0 || p.PadW < 0 || p.OffsetGroups <= 0 {
		return deformShape{}, fmt.Errorf("%s: bad attributes %+v", op, p)
	}
	s := deformShape{b: int(in.Sizes[0]), c: int(in.Sizes[1]), h: int(in.Sizes[2]), w: int(in.Sizes[3])}
	s.oh = (s.h+2*p.PadH-(p.DilH*(p.KH-1)+1))/p.StrideH + 1
	s.ow = (s.w+2*p.PadW-(p.DilW*(p.KW-1)+1))/p.StrideW + 1
	if s.c%p.OffsetGroups != 0 {
		return s, fmt.Errorf("%s: %d channels in %d offset groups", op, s.c, p.OffsetGroups)
	}
	s.cpg = s.c / p.OffsetGroups
	k := p.KH * p.KW
	if offset.Sizes[0] != int64(s.b) || offset.Sizes[1] != int64(2*k*p.OffsetGroups) ||
		offset.Sizes[2] != int64(s.oh) || offset.Sizes[3] != int64(s.ow) {
		return s, fmt.Errorf("%s: offset %v for input %v", op, offset.Sizes, in.Sizes)
	}
	if p.UseMask {
		if err := dims(op, mask, 4, "mask"); err != nil {
			return s, err
		}
		if mask.Sizes[0] != int64(s.b) || mask.Sizes[1] != int64(k*p.OffsetGroups) ||
			mask.Sizes[2] != int64(s.oh) || mask.Sizes[3] != int64(s.ow) {
			return s, fmt.Errorf("%s: mask %v for offset %v", op, mask.Sizes, offset.Sizes)
		}
	}
	if cols.Sizes[0] != int64(s.c*k) || cols.Sizes[1] != int64(s.b*s.oh*s.ow) {
		return s, fmt.Errorf("%s: columns %v for input %v", op, cols.Sizes, in.Sizes)
	}
	ts := []Tensor{cols, in, offset}
	if p.UseMask {
		ts = append(ts, mask)
	}
	return s, roiTypes(op, ts...)
}

// deformTap is kernel tap (i, j) of output (b, y, x) in offset group g: the sampling point
// and the mask value.
func deformTap[T roiFloat](ov, mv view4, p DeformParams, g, i, j, b, y, x int) (py, px, m T) {
	k := i*p.KW + j
	oy := T(ov.get(b, (g*p.KH*p.KW+k)*2, y, x))
	ox := T(ov.get(b, (g*p.KH*p.KW+k)*2+1, y, x))
	m = 1
	if p.UseMask {
		m = T(mv.get(b, g*p.KH*p.KW+k, y, x))
	}
	py = T(y*p.StrideH-p.PadH+i*p.DilH) + oy
	px = T(x*p.StrideW-p.PadW+j*p.DilW) + ox
	return py, px, m
}

// deformBilinear samples plane (b, c) of iv at (y, x), zero outside, as torchvision's
// deformable bilinear_interpolate.
func deformBilinear[T roiFloat](iv view4, b, c, height, width int, y, x T) T {
	if y <= -1 || T(height) <= y || x <= -1 || T(width) <= x || y != y || x != x {
		return 0 // outside, or NaN (undefined in the CPU kernel; never an out-of-range read here)
	}
	yl, xl := int(math.Floor(float64(y))), int(math.Floor(float64(x)))
	yh, xh := yl+1, xl+1
	ly, lx := y-T(yl), x-T(xl)
	hy, hx := 1-ly, 1-lx
	var v1, v2, v3, v4 T
	if yl >= 0 && xl >= 0 {
		v1 = T(iv.get(b, c, yl, xl))
	}
	if yl >= 0 && xh <= width-1 {
		v2 = T(iv.get(b, c, yl, xh))
	}
	if yh <= height-1 && xl >= 0 {
		v3 = T(iv.get(b, c, yh, xl))
	}
	if yh <= height-1 && xh <= width-1 {
		v4 = T(iv.get(b, c, yh, xh))
	}
	return hy*hx*v1 + hy*lx*v2 + ly*hx*v3 + ly*lx*v4
}

// DeformIm2col fills cols with the mask-weighted bilinear samples of in at every kernel
// tap displaced by offset.
func DeformIm2col(cols, in, offset, mask Tensor, p DeformParams) error {
	s, err := deformCheck("deform_im2col", cols, in, offset, mask, p)
	if err != nil {
		return err
	}
	if in.DType == Float64 {
		deformIm2col[float64](cols, in, offset, mask, p, s)
	} else {
		deformIm2col[float32](cols, in, offset, mask, p, s)
	}
	return nil
}

func deformIm2col[T roiFloat](cols, in, offset, mask Tensor, p DeformParams, s deformShape) {
	iv, ov, mv := newView4(in), newView4(offset), newView4(mask)
	es := int64(cols.DType.Size())
	ParallelFor(int64(s.c), int64(p.KH*p.KW*s.b*s.oh*s.ow*24+1), func(lo, hi int64) {
		for c := int(lo); c < int(hi); c++ {
			g := c / s.cpg
			for i := 0; i < p.KH; i++ {
				for j := 0; j < p.KW; j++ {
					row := int64(c*p.KH*p.KW + i*p.KW + j)
					for b := 0; b < s.b; b++ {
						for y := 0; y < s.oh; y++ {
							for x := 0; x < s.ow; x++ {
								py, px, m := deformTap[T](ov, mv, p, g, i, j, b, y, x)
								v := m * deformBilinear(iv, b, c, s.h, s.w, py, px)
								col := int64((b*s.oh+y)*s.ow + x)
								ixSetF(at(cols.Ptr, (row*cols.Strides[0]+col*cols.Strides[1])*es), cols.DType, float64(v))
							}
						}
					}
				}
			}
		}
	})
}

// DeformCol2im adds into gin [B, C, H, W] (zeroed by the caller) the input gradient of the
// columns' gradient gcols, per channel in the CPU's order (tap, image, output position).
func DeformCol2im(gin, gcols, offset, mask Tensor, p DeformParams) error {
	s, err := deformCheck("deform_col2im", gcols, gin, offset, mask, p)
	if err != nil {
		return err
	}
	if gin.DType == Float64 {
		deformCol2im[float64](gin, gcols, offset, mask, p, s)
	} else {
		deformCol2im[float32](gin, gcols, offset, mask, p, s)
	}
	return nil
}

func deformCol2im[T roiFloat](gin, gcols, offset, mask Tensor, p DeformParams, s deformShape) {
	ov, mv := newView4(offset), newView4(mask)
	gc := view2{gcols, int64(gcols.DType.Size())}
	abs := func(v T) T { return max(v, -v) }
	ParallelFor(int64(s.c), int64(p.KH*p.KW*s.b*s.oh*s.ow*40+1), func(lo, hi int64) {
		var planes []T
		for c := int(lo); c < int(hi); c++ {
			planes = loadChannel(gin, c, planes)
			g := c / s.cpg
			for i := 0; i < p.KH; i++ {
				for j := 0; j < p.KW; j++ {
					row := c*p.KH*p.KW + i*p.KW + j
					for b := 0; b < s.b; b++ {
						plane := planes[b*s.h*s.w : (b+1)*s.h*s.w]
						for y := 0; y < s.oh; y++ {
							for x := 0; x < s.ow; x++ {
								py, px, m := deformTap[T](ov, mv, p, g, i, j, b, y, x)
								gv := T(gc.get(row, (b*s.oh+y)*s.ow+x))
								iy, ix := int(py), int(px)
								for dy := -1; dy <= 1; dy++ {
									for dx := -1; dx <= 1; dx++ {
										yp, xp := iy+dy, ix+dx
										if 0 <= yp && yp < s.h && 0 <= xp && xp < s.w &&
											abs(py-T(yp)) < 1 && abs(px-T(xp)) < 1 {
											wt := (1 - abs(py-T(yp))) * (1 - abs(px-T(xp)))
											plane[yp*s.w+xp] += m * wt * gv
										}
									}
								}
							}
						}
					}
				}
			}
			storeChannel(gin, c, planes)
		}
	})
}

// DeformCol2imCoord writes the offset gradient goffset (and, with a mask, gmask) of the
// columns' gradient gcols.
func DeformCol2imCoord(goffset, gmask, gcols, in, offset, mask Tensor, p DeformParams) error {
	s, err := deformCheck("deform_col2im_coord", gcols, in, offset, mask, p)
	if err != nil {
		return err
	}
	if !slices.Equal(goffset.Sizes, offset.Sizes) || (p.UseMask && !slices.Equal(gmask.Sizes, mask.Sizes)) {
		return fmt.Errorf("deform_col2im_coord: gradients %v %v for offset %v mask %v", goffset.Sizes, gmask.Sizes, offset.Sizes, mask.Sizes)
	}
	ts := []Tensor{goffset}
	if p.UseMask {
		ts = append(ts, gmask)
	}
	if err := roiTypes("deform_col2im_coord", ts...); err != nil {
		return err
	}
	if in.DType == Float64 {
		deformCol2imCoord[float64](goffset, gmask, gcols, in, offset, mask, p, s)
	} else {
		deformCol2imCoord[float32](goffset, gmask, gcols, in, offset, mask, p, s)
	}
	return nil
}

// deformCoordWeight is the derivative of the bilinear sample at (y, x) along y (or x).
func deformCoordWeight[T roiFloat](iv view4, b, c, height, width int, y, x T, alongY bool) T {
	yl, xl := int(math.Floor(float64(y))), int(math.Floor(float64(x)))
	yh, xh := yl+1, xl+1
	okYl, okYh := 0 <= yl && yl < height, 0 <= yh && yh < height
	okXl, okXh := 0 <= xl && xl < width, 0 <= xh && xh < width
	get := func(ok bool, yy, xx int) T {
		if !ok {
			return 0
		}
		return T(iv.get(b, c, yy, xx))
	}
	vyx, vyX := get(okYl && okXl, yl, xl), get(okYl && okXh, yl, xh)
	vYx, vYX := get(okYh && okXl, yh, xl), get(okYh && okXh, yh, xh)
	if alongY {
		dx := x - T(xl)
		return dx*(vYX-vyX) + (1-dx)*(vYx-vyx)
	}
	dy := y - T(yl)
	return dy*(vYX-vYx) + (1-dy)*(vyX-vyx)
}

func deformCol2imCoord[T roiFloat](goffset, gmask, gcols, in, offset, mask Tensor, p DeformParams, s deformShape) {
	iv, ov, mv := newView4(in), newView4(offset), newView4(mask)
	gov, gmv := newView4(goffset), newView4(gmask)
	gc := view2{gcols, int64(gcols.DType.Size())}
	k := p.KH * p.KW
	planes := int64(s.b * p.OffsetGroups * 2 * k)
	ParallelFor(planes, int64(s.oh*s.ow*s.cpg*24+1), func(lo, hi int64) {
		for pl := int(lo); pl < int(hi); pl++ {
			b, oc := pl/(p.OffsetGroups*2*k), pl%(p.OffsetGroups*2*k)
			g, tap := oc/(2*k), oc%(2*k)/2
			alongY := oc%2 == 0
			i, j := tap/p.KW, tap%p.KW
			for y := 0; y < s.oh; y++ {
				for x := 0; x < s.ow; x++ {
					var gOff, gMask T
					py, px, m := deformTap[T](ov, mv, p, g, i, j, b, y, x)
					col := (b*s.oh+y)*s.ow + x
					for t := 0; t < s.cpg; t++ {
						c := g*s.cpg + t
						gv := T(gc.get(c*k+tap, col))
						gOff += m * deformCoordWeight(iv, b, c, s.h, s.w, py, px, alongY) * gv
						if p.UseMask && alongY {
							gMask += gv * deformBilinear(iv, b, c, s.h, s.w, py, px)
						}
					}
					gov.set(b, oc, y, x, float64(gOff))
					if p.UseMask && alongY {
						gmv.set(b, g*k+tap, y, x, float64(gMask))
					}
				}
			}
		}
	})
}
