package kernels

import (
	"fmt"
	"math"
)

// torchvision's max and position-sensitive region pooling (roi_pool, ps_roi_pool,
// ps_roi_align) and their backwards, which Gaudi runs on the device. As in roi_ops.go the
// arithmetic follows torchvision's CPU kernels step by step in the compute type (float32
// for float32 and bfloat16, float64 for float64), including their rounding of box corners
// and the forward/backward clipping quirks, so values and the saved argmax / channel maps
// match the CPU's. Backwards run planes in parallel and keep the CPU's summation order
// within each plane.

// RoiPoolParams are roi_pool's and ps_roi_pool's attributes (ps_roi_align adds a sampling
// ratio, carried in RoiAlignParams).
type RoiPoolParams struct {
	PooledH, PooledW int
	SpatialScale     float64
}

// roiPoolGeometry rounds a region's corners: roi_pool keeps at least one pixel past the
// end corner (+1), ps_roi_pool does not. roundf32 mirrors ps_roi_pool's backward, which
// rounds through float (roundf) whatever the type.
func roiPoolGeometry[T roiFloat](rois view2, r, batches int, scale T, plusOne, roundf32 bool) (b int, valid bool, sh, sw int, binH, binW T, rh, rw int) {
	rnd := func(v T) int {
		if roundf32 {
			return int(math.Round(float64(float32(v))))
		}
		return int(math.Round(float64(v)))
	}
	b = int(T(rois.get(r, 0)))
	valid = b >= 0 && b < batches
	sw, sh = rnd(T(rois.get(r, 1))*scale), rnd(T(rois.get(r, 2))*scale)
	ew, eh := rnd(T(rois.get(r, 3))*scale), rnd(T(rois.get(r, 4))*scale)
	one := 0
	if plusOne {
		one = 1
	}
	rw, rh = max(ew-sw+one, 1), max(eh-sh+one, 1)
	return b, valid, sh, sw, T(rh), T(rw), rh, rw
}

// poolBin is bin (ph, pw)'s [hs, he) x [ws, we) window, clipped to [0, limH] x [0, limW].
func poolBin[T roiFloat](ph, pw int, binH, binW T, sh, sw, limH, limW int) (hs, he, ws, we int) {
	hs = int(math.Floor(float64(T(ph) * binH)))
	ws = int(math.Floor(float64(T(pw) * binW)))
	he = int(math.Ceil(float64(T(ph+1) * binH)))
	we = int(math.Ceil(float64(T(pw+1) * binW)))
	clip := func(v, lim int) int { return min(max(v, 0), lim) }
	return clip(hs+sh, limH), clip(he+sh, limH), clip(ws+sw, limW), clip(we+sw, limW)
}

func roiPoolCheck(op string, out, idx, in, rois Tensor, pooledH, pooledW int, channelsOut int64) error {
	if err := dims(op, out, 4, "output"); err != nil {
		return err
	}
	if err := dims(op, idx, 4, "index"); err != nil {
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
	if pooledH <= 0 || pooledW <= 0 {
		return fmt.Errorf("%s: pooled size %dx%d", op, pooledH, pooledW)
	}
	want := []int64{rois.Sizes[0], channelsOut, int64(pooledH), int64(pooledW)}
	for i, s := range want {
		if out.Sizes[i] != s || idx.Sizes[i] != s {
			return fmt.Errorf("%s: output %v / index %v for input %v and %d rois", op, out.Sizes, idx.Sizes, in.Sizes, rois.Sizes[0])
		}
	}
	if idx.DType != Int32 {
		return fmt.Errorf("%s: index must be int32, got %v", op, idx.DType)
	}
	return roiTypes(op, out, in, rois)
}

func psChannels(op string, in Tensor, ph, pw int) (int64, error) {
	if in.Dim() != 4 || ph <= 0 || pw <= 0 || in.Sizes[1]%int64(ph*pw) != 0 {
		return 0, fmt.Errorf("%s: input channels %v must be a multiple of pooling height * pooling width (%dx%d)", op, in.Sizes, ph, pw)
	}
	return in.Sizes[1] / int64(ph*pw), nil
}

func setI32(t Tensor, a, b, c, d int, v int32) {
	s := t.Strides
	*(*int32)(at(t.Ptr, (int64(a)*s[0]+int64(b)*s[1]+int64(c)*s[2]+int64(d)*s[3])*4)) = v
}

func getI32(t Tensor, a, b, c, d int) int32 {
	s := t.Strides
	return *(*int32)(at(t.Ptr, (int64(a)*s[0]+int64(b)*s[1]+int64(c)*s[2]+int64(d)*s[3])*4))
}

// RoiPool fills out [K, C, PH, PW] with each bin's maximum of in [N, C, H, W] and argmax
// (int32, same shape) with its flat h*W+w position, -1 for an empty bin (value 0).
func RoiPool(out, argmax, in, rois Tensor, p RoiPoolParams) error {
	if err := roiPoolCheck("roi_pool", out, argmax, in, rois, p.PooledH, p.PooledW, in.Sizes[1]); err != nil {
		return err
	}
	if in.DType == Float64 {
		roiPool[float64](out, argmax, in, rois, p)
	} else {
		roiPool[float32](out, argmax, in, rois, p)
	}
	return nil
}

func roiPool[T roiFloat](out, argmax, in, rois Tensor, p RoiPoolParams) {
	ov, iv, rv := newView4(out), newView4(in), view2{rois, int64(rois.DType.Size())}
	k, c := int(out.Sizes[0]), int(out.Sizes[1])
	n, h, w := int(in.Sizes[0]), int(in.Sizes[2]), int(in.Sizes[3])
	ParallelFor(int64(k), int64(c*p.PooledH*p.PooledW*8+1), func(lo, hi int64) {
		for r := int(lo); r < int(hi); r++ {
			b, valid, sh, sw, rh, rw, _, _ := roiPoolGeometry[T](rv, r, n, T(p.SpatialScale), true, false)
			binH, binW := rh/T(p.PooledH), rw/T(p.PooledW)
			for ph := 0; ph < p.PooledH; ph++ {
				for pw := 0; pw < p.PooledW; pw++ {
					hs, he, ws, we := poolBin(ph, pw, binH, binW, sh, sw, h, w)
					empty := he <= hs || we <= ws
					for ch := 0; ch < c; ch++ {
						maxv, maxi := T(-math.MaxFloat32), -1
						if empty || !valid {
							maxv = 0
						}
						if valid {
							for y := hs; y < he; y++ {
								for x := ws; x < we; x++ {
									if v := T(iv.get(b, ch, y, x)); v > maxv {
										maxv, maxi = v, y*w+x
									}
								}
							}
						}
						ov.set(r, ch, ph, pw, float64(maxv))
						setI32(argmax, r, ch, ph, pw, int32(maxi))
					}
				}
			}
		}
	})
}

// RoiPoolBackward adds into gin [N, C, H, W] (zeroed by the caller) each bin's gradient at
// its argmax position.
func RoiPoolBackward(gin, grad, argmax, rois Tensor, p RoiPoolParams) error {
	if err := roiPoolCheck("roi_pool_backward", grad, argmax, gin, rois, p.PooledH, p.PooledW, gin.Sizes[1]); err != nil {
		return err
	}
	if gin.DType == Float64 {
		roiPoolBackward[float64](gin, grad, argmax, rois)
	} else {
		roiPoolBackward[float32](gin, grad, argmax, rois)
	}
	return nil
}

func roiPoolBackward[T roiFloat](gin, grad, argmax, rois Tensor) {
	n, c, h, w := int(gin.Sizes[0]), int(gin.Sizes[1]), int(gin.Sizes[2]), int(gin.Sizes[3])
	rv := view2{rois, int64(rois.DType.Size())}
	batch := make([]int, rois.Sizes[0])
	for r := range batch {
		batch[r] = int(T(rv.get(r, 0)))
	}
	gv := newView4(grad)
	ph, pw := int(grad.Sizes[2]), int(grad.Sizes[3])
	ParallelFor(int64(c), int64(len(batch)*ph*pw*4+n*h*w+1), func(lo, hi int64) {
		var planes []T
		for ch := int(lo); ch < int(hi); ch++ {
			planes = loadChannel(gin, ch, planes)
			for r, b := range batch {
				if b < 0 || b >= n {
					continue
				}
				for y := 0; y < ph; y++ {
					for x := 0; x < pw; x++ {
						if a := int(getI32(argmax, r, ch, y, x)); a >= 0 && a < h*w {
							planes[b*h*w+a] += T(gv.get(r, ch, y, x))
						}
					}
				}
			}
			storeChannel(gin, ch, planes)
		}
	})
}

// loadChannel reads channel ch of every image of t [N, C, H, W] into buf (N*H*W values in
// the compute type), so a backward accumulates in float32 or float64 whatever t stores.
func loadChannel[T roiFloat](t Tensor, ch int, buf []T) []T {
	v := newView4(t)
	n, h, w := int(t.Sizes[0]), int(t.Sizes[2]), int(t.Sizes[3])
	buf = append(buf[:0], make([]T, n*h*w)...)
	for b := 0; b < n; b++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				buf[(b*h+y)*w+x] = T(v.get(b, ch, y, x))
			}
		}
	}
	return buf
}

func storeChannel[T roiFloat](t Tensor, ch int, buf []T) {
	v := newView4(t)
	n, h, w := int(t.Sizes[0]), int(t.Sizes[2]), int(t.Sizes[3])
	for b := 0; b < n; b++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				v.set(b, ch, y, x, float64(buf[(b*h+y)*w+x]))
			}
		}
	}
}

// PsRoiPool fills out [K, C/(PH*PW), PH, PW] with the average of bin (ph, pw) over its own
// input channel (c_out*PH*PW + ph*PW + pw), recorded in mapping (int32).
func PsRoiPool(out, mapping, in, rois Tensor, p RoiPoolParams) error {
	cout, err := psChannels("ps_roi_pool", in, p.PooledH, p.PooledW)
	if err != nil {
		return err
	}
	if err := roiPoolCheck("ps_roi_pool", out, mapping, in, rois, p.PooledH, p.PooledW, cout); err != nil {
		return err
	}
	if in.DType == Float64 {
		psRoiPool[float64](out, mapping, in, rois, p)
	} else {
		psRoiPool[float32](out, mapping, in, rois, p)
	}
	return nil
}

func psRoiPool[T roiFloat](out, mapping, in, rois Tensor, p RoiPoolParams) {
	ov, iv, rv := newView4(out), newView4(in), view2{rois, int64(rois.DType.Size())}
	k, cout := int(out.Sizes[0]), int(out.Sizes[1])
	n, h, w := int(in.Sizes[0]), int(in.Sizes[2]), int(in.Sizes[3])
	ParallelFor(int64(k), int64(cout*p.PooledH*p.PooledW*16+1), func(lo, hi int64) {
		for r := int(lo); r < int(hi); r++ {
			b, valid, sh, sw, rh, rw, _, _ := roiPoolGeometry[T](rv, r, n, T(p.SpatialScale), false, false)
			binH, binW := rh/T(p.PooledH), rw/T(p.PooledW)
			cin := 0
			for co := 0; co < cout; co++ {
				for ph := 0; ph < p.PooledH; ph++ {
					for pw := 0; pw < p.PooledW; pw++ {
						// the CPU's forward clips bins to the last row/column (H-1, W-1)
						hs, he, ws, we := poolBin(ph, pw, binH, binW, sh, sw, h-1, w-1)
						var sum T
						if valid {
							for y := hs; y < he; y++ {
								for x := ws; x < we; x++ {
									sum += T(iv.get(b, cin, y, x))
								}
							}
						}
						v := T(0)
						if he > hs && we > ws {
							v = sum / T((he-hs)*(we-ws))
						}
						ov.set(r, co, ph, pw, float64(v))
						setI32(mapping, r, co, ph, pw, int32(cin))
						cin++
					}
				}
			}
		}
	})
}

// psPlaneBins lists, per input channel, the flat (region, c_out, ph, pw) bins whose channel
// mapping names it, in ascending order (the CPU's order of contributions to that plane).
func psPlaneBins(mapping Tensor, channels int) [][]int32 {
	k, cout, ph, pw := int(mapping.Sizes[0]), int(mapping.Sizes[1]), int(mapping.Sizes[2]), int(mapping.Sizes[3])
	lists := make([][]int32, channels)
	i := int32(0)
	for r := 0; r < k; r++ {
		for co := 0; co < cout; co++ {
			for y := 0; y < ph; y++ {
				for x := 0; x < pw; x++ {
					if c := int(getI32(mapping, r, co, y, x)); c >= 0 && c < channels {
						lists[c] = append(lists[c], i)
					}
					i++
				}
			}
		}
	}
	return lists
}

// PsRoiPoolBackward spreads each bin's gradient evenly over its window of its mapped input
// channel in gin (zeroed by the caller).
func PsRoiPoolBackward(gin, grad, mapping, rois Tensor, p RoiPoolParams) error {
	cout, err := psChannels("ps_roi_pool_backward", gin, p.PooledH, p.PooledW)
	if err != nil {
		return err
	}
	if err := roiPoolCheck("ps_roi_pool_backward", grad, mapping, gin, rois, p.PooledH, p.PooledW, cout); err != nil {
		return err
	}
	if gin.DType == Float64 {
		psRoiPoolBackward[float64](gin, grad, mapping, rois, p)
	} else {
		psRoiPoolBackward[float32](gin, grad, mapping, rois, p)
	}
	return nil
}

func psRoiPoolBackward[T roiFloat](gin, grad, mapping, rois Tensor, p RoiPoolParams) {
	gv, rv := newView4(grad), view2{rois, int64(rois.DType.Size())}
	n, c, h, w := int(gin.Sizes[0]), int(gin.Sizes[1]), int(gin.Sizes[2]), int(gin.Sizes[3])
	cout := int(grad.Sizes[1])
	lists := psPlaneBins(mapping, c)
	ParallelFor(int64(c), int64(n*h*w*4+1), func(lo, hi int64) {
		var planes []T
		for ch := int(lo); ch < int(hi); ch++ {
			planes = loadChannel(gin, ch, planes)
			for _, flat := range lists[ch] {
				pw := int(flat) % p.PooledW
				ph := int(flat) / p.PooledW % p.PooledH
				co := int(flat) / (p.PooledW * p.PooledH) % cout
				r := int(flat) / (p.PooledW * p.PooledH * cout)
				// the backward rounds corners through float and clips to H, W (not H-1, W-1)
				b, valid, sh, sw, rh, rw, _, _ := roiPoolGeometry[T](rv, r, n, T(p.SpatialScale), false, true)
				if !valid {
					continue
				}
				binH, binW := rh/T(p.PooledH), rw/T(p.PooledW)
				hs, he, ws, we := poolBin(ph, pw, binH, binW, sh, sw, h, w)
				if he <= hs || we <= ws {
					continue
				}
				diff := T(gv.get(r, co, ph, pw)) / T((he-hs)*(we-ws))
				for y := hs; y < he; y++ {
					for x := ws; x < we; x++ {
						planes[(b*h+y)*w+x] += diff
					}
				}
			}
			storeChannel(gin, ch, planes)
		}
	})
}

// PsRoiAlign is ps_roi_align: bin (ph, pw) of output channel c_out averages bilinear samples
// of input channel c_out*PH*PW + ph*PW + pw (recorded in mapping) over an aligned region
// (corners shifted by half a pixel, no minimum size).
func PsRoiAlign(out, mapping, in, rois Tensor, p RoiAlignParams) error {
	cout, err := psChannels("ps_roi_align", in, p.PooledH, p.PooledW)
	if err != nil {
		return err
	}
	if err := roiPoolCheck("ps_roi_align", out, mapping, in, rois, p.PooledH, p.PooledW, cout); err != nil {
		return err
	}
	p.Aligned = true
	if in.DType == Float64 {
		psRoiAlign[float64](out, mapping, in, rois, p)
	} else {
		psRoiAlign[float32](out, mapping, in, rois, p)
	}
	return nil
}

// psGeometry is roi_align's aligned geometry with ps_roi_align's sample count, which has
// no floor of one (an empty region averages 0/0 as on the CPU).
func psGeometry[T roiFloat](rois view2, r, batches int, p RoiAlignParams) roiGeom[T] {
	g := roiGeometry[T](rois, r, batches, p)
	g.count = T(g.gridH * g.gridW)
	return g
}

func psRoiAlign[T roiFloat](out, mapping, in, rois Tensor, p RoiAlignParams) {
	ov, iv, rv := newView4(out), newView4(in), view2{rois, int64(rois.DType.Size())}
	k, cout := int(out.Sizes[0]), int(out.Sizes[1])
	n, h, w := int(in.Sizes[0]), int(in.Sizes[2]), int(in.Sizes[3])
	ParallelFor(int64(k), int64(cout*p.PooledH*p.PooledW*32+1), func(lo, hi int64) {
		var buf []roiTap[T]
		for r := int(lo); r < int(hi); r++ {
			g := psGeometry[T](rv, r, n, p)
			cin := 0
			for co := 0; co < cout; co++ {
				for ph := 0; ph < p.PooledH; ph++ {
					for pw := 0; pw < p.PooledW; pw++ {
						var sum T
						if g.valid {
							buf = roiTaps(g, ph, pw, h, w, buf)
							at := func(pos int) T { return T(iv.get(g.batch, cin, pos/w, pos%w)) }
							for _, t := range buf {
								if t.ok {
									sum += t.w1*at(t.p1) + t.w2*at(t.p2) + t.w3*at(t.p3) + t.w4*at(t.p4)
								}
							}
						}
						ov.set(r, co, ph, pw, float64(sum/g.count))
						setI32(mapping, r, co, ph, pw, int32(cin))
						cin++
					}
				}
			}
		}
	})
}

// PsRoiAlignBackward adds each bin's gradient, split over its samples' bilinear neighbours,
// into its mapped input channel of gin (zeroed by the caller).
func PsRoiAlignBackward(gin, grad, mapping, rois Tensor, p RoiAlignParams) error {
	cout, err := psChannels("ps_roi_align_backward", gin, p.PooledH, p.PooledW)
	if err != nil {
		return err
	}
	if err := roiPoolCheck("ps_roi_align_backward", grad, mapping, gin, rois, p.PooledH, p.PooledW, cout); err != nil {
		return err
	}
	p.Aligned = true
	if gin.DType == Float64 {
		psRoiAlignBackward[float64](gin, grad, mapping, rois, p)
	} else {
		psRoiAlignBackward[float32](gin, grad, mapping, rois, p)
	}
	return nil
}

func psRoiAlignBackward[T roiFloat](gin, grad, mapping, rois Tensor, p RoiAlignParams) {
	gv, rv := newView4(grad), view2{rois, int64(rois.DType.Size())}
	n, c, h, w := int(gin.Sizes[0]), int(gin.Sizes[1]), int(gin.Sizes[2]), int(gin.Sizes[3])
	cout := int(grad.Sizes[1])
	lists := psPlaneBins(mapping, c)
	ParallelFor(int64(c), int64(n*h*w*4+1), func(lo, hi int64) {
		var buf []roiTap[T]
		var planes []T
		for ch := int(lo); ch < int(hi); ch++ {
			planes = loadChannel(gin, ch, planes)
			for _, flat := range lists[ch] {
				pw := int(flat) % p.PooledW
				ph := int(flat) / p.PooledW % p.PooledH
				co := int(flat) / (p.PooledW * p.PooledH) % cout
				r := int(flat) / (p.PooledW * p.PooledH * cout)
				g := psGeometry[T](rv, r, n, p)
				if !g.valid {
					continue
				}
				gb := T(gv.get(r, co, ph, pw))
				buf = roiTaps(g, ph, pw, h, w, buf)
				plane := planes[g.batch*h*w : (g.batch+1)*h*w]
				add := func(pos int, v T) { plane[pos] += v }
				for _, t := range buf {
					if !t.ok {
						continue
					}
					add(t.p1, gb*t.w1/g.count)
					add(t.p2, gb*t.w2/g.count)
					add(t.p3, gb*t.w3/g.count)
					add(t.p4, gb*t.w4/g.count)
				}
			}
			storeChannel(gin, ch, planes)
		}
	})
}
