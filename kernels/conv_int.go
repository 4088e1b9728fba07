package kernels

import "fmt"

// Integer convolutions (torch runs int64 convolutions on the CPU with its slow direct
// kernels, wrapping on overflow). These are exact direct loops in int64 arithmetic, which
// wraps the same way; 1-D and 3-D convolutions reach them through the 2-D layout (H = 1,
// and the depth unfolded into channels by the Python lowering).

func isIntDType(dt DType) bool {
	switch dt {
	case Uint8, Int8, Int16, Int32, Int64:
		return true
	}
	return false
}

func checkInt(ts ...Tensor) error {
	for _, t := range ts {
		if !isIntDType(t.DType) {
			return fmt.Errorf("integer convolution: unsupported dtype %v", t.DType)
		}
	}
	return nil
}

// loadInt4 copies a strided 4-D integer tensor into a contiguous []int64.
func loadInt4(t Tensor) []int64 {
	A, B, C, D := t.Sizes[0], t.Sizes[1], t.Sizes[2], t.Sizes[3]
	dst := make([]int64, A*B*C*D)
	es := int64(t.DType.Size())
	ParallelFor(A*B, C*D, func(lo, hi int64) {
		for r := lo; r < hi; r++ {
			a, b := r/B, r%B
			row := dst[r*C*D : (r+1)*C*D]
			for c := int64(0); c < C; c++ {
				for d := int64(0); d < D; d++ {
					off := (a*t.Strides[0] + b*t.Strides[1] + c*t.Strides[2] + d*t.Strides[3]) * es
					row[c*D+d] = ixGetI(at(t.Ptr, off), t.DType)
				}
			}
		}
	})
	return dst
}

// storeInt4Plane writes the [H,W] plane src into t[n, c].
func storeInt4Plane(t Tensor, n, c int64, src []int64) {
	es := int64(t.DType.Size())
	H, W := t.Sizes[2], t.Sizes[3]
	for h := int64(0); h < H; h++ {
		for w := int64(0); w < W; w++ {
			off := (n*t.Strides[0] + c*t.Strides[1] + h*t.Strides[2] + w*t.Strides[3]) * es
			ixSetI(at(t.Ptr, off), t.DType, src[h*W+w])
		}
	}
}

// ConvIntForward computes out = conv(in, weight) + bias for integer tensors (bias may be nil).
func ConvIntForward(out, in, weight Tensor, bias *Tensor, p ConvParams) error {
	g, err := convGeometry(in, weight, out.Sizes, p)
	if err != nil {
		return err
	}
	if err := checkInt(out, in, weight); err != nil {
		return err
	}
	var b []int64
	if bias != nil {
		if bias.Dim() != 1 || bias.Sizes[0] != int64(g.O) {
			return fmt.Errorf("bias of shape %v, expected [%d]", bias.Sizes, g.O)
		}
		if err := checkInt(*bias); err != nil {
			return err
		}
		b = make([]int64, g.O)
		es := int64(bias.DType.Size())
		for o := range b {
			b[o] = ixGetI(at(bias.Ptr, int64(o)*bias.Strides[0]*es), bias.DType)
		}
	}
	if out.Numel() == 0 {
		return nil
	}
	x, w := loadInt4(in), loadInt4(weight)
	ParallelFor(int64(g.N*g.O), int64(g.P*g.Kc+1), func(lo, hi int64) {
		plane := make([]int64, g.P)
		for r := lo; r < hi; r++ {
			n, o := int(r)/g.O, int(r)%g.O
			gi := o / g.Og
			var b0 int64
			if b != nil {
				b0 = b[o]
			}
			for i := range plane {
				plane[i] = b0
			}
			for c := 0; c < g.Cg; c++ {
				xc := x[(n*g.C+gi*g.Cg+c)*g.H*g.W:][:g.H*g.W]
				for kh := 0; kh < g.KH; kh++ {
					for kw := 0; kw < g.KW; kw++ {
						wv := w[((o*g.Cg+c)*g.KH+kh)*g.KW+kw]
						for oh := 0; oh < g.OH; oh++ {
							ih := oh*p.StrideH - p.PadH + kh*p.DilH
							if ih < 0 || ih >= g.H {
								continue
							}
							for ow := 0; ow < g.OW; ow++ {
								iw := ow*p.StrideW - p.PadW + kw*p.DilW
								if iw < 0 || iw >= g.W {
									continue
								}
								plane[oh*g.OW+ow] += wv * xc[ih*g.W+iw]
							}
						}
					}
				}
			}
			storeInt4Plane(out, int64(n), int64(o), plane)
		}
	})
	return nil
}

// ConvIntBackwardInput computes gin = conv^T(gout, weight), the input gradient of an integer
// convolution, which is also the integer transposed convolution of gout.
func ConvIntBackwardInput(gin, gout, weight Tensor, p ConvParams) error {
	g, err := convGeometry(gin, weight, gout.Sizes, p)
	if err != nil {
		return err
	}
	if err := checkInt(gin, gout, weight); err != nil {
		return err
	}
	if gin.Numel() == 0 {
		return nil
	}
	dy, w := loadInt4(gout), loadInt4(weight)
	ParallelFor(int64(g.N*g.C), int64(g.P*g.Og*g.KH*g.KW+1), func(lo, hi int64) {
		plane := make([]int64, g.H*g.W)
		for r := lo; r < hi; r++ {
			n, c := int(r)/g.C, int(r)%g.C
			gi, cg := c/g.Cg, c%g.Cg
			clear(plane)
			for og := 0; og < g.Og; og++ {
				o := gi*g.Og + og
				dyo := dy[(n*g.O+o)*g.P:][:g.P]
				for kh := 0; kh < g.KH; kh++ {
					for kw := 0; kw < g.KW; kw++ {
						wv := w[((o*g.Cg+cg)*g.KH+kh)*g.KW+kw]
						for oh := 0; oh < g.OH; oh++ {
							ih := oh*p.StrideH - p.PadH + kh*p.DilH
							if ih < 0 || ih >= g.H {
								continue
							}
							for ow := 0; ow < g.OW; ow++ {
								iw := ow*p.StrideW - p.PadW + kw*p.DilW
								if iw < 0 || iw >= g.W {
									continue
								}
								plane[ih*g.W+iw] += wv * dyo[oh*g.OW+ow]
							}
						}
					}
				}
			}
			storeInt4Plane(gin, int64(n), int64(c), plane)
		}
	})
	return nil
}
