package kernels

import "fmt"

// Detection ops of torchvision (torchvision::nms, roi_align and its backward), which Gaudi
// runs on the device. The arithmetic follows torchvision's CPU kernels operation by
// operation in the compute type (float32 for float32 and bfloat16, float64 for float64),
// so kept boxes and pooled values match the CPU's; sums run in the CPU's order.

type roiFloat interface{ float32 | float64 }

func roiTypes(op string, ts ...Tensor) error {
	for _, t := range ts {
		switch t.DType {
		case Float32, Float64, BFloat16:
		default:
			return fmt.Errorf("%s: unsupported dtype %v", op, t.DType)
		}
	}
	return nil
}

func dims(op string, t Tensor, want int, what string) error {
	if t.Dim() != want {
		return fmt.Errorf("%s: %s must be %d-D, got %d-D", op, what, want, t.Dim())
	}
	return nil
}

// NmsKeep marks in keep (bool or uint8, [N]) the boxes greedy non-maximum suppression keeps,
// boxes ([N, 4] as x1, y1, x2, y2) being already sorted by descending score: a box is
// dropped when its IoU with an earlier kept box exceeds iou.
func NmsKeep(keep, boxes Tensor, iou float64) error {
	if err := dims("nms", keep, 1, "keep"); err != nil {
		return err
	}
	if err := dims("nms", boxes, 2, "boxes"); err != nil {
		return err
	}
	if boxes.Sizes[1] != 4 || boxes.Sizes[0] != keep.Sizes[0] {
		return fmt.Errorf("nms: boxes %v for %d keep flags", boxes.Sizes, keep.Sizes[0])
	}
	if keep.DType != Bool && keep.DType != Uint8 {
		return fmt.Errorf("nms: keep must be bool or uint8, got %v", keep.DType)
	}
	if err := roiTypes("nms", boxes); err != nil {
		return err
	}
	if boxes.DType == Float64 {
		nmsKeep[float64](keep, boxes, iou)
	} else {
		nmsKeep[float32](keep, boxes, iou)
	}
	return nil
}

func nmsKeep[T roiFloat](keep, boxes Tensor, iou float64) {
	n := int(boxes.Sizes[0])
	es := int64(boxes.DType.Size())
	x1, y1, x2, y2, area := make([]T, n), make([]T, n), make([]T, n), make([]T, n), make([]T, n)
	for i := 0; i < n; i++ {
		get := func(j int64) T {
			return T(ixGetF(at(boxes.Ptr, (int64(i)*boxes.Strides[0]+j*boxes.Strides[1])*es), boxes.DType))
		}
		x1[i], y1[i], x2[i], y2[i] = get(0), get(1), get(2), get(3)
		area[i] = (x2[i] - x1[i]) * (y2[i] - y1[i])
	}
	dropped := make([]bool, n)
	for i := 0; i < n; i++ {
		if dropped[i] {
			continue
		}
		for j := i + 1; j < n; j++ {
			if dropped[j] {
				continue
			}
			w := max(T(0), min(x2[i], x2[j])-max(x1[i], x1[j]))
			h := max(T(0), min(y2[i], y2[j])-max(y1[i], y1[j]))
			inter := w * h
			if float64(inter/(area[i]+area[j]-inter)) > iou {
				dropped[j] = true
			}
		}
	}
	ks := keep.Strides[0] * int64(keep.DType.Size())
	for i := 0; i < n; i++ {
		v := byte(1)
		if dropped[i] {
			v = 0
		}
		*(*byte)(at(keep.Ptr, int64(i)*ks)) = v
	}
}

// RoiAlignParams are roi_align's attributes.
type RoiAlignParams struct {
	PooledH, PooledW int
	SamplingRatio    int // <= 0: adaptive, ceil(roi size / pooled size) samples per bin side
	Aligned          bool
	SpatialScale     float64
}

// roiGeom is one region's geometry in input pixels, as torchvision computes it.
type roiGeom[T roiFloat] struct {
	batch                int
	startH, startW       T
	binH, binW           T
	gridH, gridW         int
	count                T
	valid                bool // batch index inside the input
	heightTop, widthLeft int
}

func roiGeometry[T roiFloat](rois view2, r, batches int, p RoiAlignParams) roiGeom[T] {
	scale := T(p.SpatialScale)
	var offset T
	if p.Aligned {
		offset = 0.5
	}
	g := roiGeom[T]{batch: int(T(rois.get(r, 0)))}
	g.valid = g.batch >= 0 && g.batch < batches
	g.startW = T(rois.get(r, 1))*scale - offset
	g.startH = T(rois.get(r, 2))*scale - offset
	endW := T(rois.get(r, 3))*scale - offset
	endH := T(rois.get(r, 4))*scale - offset
	rw, rh := endW-g.startW, endH-g.startH
	if !p.Aligned { // legacy: regions at least one pixel wide
		rw, rh = max(rw, 1), max(rh, 1)
	}
	g.binH, g.binW = rh/T(p.PooledH), rw/T(p.PooledW)
	g.gridH, g.gridW = p.SamplingRatio, p.SamplingRatio
	if p.SamplingRatio <= 0 {
		g.gridH, g.gridW = int(ceilT(rh/T(p.PooledH))), int(ceilT(rw/T(p.PooledW)))
	}
	g.count = T(max(g.gridH*g.gridW, 1))
	return g
}

func ceilT[T roiFloat](v T) T {
	t := T(int64(v))
	if t < v {
		t++
	}
	return t
}

// roiTap is one sample point's four neighbours (flat offsets into an H x W plane) and weights;
// ok is false for a point outside the plane, which contributes nothing.
type roiTap[T roiFloat] struct {
	p1, p2, p3, p4 int
	w1, w2, w3, w4 T
	ok             bool
}

func roiBilinear[T roiFloat](height, width int, y, x T) roiTap[T] {
	if y < -1 || y > T(height) || x < -1 || x > T(width) {
		return roiTap[T]{}
	}
	y, x = max(y, 0), max(x, 0)
	yl, xl := int(y), int(x)
	yh, xh := yl+1, xl+1
	if yl >= height-1 {
		yl, yh = height-1, height-1
		y = T(yl)
	}
	if xl >= width-1 {
		xl, xh = width-1, width-1
		x = T(xl)
	}
	ly, lx := y-T(yl), x-T(xl)
	hy, hx := 1-ly, 1-lx
	return roiTap[T]{p1: yl*width + xl, p2: yl*width + xh, p3: yh*width + xl, p4: yh*width + xh,
		w1: hy * hx, w2: hy * lx, w3: ly * hx, w4: ly * lx, ok: true}
}

// roiTaps lists a region's sample points for output bin (ph, pw), in the CPU's order.
func roiTaps[T roiFloat](g roiGeom[T], ph, pw, height, width int, buf []roiTap[T]) []roiTap[T] {
	buf = buf[:0]
	for iy := 0; iy < g.gridH; iy++ {
		y := g.startH + T(ph)*g.binH + T(float32(iy)+0.5)*g.binH/T(g.gridH)
		for ix := 0; ix < g.gridW; ix++ {
			x := g.startW + T(pw)*g.binW + T(float32(ix)+0.5)*g.binW/T(g.gridW)
			buf = append(buf, roiBilinear(height, width, y, x))
		}
	}
	return buf
}

// view2 reads a strided 2-D tensor.
type view2 struct {
	t  Tensor
	es int64
}

func (v view2) get(a, b int) float64 {
	return ixGetF(at(v.t.Ptr, (int64(a)*v.t.Strides[0]+int64(b)*v.t.Strides[1])*v.es), v.t.DType)
}

func roiCheck(op string, out, in, rois Tensor, p RoiAlignParams) error {
	if err := dims(op, out, 4, "output"); err != nil {
		return err
	}
	if err := dims(op, in, 4, "input"); err != nil {
		return err
	}
	if err := dims(op, rois, 2, "rois"); err != nil {
		return err
	}
	if rois.Sizes[1] != 5 {
		return fmt.Errorf("%s: rois must be [K, 5], got %v", op, rois.Sizes)
	}
	if p.PooledH <= 0 || p.PooledW <= 0 {
		return fmt.Errorf("%s: pooled size %dx%d", op, p.PooledH, p.PooledW)
	}
	if out.Sizes[0] != rois.Sizes[0] || out.Sizes[1] != in.Sizes[1] ||
		out.Sizes[2] != int64(p.PooledH) || out.Sizes[3] != int64(p.PooledW) {
		return fmt.Errorf("%s: output %v for input %v and %d rois", op, out.Sizes, in.Sizes, rois.Sizes[0])
	}
	return roiTypes(op, out, in, rois)
}

// RoiAlign fills out [K, C, PH, PW] with each region's bins averaged over bilinear samples
// of in [N, C, H, W]; rois [K, 5] holds (batch index, x1, y1, x2, y2).
func RoiAlign(out, in, rois Tensor, p RoiAlignParams) error {
	if err := roiCheck("roi_align", out, in, rois, p); err != nil {
		return err
	}
	if in.DType == Float64 {
		roiAlign[float64](out, in, rois, p)
	} else {
		roiAlign[float32](out, in, rois, p)
	}
	return nil
}

func roiAlign[T roiFloat](out, in, rois Tensor, p RoiAlignParams) {
	ov, iv, rv := newView4(out), newView4(in), view2{rois, int64(rois.DType.Size())}
	k, c := int(out.Sizes[0]), int(out.Sizes[1])
	n, h, w := int(in.Sizes[0]), int(in.Sizes[2]), int(in.Sizes[3])
	ParallelFor(int64(k), int64(c*p.PooledH*p.PooledW*16+1), func(lo, hi int64) {
		var buf []roiTap[T]
		for r := int(lo); r < int(hi); r++ {
			g := roiGeometry[T](rv, r, n, p)
			for ph := 0; ph < p.PooledH; ph++ {
				for pw := 0; pw < p.PooledW; pw++ {
					buf = roiTaps(g, ph, pw, h, w, buf)
					for ch := 0; ch < c; ch++ {
						var acc T
						if g.valid {
							at := func(pos int) T { return T(iv.get(g.batch, ch, pos/w, pos%w)) }
							for _, t := range buf {
								// An outside point has zero weights on the plane's first element.
								acc += t.w1*at(t.p1) + t.w2*at(t.p2) + t.w3*at(t.p3) + t.w4*at(t.p4)
							}
						}
						ov.set(r, ch, ph, pw, float64(acc/g.count))
					}
				}
			}
		}
	})
}

// RoiAlignBackward accumulates into gin [N, C, H, W] (zeroed by the caller) the gradient of
// roi_align for grad [K, C, PH, PW]. Channels run in parallel; within a channel the sums run
// in the CPU's order (region, bin, sample).
func RoiAlignBackward(gin, grad, rois Tensor, p RoiAlignParams) error {
	if err := roiCheck("roi_align_backward", grad, gin, rois, p); err != nil {
		return err
	}
	if gin.DType == Float64 {
		roiAlignBackward[float64](gin, grad, rois, p)
	} else {
		roiAlignBackward[float32](gin, grad, rois, p)
	}
	return nil
}

func roiAlignBackward[T roiFloat](gin, grad, rois Tensor, p RoiAlignParams) {
	gv, iv, rv := newView4(grad), newView4(gin), view2{rois, int64(rois.DType.Size())}
	k, c := int(grad.Sizes[0]), int(grad.Sizes[1])
	n, h, w := int(gin.Sizes[0]), int(gin.Sizes[2]), int(gin.Sizes[3])
	geoms := make([]roiGeom[T], k)
	for r := range geoms {
		geoms[r] = roiGeometry[T](rv, r, n, p)
	}
	ParallelFor(int64(c), int64(k*p.PooledH*p.PooledW*16+1), func(lo, hi int64) {
		var buf []roiTap[T]
		plane := make([]T, h*w)
		for ch := int(lo); ch < int(hi); ch++ {
			for b := 0; b < n; b++ {
				for i := range plane {
					plane[i] = T(iv.get(b, ch, i/w, i%w))
				}
				for r, g := range geoms {
					if !g.valid || g.batch != b {
						continue
					}
					for ph := 0; ph < p.PooledH; ph++ {
						for pw := 0; pw < p.PooledW; pw++ {
							gb := T(gv.get(r, ch, ph, pw))
							buf = roiTaps(g, ph, pw, h, w, buf)
							for _, t := range buf {
								if !t.ok {
									continue
								}
								plane[t.p1] += gb * t.w1 / g.count
								plane[t.p2] += gb * t.w2 / g.count
								plane[t.p3] += gb * t.w3 / g.count
								plane[t.p4] += gb * t.w4 / g.count
							}
						}
					}
				}
				for i, v := range plane {
					iv.set(b, ch, i/w, i%w, float64(v))
				}
			}
		}
	})
}
