package kernels

import (
	"fmt"
	"math"
)

// Grid sampling (torch.nn.functional.grid_sample): out[n,c,h,w] samples input[n,c] at the
// normalised point grid[n,h,w] = (x, y) in [-1, 1], by bilinear, nearest or bicubic
// interpolation, with zeros/border/reflection padding. The coordinate math follows torch's
// CPU kernel step by step in the compute type (float32 for float32 and 16-bit inputs,
// float64 for float64) so the sampled positions, including the floor and the
// round-half-to-even of nearest, match; sums over the neighbours and channels are kept in
// the compute type too. Tensors are strided views read element by element.

// Grid sampler modes and paddings, torch's GridSamplerInterpolation / GridSamplerPadding.
const (
	GridBilinear = 0
	GridNearest  = 1
	GridBicubic  = 2

	GridPadZeros      = 0
	GridPadBorder     = 1
	GridPadReflection = 2
)

type gridFloat interface{ float32 | float64 }

// gridAxis holds one spatial axis' geometry and the sampling options.
type gridAxis[T gridFloat] struct {
	size  int
	mode  int // padding mode
	align bool
}

// unnormalize maps a [-1, 1] coordinate to pixel space; d is its derivative.
func (a gridAxis[T]) unnormalize(c T) (T, T) {
	s := T(a.size)
	if a.align {
		return (c + 1) / 2 * (s - 1), (s - 1) / 2
	}
	return ((c+1)*s - 1) / 2, s / 2
}

// clip clamps to [0, size-1]; d is 0 where clamped.
func (a gridAxis[T]) clip(c T) (T, T) {
	if c <= 0 {
		return 0, 0
	}
	if lim := T(a.size - 1); c >= lim {
		return lim, 0
	}
	return c, 1
}

// reflect folds c into [twiceLow/2, twiceHigh/2] by reflections; d is ±1.
func reflectGrid[T gridFloat](c T, twiceLow, twiceHigh int) (T, T) {
	if twiceLow == twiceHigh {
		return 0, 0
	}
	lo := T(twiceLow) / 2
	span := T(twiceHigh-twiceLow) / 2
	c -= lo
	sign := T(1)
	if c < 0 {
		sign, c = -1, -c
	}
	extra := T(math.Mod(float64(c), float64(span)))
	flips := int(math.Floor(float64(c / span)))
	if flips%2 == 0 {
		return extra + lo, sign
	}
	return span - extra + lo, -sign
}

// pad applies the padding mode to a pixel-space coordinate; d is its derivative.
func (a gridAxis[T]) pad(c T) (T, T) {
	switch a.mode {
	case GridPadBorder:
		return a.clip(c)
	case GridPadReflection:
		var r, dr T
		if a.align {
			r, dr = reflectGrid(c, 0, 2*(a.size-1))
		} else {
			r, dr = reflectGrid(c, -1, 2*a.size-1)
		}
		v, dc := a.clip(r)
		return v, dr * dc
	}
	return c, 1
}

// source is torch's grid_sampler_compute_source_index(_set_grad): the padded pixel-space
// coordinate of c and its derivative.
func (a gridAxis[T]) source(c T) (T, T) {
	u, du := a.unnormalize(c)
	v, dv := a.pad(u)
	return safeGridIndex(v), du * dv
}

// safeGridIndex replaces coordinates beyond int range (and NaN/Inf) with -100, as torch does,
// so the cast to an integer pixel index is defined (and out of bounds).
func safeGridIndex[T gridFloat](c T) T {
	f := float64(c)
	if math.IsNaN(f) || math.IsInf(f, 0) || f > math.MaxInt32-1 || f < math.MinInt32 {
		return -100
	}
	return c
}

func gridCubic1[T gridFloat](x, A T) T { return ((A+2)*x-(A+3))*x*x + 1 }
func gridCubic2[T gridFloat](x, A T) T { return ((A*x-5*A)*x+8*A)*x - 4*A }

// cubicCoeffs are the four cubic-convolution weights (A = -0.75) at fraction t.
func cubicCoeffs[T gridFloat](t T) [4]T {
	const A = -0.75
	return [4]T{gridCubic2(t+1, A), gridCubic1(t, A), gridCubic1(1-t, A), gridCubic2(2-t, A)}
}

// cubicCoeffsGrad are the weights' derivatives with respect to t, negated (torch's sign).
func cubicCoeffsGrad[T gridFloat](t T) [4]T {
	const A = -0.75
	var g [4]T
	x := -1 - t
	g[0] = (-3*A*x-10*A)*x - 8*A
	x = -t
	g[1] = (-3*(A+2)*x - 2*(A+3)) * x
	x = 1 - t
	g[2] = (3*(A+2)*x - 2*(A+3)) * x
	x = 2 - t
	g[3] = (3*A*x-10*A)*x + 8*A
	return g
}

// gridGeom is one call's shapes: input [N,C,H,W], grid [N,OH,OW,2], output [N,C,OH,OW].
type gridGeom struct {
	N, C, H, W, OH, OW int
}

func gridGeometry(out []int64, in, grid Tensor) (gridGeom, error) {
	if in.Dim() != 4 || grid.Dim() != 4 || grid.Sizes[3] != 2 || grid.Sizes[0] != in.Sizes[0] {
		return gridGeom{}, fmt.Errorf("grid_sampler_2d: input %v and grid %v", in.Sizes, grid.Sizes)
	}
	g := gridGeom{N: int(in.Sizes[0]), C: int(in.Sizes[1]), H: int(in.Sizes[2]), W: int(in.Sizes[3]),
		OH: int(grid.Sizes[1]), OW: int(grid.Sizes[2])}
	if len(out) != 4 || out[0] != int64(g.N) || out[1] != int64(g.C) || out[2] != int64(g.OH) || out[3] != int64(g.OW) {
		return g, fmt.Errorf("grid_sampler_2d: output %v, expected [%d %d %d %d]", out, g.N, g.C, g.OH, g.OW)
	}
	return g, nil
}

// strided element access for the grid sampler's 4-D views
type view4 struct {
	t  Tensor
	es int64
}

func newView4(t Tensor) view4 { return view4{t: t, es: int64(t.DType.Size())} }

func (v view4) off(a, b, c, d int) int64 {
	s := v.t.Strides
	return (int64(a)*s[0] + int64(b)*s[1] + int64(c)*s[2] + int64(d)*s[3]) * v.es
}

func (v view4) get(a, b, c, d int) float64 { return ixGetF(at(v.t.Ptr, v.off(a, b, c, d)), v.t.DType) }

func (v view4) set(a, b, c, d int, x float64) { ixSetF(at(v.t.Ptr, v.off(a, b, c, d)), v.t.DType, x) }

func checkGridModes(mode, pad int) error {
	if mode < GridBilinear || mode > GridBicubic || pad < GridPadZeros || pad > GridPadReflection {
		return fmt.Errorf("grid_sampler_2d: interpolation mode %d, padding mode %d", mode, pad)
	}
	return nil
}

func gridFloatTypes(ts ...Tensor) error {
	for _, t := range ts {
		switch t.DType {
		case Float32, Float64, BFloat16, Float16:
		default:
			return fmt.Errorf("grid_sampler_2d: unsupported dtype %v", t.DType)
		}
	}
	return nil
}

// GridSample2d fills out from in sampled at grid.
func GridSample2d(out, in, grid Tensor, mode, pad int, align bool) error {
	g, err := gridGeometry(out.Sizes, in, grid)
	if err != nil {
		return err
	}
	if err := checkGridModes(mode, pad); err != nil {
		return err
	}
	if err := gridFloatTypes(out, in, grid); err != nil {
		return err
	}
	if in.DType == Float64 {
		gridSample2d[float64](out, in, grid, g, mode, pad, align)
	} else {
		gridSample2d[float32](out, in, grid, g, mode, pad, align)
	}
	return nil
}

// gridPoint is one grid location's sampling positions in the compute type.
type gridPoint[T gridFloat] struct {
	ix, iy   T // padded pixel coordinates (bicubic: unpadded)
	gmx, gmy T // d(pixel coordinate) / d(grid coordinate)
}

func gridLoad[T gridFloat](gv view4, xa, ya gridAxis[T], n, h, w, mode int) gridPoint[T] {
	x, y := T(gv.get(n, h, w, 0)), T(gv.get(n, h, w, 1))
	var p gridPoint[T]
	if mode == GridBicubic { // bicubic pads each tap, not the point
		p.ix, p.gmx = xa.unnormalize(x)
		p.iy, p.gmy = ya.unnormalize(y)
		return p
	}
	p.ix, p.gmx = xa.source(x)
	p.iy, p.gmy = ya.source(y)
	return p
}

// bicubicTap is torch's get_value_bounded's index: a tap's integer pixel after padding,
// ok false when it falls outside the input (zeros padding).
func bicubicTap[T gridFloat](a gridAxis[T], c T) (int, bool) {
	v := c
	if a.mode != GridPadZeros {
		v, _ = a.pad(c)
	}
	i := int(safeGridIndex(v))
	return i, i >= 0 && i < a.size
}

func gridSample2d[T gridFloat](out, in, grid Tensor, g gridGeom, mode, pad int, align bool) {
	ov, iv, gv := newView4(out), newView4(in), newView4(grid)
	xa, ya := gridAxis[T]{size: g.W, mode: pad, align: align}, gridAxis[T]{size: g.H, mode: pad, align: align}
	inb := func(x, y int) bool { return x >= 0 && x < g.W && y >= 0 && y < g.H }
	ParallelFor(int64(g.N*g.OH), int64(g.OW*g.C*16+1), func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			n, h := int(r)/g.OH, int(r)%g.OH
			for w := 0; w < g.OW; w++ {
				p := gridLoad(gv, xa, ya, n, h, w, mode)
				switch mode {
				case GridBilinear:
					x0, y0 := T(math.Floor(float64(p.ix))), T(math.Floor(float64(p.iy)))
					x1, y1 := x0+1, y0+1
					wts := [4]T{(x1 - p.ix) * (y1 - p.iy), (p.ix - x0) * (y1 - p.iy), (x1 - p.ix) * (p.iy - y0), (p.ix - x0) * (p.iy - y0)}
					xs := [4]int{int(x0), int(x0) + 1, int(x0), int(x0) + 1}
					ys := [4]int{int(y0), int(y0), int(y0) + 1, int(y0) + 1}
					for c := 0; c < g.C; c++ {
						var acc T
						for k := 0; k < 4; k++ {
							if inb(xs[k], ys[k]) {
								acc += T(iv.get(n, c, ys[k], xs[k])) * wts[k]
							}
						}
						ov.set(n, c, h, w, float64(acc))
					}
				case GridNearest:
					x, y := int(math.RoundToEven(float64(p.ix))), int(math.RoundToEven(float64(p.iy)))
					for c := 0; c < g.C; c++ {
						var v float64
						if inb(x, y) {
							v = iv.get(n, c, y, x)
						}
						ov.set(n, c, h, w, v)
					}
				case GridBicubic:
					x0, y0 := T(math.Floor(float64(p.ix))), T(math.Floor(float64(p.iy)))
					cx, cy := cubicCoeffs(p.ix-x0), cubicCoeffs(p.iy-y0)
					var xs, ys [4]int
					var xok, yok [4]bool
					for k := 0; k < 4; k++ {
						xs[k], xok[k] = bicubicTap(xa, x0-1+T(k))
						ys[k], yok[k] = bicubicTap(ya, y0-1+T(k))
					}
					for c := 0; c < g.C; c++ {
						var rows [4]T
						for j := 0; j < 4; j++ {
							var v [4]T
							for i := 0; i < 4; i++ {
								if xok[i] && yok[j] {
									v[i] = T(iv.get(n, c, ys[j], xs[i]))
								}
							}
							rows[j] = v[0]*cx[0] + v[1]*cx[1] + v[2]*cx[2] + v[3]*cx[3]
						}
						ov.set(n, c, h, w, float64(rows[0]*cy[0]+rows[1]*cy[1]+rows[2]*cy[2]+rows[3]*cy[3]))
					}
				}
			}
		}
	})
}

// GridSample2dBackward computes the gradients selected by non-nil outputs: gin (like in)
// and ggrid (like grid).
func GridSample2dBackward(gin, ggrid *Tensor, gout, in, grid Tensor, mode, pad int, align bool) error {
	g, err := gridGeometry(gout.Sizes, in, grid)
	if err != nil {
		return err
	}
	if err := checkGridModes(mode, pad); err != nil {
		return err
	}
	if err := gridFloatTypes(gout, in, grid); err != nil {
		return err
	}
	if gin != nil && fmt.Sprint(gin.Sizes) != fmt.Sprint(in.Sizes) {
		return fmt.Errorf("grid_sampler_2d_backward: grad_input %v, expected %v", gin.Sizes, in.Sizes)
	}
	if ggrid != nil && fmt.Sprint(ggrid.Sizes) != fmt.Sprint(grid.Sizes) {
		return fmt.Errorf("grid_sampler_2d_backward: grad_grid %v, expected %v", ggrid.Sizes, grid.Sizes)
	}
	if in.DType == Float64 {
		gridSample2dBackward[float64](gin, ggrid, gout, in, grid, g, mode, pad, align)
	} else {
		gridSample2dBackward[float32](gin, ggrid, gout, in, grid, g, mode, pad, align)
	}
	return nil
}

func gridSample2dBackward[T gridFloat](gin, ggrid *Tensor, gout, in, grid Tensor, g gridGeom, mode, pad int, align bool) {
	gov, iv, gv := newView4(gout), newView4(in), newView4(grid)
	xa, ya := gridAxis[T]{size: g.W, mode: pad, align: align}, gridAxis[T]{size: g.H, mode: pad, align: align}
	inb := func(x, y int) bool { return x >= 0 && x < g.W && y >= 0 && y < g.H }
	plane := g.H * g.W
	// one sample per task: the input gradient of sample n only gathers from grid points of n
	ParallelFor(int64(g.N), int64(g.OH*g.OW*g.C*32+1), func(lo, hi int64) {
		var dx []T
		if gin != nil {
			dx = make([]T, g.C*plane)
		}
		for n := int(lo); n < int(hi); n++ {
			clear(dx)
			add := func(c, x, y int, v T) {
				if dx != nil && inb(x, y) {
					dx[c*plane+y*g.W+x] += v
				}
			}
			for h := 0; h < g.OH; h++ {
				for w := 0; w < g.OW; w++ {
					p := gridLoad(gv, xa, ya, n, h, w, mode)
					var gx, gy T
					switch mode {
					case GridBilinear:
						x0, y0 := T(math.Floor(float64(p.ix))), T(math.Floor(float64(p.iy)))
						x1, y1 := x0+1, y0+1
						ix0, iy0 := int(x0), int(y0)
						nw, ne := (x1-p.ix)*(y1-p.iy), (p.ix-x0)*(y1-p.iy)
						sw, se := (x1-p.ix)*(p.iy-y0), (p.ix-x0)*(p.iy-y0)
						for c := 0; c < g.C; c++ {
							gO := T(gov.get(n, c, h, w))
							add(c, ix0, iy0, nw*gO)
							add(c, ix0+1, iy0, ne*gO)
							add(c, ix0, iy0+1, sw*gO)
							add(c, ix0+1, iy0+1, se*gO)
							if ggrid == nil {
								continue
							}
							if inb(ix0, iy0) {
								v := T(iv.get(n, c, iy0, ix0))
								gx -= v * (y1 - p.iy) * gO
								gy -= v * (x1 - p.ix) * gO
							}
							if inb(ix0+1, iy0) {
								v := T(iv.get(n, c, iy0, ix0+1))
								gx += v * (y1 - p.iy) * gO
								gy -= v * (p.ix - x0) * gO
							}
							if inb(ix0, iy0+1) {
								v := T(iv.get(n, c, iy0+1, ix0))
								gx -= v * (p.iy - y0) * gO
								gy += v * (x1 - p.ix) * gO
							}
							if inb(ix0+1, iy0+1) {
								v := T(iv.get(n, c, iy0+1, ix0+1))
								gx += v * (p.iy - y0) * gO
								gy += v * (p.ix - x0) * gO
							}
						}
					case GridNearest:
						x, y := int(math.RoundToEven(float64(p.ix))), int(math.RoundToEven(float64(p.iy)))
						for c := 0; c < g.C; c++ {
							add(c, x, y, T(gov.get(n, c, h, w)))
						}
					case GridBicubic:
						x0, y0 := T(math.Floor(float64(p.ix))), T(math.Floor(float64(p.iy)))
						tx, ty := p.ix-x0, p.iy-y0
						cx, cy := cubicCoeffs(tx), cubicCoeffs(ty)
						dcx, dcy := cubicCoeffsGrad(tx), cubicCoeffsGrad(ty)
						var xs, ys [4]int
						var xok, yok [4]bool
						for k := 0; k < 4; k++ {
							xs[k], xok[k] = bicubicTap(xa, x0-1+T(k))
							ys[k], yok[k] = bicubicTap(ya, y0-1+T(k))
						}
						for c := 0; c < g.C; c++ {
							gO := T(gov.get(n, c, h, w))
							for i := 0; i < 4; i++ {
								for j := 0; j < 4; j++ {
									if !xok[i] || !yok[j] {
										continue
									}
									add(c, xs[i], ys[j], gO*cx[i]*cy[j])
									if ggrid != nil {
										v := T(iv.get(n, c, ys[j], xs[i]))
										gx -= v * dcx[i] * cy[j] * gO
										gy -= v * dcy[j] * cx[i] * gO
									}
								}
							}
						}
					}
					if ggrid != nil {
						gg := newView4(*ggrid)
						gg.set(n, h, w, 0, float64(p.gmx*gx))
						gg.set(n, h, w, 1, float64(p.gmy*gy))
					}
				}
			}
			if gin != nil {
				gi := newView4(*gin)
				for c := 0; c < g.C; c++ {
					for y := 0; y < g.H; y++ {
						for x := 0; x < g.W; x++ {
							gi.set(n, c, y, x, float64(dx[c*plane+y*g.W+x]))
						}
					}
				}
			}
		}
	})
}
