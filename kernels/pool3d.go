package kernels

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// firstErr keeps the first error reported by parallel workers.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

// Pooling over 5-D [N, C, D, H, W] volumes with any strides: max pooling with indices
// (regular, adaptive, fractional), average pooling (regular, adaptive), their backwards and
// max_unpool. 1-D and 2-D pools run as volumes with size-1 axes.

// PoolAxis is one axis of a regular pooling window.
type PoolAxis struct{ K, S, P, Dil int }

// window is the input range [s, e) read with step st by one output index; n is the
// padded window size average pooling divides by when it counts padding.
type window struct{ s, e, st, n int }

// regularWindows follows torch's CPU pooling: the window starts at o*S-P, is clipped to
// the input, and for average pooling its padded size is clipped to in+P.
func regularWindows(a PoolAxis, in, out int) ([]window, error) {
	if a.K < 1 || a.S < 1 || a.P < 0 || a.Dil < 1 {
		return nil, fmt.Errorf("invalid pooling axis %+v", a)
	}
	ws := make([]window, out)
	for o := range ws {
		s := o*a.S - a.P
		e := min(s+(a.K-1)*a.Dil+1, in)
		n := min(s+a.K, in+a.P) - s
		for s < 0 {
			s += a.Dil
		}
		ws[o] = window{s, e, a.Dil, n}
	}
	return ws, nil
}

// adaptiveWindows: output o reads [floor(o*in/out), ceil((o+1)*in/out)).
func adaptiveWindows(in, out int) []window {
	ws := make([]window, out)
	for o := range ws {
		s := o * in / out
		e := ((o+1)*in + out - 1) / out
		ws[o] = window{s, e, 1, e - s}
	}
	return ws
}

type volWindows [3][]window

func checkWindows(w volWindows, out Tensor) error {
	for a := 0; a < 3; a++ {
		if int64(len(w[a])) != out.Sizes[2+a] {
			return fmt.Errorf("axis %d has %d windows for an output of %v", a, len(w[a]), out.Sizes)
		}
	}
	return nil
}

// maxPoolVolume pools one volume x (D*H*W) into y/ix: torch's CPU rule, the first maximum
// wins and a NaN replaces the running maximum.
func maxPoolVolume(x []float64, H, W int, w volWindows, y []float64, ix []int64) {
	i := 0
	for _, wd := range w[0] {
		for _, wh := range w[1] {
			for _, ww := range w[2] {
				mv, mi := math.Inf(-1), int64(-1)
				if wd.s < wd.e && wh.s < wh.e && ww.s < ww.e {
					mi = int64((wd.s*H+wh.s)*W + ww.s)
				}
				for d := wd.s; d < wd.e; d += wd.st {
					for h := wh.s; h < wh.e; h += wh.st {
						r := (d*H + h) * W
						for c := ww.s; c < ww.e; c += ww.st {
							v := x[r+c]
							if v > mv || v != v {
								mv, mi = v, int64(r+c)
							}
						}
					}
				}
				y[i], ix[i] = mv, mi
				i++
			}
		}
	}
}

// MaxPoolVol writes the window maxima of in and their flat (d*H+h)*W+w indices. Values
// are compared as float64 (exact for floats and for integers below 2^53) and the maximum
// element is copied bit for bit.
func MaxPoolVol(out, idx, in Tensor, windows func(pc int64) volWindows) error {
	if err := checkVol(out, idx, in); err != nil {
		return err
	}
	if idx.DType != Int64 || out.DType != in.DType || in.DType == Bool {
		return fmt.Errorf("dtypes: out %v, indices %v, input %v", out.DType, idx.DType, in.DType)
	}
	for a := 2; a < 5; a++ {
		if out.Sizes[a] != idx.Sizes[a] {
			return fmt.Errorf("indices %v and output %v differ", idx.Sizes, out.Sizes)
		}
	}
	vi, vo, vx := vol{in}, vol{out}, vol{idx}
	if vo.count() == 0 || vo.size() == 0 {
		return nil
	}
	if err := checkWindows(windows(0), out); err != nil {
		return err
	}
	if vi.size() == 0 {
		return fmt.Errorf("pooling an empty input %v", in.Sizes)
	}
	offI, offO, offX := make([]int64, vi.size()), make([]int64, vo.size()), make([]int64, vx.size())
	vi.offsets(offI)
	vo.offsets(offO)
	vx.offsets(offX)
	es := in.DType.Size()
	var fe firstErr
	ParallelFor(vo.count(), int64(vi.size()+vo.size()*4), func(lo, hi int64) {
		x := make([]float64, vi.size())
		y := make([]float64, vo.size())
		ix := make([]int64, vo.size())
		for pc := lo; pc < hi; pc++ {
			w := windows(pc)
			if e := checkWindows(w, out); e != nil {
				fe.set(e)
				return
			}
			vi.load(pc, offI, x)
			maxPoolVolume(x, vi.h(), vi.w(), w, y, ix)
			bi, bo := at(in.Ptr, vi.base(pc)), at(out.Ptr, vo.base(pc))
			for j, k := range ix {
				if k < 0 { // an empty window: torch leaves -inf
					storeF(at(bo, offO[j]), out.DType, y[j])
					continue
				}
				copyElem(at(bo, offO[j]), at(bi, offI[k]), es)
			}
			vx.storeIdx(pc, offX, ix)
		}
	})
	return fe.err
}

// MaxPoolRegular is MaxPoolVol over regular (or, with adaptive, adaptive) windows.
func MaxPoolRegular(out, idx, in Tensor, axes [3]PoolAxis, adaptive bool) error {
	if err := checkVol(out, idx, in); err != nil {
		return err
	}
	var w volWindows
	for a := 0; a < 3; a++ {
		inN, outN := int(in.Sizes[2+a]), int(out.Sizes[2+a])
		if adaptive {
			if inN == 0 && outN > 0 {
				return fmt.Errorf("adaptive pooling of an empty axis")
			}
			w[a] = adaptiveWindows(inN, outN)
			continue
		}
		ws, err := regularWindows(axes[a], inN, outN)
		if err != nil {
			return err
		}
		w[a] = ws
	}
	return MaxPoolVol(out, idx, in, func(int64) volWindows { return w })
}

// fractionalIntervals is torch's generate_intervals: window starts from one uniform sample.
func fractionalIntervals(sample float32, in, out, k int) []window {
	ws := make([]window, out)
	if out > 1 {
		alpha := float32(in-k) / float32(out-1)
		for i := 0; i < out-1; i++ {
			s := int(float32((float32(i)+sample)*alpha)) - int(float32(sample*alpha))
			ws[i] = window{s, s + k, 1, k}
		}
	}
	if out > 0 {
		ws[out-1] = window{in - k, in, 1, k}
	}
	return ws
}

// FractionalMaxPool pools with windows of sizes k placed by samples [N, C, nsp] (the
// sample of axis a is samples[..., a] over the last nsp axes, torch's order: W then H for
// 2-D, T, H, W for 3-D).
func FractionalMaxPool(out, idx, in, samples Tensor, k [3]int, nsp int) error {
	if err := checkVol(out, idx, in); err != nil {
		return err
	}
	if samples.Dim() != 3 || samples.Sizes[0] != in.Sizes[0] || samples.Sizes[1] != in.Sizes[1] ||
		samples.Sizes[2] != int64(nsp) || !samples.DType.IsFloat() || nsp < 2 || nsp > 3 {
		return fmt.Errorf("samples %v (%v) for input %v", samples.Sizes, samples.DType, in.Sizes)
	}
	for a := 3 - nsp; a < 3; a++ {
		if k[a] < 1 || int64(k[a]) > in.Sizes[2+a] || out.Sizes[2+a] > 0 && in.Sizes[2+a]-int64(k[a])+1 < out.Sizes[2+a] {
			return fmt.Errorf("fractional pool size %d for an axis %d -> %d", k[a], in.Sizes[2+a], out.Sizes[2+a])
		}
	}
	es := int64(samples.DType.Size())
	C := in.Sizes[1]
	return MaxPoolVol(out, idx, in, func(pc int64) volWindows {
		n, c := pc/C, pc%C
		base := (n*samples.Strides[0] + c*samples.Strides[1]) * es
		sample := func(j int) float32 {
			return float32(loadF(at(samples.Ptr, base+int64(j)*samples.Strides[2]*es), samples.DType))
		}
		var w volWindows
		w[0] = []window{{0, 1, 1, 1}}
		if nsp == 2 {
			w[2] = fractionalIntervals(sample(0), int(in.Sizes[4]), int(out.Sizes[4]), k[2])
			w[1] = fractionalIntervals(sample(1), int(in.Sizes[3]), int(out.Sizes[3]), k[1])
		} else {
			for a := 0; a < 3; a++ {
				w[a] = fractionalIntervals(sample(a), int(in.Sizes[2+a]), int(out.Sizes[2+a]), k[a])
			}
		}
		return w
	})
}

// MaxPoolVolBackward scatters gout into gin at the flat indices idx (summing repeats).
func MaxPoolVolBackward(gin, gout, idx Tensor) error {
	if err := checkVol(gin, gout, idx); err != nil {
		return err
	}
	if idx.DType != Int64 || !gin.DType.IsFloat() || !gout.DType.IsFloat() {
		return fmt.Errorf("dtypes: grad_input %v, grad_output %v, indices %v", gin.DType, gout.DType, idx.DType)
	}
	vi, vo, vx := vol{gin}, vol{gout}, vol{idx}
	if vi.count() == 0 || vi.size() == 0 {
		return nil
	}
	offI, offO, offX := make([]int64, vi.size()), make([]int64, vo.size()), make([]int64, vx.size())
	vi.offsets(offI)
	vo.offsets(offO)
	vx.offsets(offX)
	n := int64(vi.size())
	var fe firstErr
	ParallelFor(vi.count(), int64(vi.size()+vo.size()), func(lo, hi int64) {
		x := make([]float64, vi.size())
		g := make([]float64, vo.size())
		ix := make([]int64, vx.size())
		for pc := lo; pc < hi; pc++ {
			vo.load(pc, offO, g)
			vx.loadIdx(pc, offX, ix)
			for j := range x {
				x[j] = 0
			}
			for j, k := range ix {
				if k < 0 || k >= n {
					fe.set(fmt.Errorf("pooling index %d outside a volume of %d", k, n))
					return
				}
				x[k] += g[j]
			}
			vi.store(pc, offI, x)
		}
	})
	return fe.err
}

// MaxUnpool writes zeros, then in's values at the flat indices idx (any dtype).
func MaxUnpool(out, in, idx Tensor) error {
	if err := checkVol(out, in, idx); err != nil {
		return err
	}
	if idx.DType != Int64 || out.DType != in.DType {
		return fmt.Errorf("dtypes: out %v, input %v, indices %v", out.DType, in.DType, idx.DType)
	}
	vo, vi, vx := vol{out}, vol{in}, vol{idx}
	if vo.count() == 0 || vo.size() == 0 {
		return nil
	}
	offO, offI, offX := make([]int64, vo.size()), make([]int64, vi.size()), make([]int64, vx.size())
	vo.offsets(offO)
	vi.offsets(offI)
	vx.offsets(offX)
	es := out.DType.Size()
	n := int64(vo.size())
	var fe firstErr
	ParallelFor(vo.count(), int64(vo.size()+vi.size()), func(lo, hi int64) {
		ix := make([]int64, vx.size())
		var zero [8]byte
		for pc := lo; pc < hi; pc++ {
			bo, bi := at(out.Ptr, vo.base(pc)), at(in.Ptr, vi.base(pc))
			for _, o := range offO {
				copyElem(at(bo, o), unsafe.Pointer(&zero[0]), es)
			}
			vx.loadIdx(pc, offX, ix)
			for j, k := range ix {
				if k < 0 || k >= n {
					fe.set(fmt.Errorf("Found an invalid max index: %d", k))
					return
				}
				copyElem(at(bo, offO[k]), at(bi, offI[j]), es)
			}
		}
	})
	return fe.err
}

// avgWindows builds the windows of average pooling (adaptive, or regular axes).
func avgWindows(in, out Tensor, axes [3]PoolAxis, adaptive bool) (volWindows, error) {
	var w volWindows
	for a := 0; a < 3; a++ {
		inN, outN := int(in.Sizes[2+a]), int(out.Sizes[2+a])
		if adaptive {
			if inN == 0 && outN > 0 {
				return w, fmt.Errorf("adaptive pooling of an empty axis")
			}
			w[a] = adaptiveWindows(inN, outN)
			continue
		}
		ws, err := regularWindows(PoolAxis{axes[a].K, axes[a].S, axes[a].P, 1}, inN, outN)
		if err != nil {
			return w, err
		}
		w[a] = ws
	}
	return w, nil
}

// avgDivisor is torch's divide_factor for one output position.
func avgDivisor(wd, wh, ww window, countPad bool, divisor int) float64 {
	switch {
	case divisor != 0:
		return float64(divisor)
	case countPad:
		return float64(wd.n * wh.n * ww.n)
	}
	return float64(max(wd.e-wd.s, 0) * max(wh.e-wh.s, 0) * max(ww.e-ww.s, 0))
}

// AvgPoolVol writes window means (sum / divisor; integers divide truncating, as torch's
// integer kernels do). With backward, out is the input gradient and in the output gradient.
// With rb (adaptive only) sums and each division by a window extent round to bfloat16, as
// torch's CPU adaptive_avg_pool3d computes bfloat16 in bfloat16.
func AvgPoolVol(out, in Tensor, axes [3]PoolAxis, adaptive, countPad bool, divisor int, backward, rb bool) error {
	if err := checkVol(out, in); err != nil {
		return err
	}
	if out.DType != in.DType || in.DType == Bool || (backward && !in.DType.IsFloat()) {
		return fmt.Errorf("dtypes: %v, %v", out.DType, in.DType)
	}
	big, small := in, out // input and output of the forward pool
	if backward {
		big, small = out, in
	}
	w, err := avgWindows(big, small, axes, adaptive)
	if err != nil {
		return err
	}
	vi, vo := vol{in}, vol{out}
	if vo.count() == 0 || vo.size() == 0 {
		return nil
	}
	offI, offO := make([]int64, vi.size()), make([]int64, vo.size())
	vi.offsets(offI)
	vo.offsets(offO)
	H, W := vol{big}.h(), vol{big}.w()
	isInt := !in.DType.IsFloat()
	ParallelFor(vo.count(), int64(vi.size()+vo.size()*4), func(lo, hi int64) {
		x := make([]float64, vi.size())
		y := make([]float64, vo.size())
		for pc := lo; pc < hi; pc++ {
			vi.load(pc, offI, x)
			if backward {
				for j := range y {
					y[j] = 0
				}
			}
			i := 0
			for _, wd := range w[0] {
				for _, wh := range w[1] {
					for _, ww := range w[2] {
						div := avgDivisor(wd, wh, ww, countPad || adaptive, divisor)
						if backward {
							g := x[i] / div
							if rb && adaptive {
								g = roundBF16(roundBF16(roundBF16(x[i]/float64(wd.n))/float64(wh.n)) / float64(ww.n))
							}
							for d := wd.s; d < wd.e; d++ {
								for h := wh.s; h < wh.e; h++ {
									r := (d*H + h) * W
									for c := ww.s; c < ww.e; c++ {
										y[r+c] += g
										if rb {
											y[r+c] = roundBF16(y[r+c])
										}
									}
								}
							}
							i++
							continue
						}
						s := 0.0
						for d := wd.s; d < wd.e; d++ {
							for h := wh.s; h < wh.e; h++ {
								r := (d*H + h) * W
								for c := ww.s; c < ww.e; c++ {
									s += x[r+c]
									if rb {
										s = roundBF16(s)
									}
								}
							}
						}
						if rb && adaptive {
							s = roundBF16(roundBF16(roundBF16(s/float64(wd.n))/float64(wh.n)) / float64(ww.n))
							div = 1
						}
						if wd.s >= wd.e || wh.s >= wh.e || ww.s >= ww.e {
							y[i] = 0
						} else if isInt {
							y[i] = math.Trunc(s / div)
						} else {
							y[i] = s / div
						}
						i++
					}
				}
			}
			vo.store(pc, offO, y)
		}
	})
	return nil
}
