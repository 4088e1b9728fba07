package kernels

import (
	"math/rand"
	"testing"
	"unsafe"
)

func contig4(p []float32, s [4]int) Tensor {
	return f32Tensor(p, []int64{int64(s[0]), int64(s[1]), int64(s[2]), int64(s[3])},
		[]int64{int64(s[1] * s[2] * s[3]), int64(s[2] * s[3]), int64(s[3]), 1})
}

// naiveConv is the textbook loop, the oracle for im2col+GEMM.
func naiveConv(x, w, b []float32, N, C, H, W, O, KH, KW int, p ConvParams) ([]float32, int, int) {
	OH := (H+2*p.PadH-p.DilH*(KH-1)-1)/p.StrideH + 1
	OW := (W+2*p.PadW-p.DilW*(KW-1)-1)/p.StrideW + 1
	Cg, Og := C/p.Groups, O/p.Groups
	y := make([]float32, N*O*OH*OW)
	for n := 0; n < N; n++ {
		for o := 0; o < O; o++ {
			gi := o / Og
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					var s float64
					if b != nil {
						s = float64(b[o])
					}
					for c := 0; c < Cg; c++ {
						for kh := 0; kh < KH; kh++ {
							for kw := 0; kw < KW; kw++ {
								ih, iw := oh*p.StrideH-p.PadH+kh*p.DilH, ow*p.StrideW-p.PadW+kw*p.DilW
								if ih < 0 || ih >= H || iw < 0 || iw >= W {
									continue
								}
								s += float64(x[((n*C+gi*Cg+c)*H+ih)*W+iw]) * float64(w[((o*Cg+c)*KH+kh)*KW+kw])
							}
						}
					}
					y[((n*O+o)*OH+oh)*OW+ow] = float32(s)
				}
			}
		}
	}
	return y, OH, OW
}

func TestConvForwardBackwardVsNaive(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	cases := []struct {
		N, C, H, W, O, KH, KW int
		p                     ConvParams
	}{
		{2, 3, 8, 7, 4, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
		{1, 4, 9, 9, 6, 3, 2, ConvParams{2, 1, 0, 2, 2, 1, 2}},
		{3, 6, 5, 5, 6, 1, 1, ConvParams{1, 1, 0, 0, 1, 1, 3}},
		{2, 2, 1, 11, 3, 1, 3, ConvParams{1, 2, 0, 1, 1, 2, 1}},
	}
	for ci, tc := range cases {
		x := randF32(r, tc.N*tc.C*tc.H*tc.W)
		w := randF32(r, tc.O*tc.C/tc.p.Groups*tc.KH*tc.KW)
		b := randF32(r, tc.O)
		want, OH, OW := naiveConv(x, w, b, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		y := make([]float32, len(want))
		xs, ws, ys := [4]int{tc.N, tc.C, tc.H, tc.W}, [4]int{tc.O, tc.C / tc.p.Groups, tc.KH, tc.KW}, [4]int{tc.N, tc.O, OH, OW}
		bt := f32Tensor(b, []int64{int64(tc.O)}, []int64{1})
		if err := Conv2dForward(contig4(y, ys), contig4(x, xs), contig4(w, ws), &bt, tc.p); err != nil {
			t.Fatal(err)
		}
		closeF32(t, y, want, 1e-4)

		// Backward: the gradient of sum(y*gy) w.r.t. x, w, b by finite structure:
		// compare against the naive conv's linearity (dL/dx·dx = L(x+dx)-L(x) exactly for linear maps).
		gy := randF32(r, len(y))
		gx, gw, gb := make([]float32, len(x)), make([]float32, len(w)), make([]float32, tc.O)
		gxt, gwt, gbt := contig4(gx, xs), contig4(gw, ws), f32Tensor(gb, []int64{int64(tc.O)}, []int64{1})
		if err := Conv2dBackward(&gxt, &gwt, &gbt, contig4(gy, ys), contig4(x, xs), contig4(w, ws), tc.p); err != nil {
			t.Fatal(err)
		}
		dot := func(a, b []float32) float64 {
			s := 0.0
			for i := range a {
				s += float64(a[i]) * float64(b[i])
			}
			return s
		}
		// <gy, conv(dx, w)> == <gx, dx> and <gy, conv(x, dw)> == <gw, dw>.
		dx, dw := randF32(r, len(x)), randF32(r, len(w))
		yx, _, _ := naiveConv(dx, w, nil, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		yw, _, _ := naiveConv(x, dw, nil, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		for name, pair := range map[string][2]float64{"input": {dot(gy, yx), dot(gx, dx)}, "weight": {dot(gy, yw), dot(gw, dw)}} {
			if d := pair[0] - pair[1]; d > 1e-3*(1+abs64(pair[0])) || d < -1e-3*(1+abs64(pair[0])) {
				t.Fatalf("case %d: grad %s: %v vs %v", ci, name, pair[0], pair[1])
			}
		}
		for o := 0; o < tc.O; o++ {
			var s float64
			for n := 0; n < tc.N; n++ {
				for i := 0; i < OH*OW; i++ {
					s += float64(gy[(n*tc.O+o)*OH*OW+i])
				}
			}
			if d := s - float64(gb[o]); d > 1e-4 || d < -1e-4 {
				t.Fatalf("case %d: grad bias %d: %v vs %v", ci, o, gb[o], s)
			}
		}
	}
	// Errors, not panics, for bad shapes.
	x := make([]float32, 16)
	if err := Conv2dForward(contig4(x, [4]int{1, 1, 4, 4}), contig4(x, [4]int{1, 2, 2, 4}), contig4(x, [4]int{1, 3, 1, 1}), nil, ConvParams{1, 1, 0, 0, 1, 1, 1}); err == nil {
		t.Fatal("channel mismatch not reported")
	}
	_ = unsafe.Pointer(nil)
}

func abs64(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// bfloat16 convolutions run on the VDPBF16PS kernel (where the CPU has it) or widen to the
// float32 per-sample path; both must agree with the generic (blocked, convert-per-block)
// path to within two bf16 ulps, forward and backward (they sum in different orders
// before rounding once), over strides, padding, dilation, groups, 1x1 and one channel.
func TestConvBF16WidenedMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	bf := func(n int) []uint16 {
		v := make([]uint16, n)
		for i := range v {
			v[i] = F32ToBF16(r.Float32()*2 - 1)
		}
		return v
	}
	t4 := func(p []uint16, s [4]int) Tensor {
		return Tensor{Ptr: unsafe.Pointer(&p[0]), DType: BFloat16, Sizes: []int64{int64(s[0]), int64(s[1]), int64(s[2]), int64(s[3])},
			Strides: []int64{int64(s[1] * s[2] * s[3]), int64(s[2] * s[3]), int64(s[3]), 1}}
	}
	for _, c := range []struct {
		N, C, O, H, W, K int
		p                ConvParams
	}{
		{3, 4, 5, 8, 8, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
		{2, 1, 16, 9, 7, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},    // one input channel: Kc = 9, odd
		{2, 6, 4, 9, 10, 3, ConvParams{2, 2, 1, 0, 1, 1, 2}},    // stride 2, groups 2
		{2, 3, 5, 11, 9, 3, ConvParams{1, 1, 2, 2, 2, 2, 1}},    // dilation 2
		{3, 8, 6, 5, 5, 1, ConvParams{1, 1, 0, 0, 1, 1, 1}},     // pointwise
		{2, 16, 32, 14, 14, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}}, // the CNN's second layer
	} {
		p := c.p
		OH := (c.H+2*p.PadH-p.DilH*(c.K-1)-1)/p.StrideH + 1
		OW := (c.W+2*p.PadW-p.DilW*(c.K-1)-1)/p.StrideW + 1
		xs, ws, ys := [4]int{c.N, c.C, c.H, c.W}, [4]int{c.O, c.C / p.Groups, c.K, c.K}, [4]int{c.N, c.O, OH, OW}
		x, w, b, gy := bf(c.N*c.C*c.H*c.W), bf(c.O*c.C/p.Groups*c.K*c.K), bf(c.O), bf(c.N*c.O*OH*OW)
		bt := Tensor{Ptr: unsafe.Pointer(&b[0]), DType: BFloat16, Sizes: []int64{int64(c.O)}, Strides: []int64{1}}
		run := func(perSample, dot bool) (y, gx, gw, gb []uint16) {
			oldS, oldD := convPerSample, gemmBF16Dot
			convPerSample, gemmBF16Dot = perSample, dot
			defer func() { convPerSample, gemmBF16Dot = oldS, oldD }()
			y, gx, gw, gb = make([]uint16, len(gy)), make([]uint16, len(x)), make([]uint16, len(w)), make([]uint16, c.O)
			if err := Conv2dForward(t4(y, ys), t4(x, xs), t4(w, ws), &bt, p); err != nil {
				t.Fatal(err)
			}
			gxt, gwt := t4(gx, xs), t4(gw, ws)
			gbt := Tensor{Ptr: unsafe.Pointer(&gb[0]), DType: BFloat16, Sizes: []int64{int64(c.O)}, Strides: []int64{1}}
			if err := Conv2dBackward(&gxt, &gwt, &gbt, t4(gy, ys), t4(x, xs), t4(w, ws), p); err != nil {
				t.Fatal(err)
			}
			return
		}
		y0, gx0, gw0, gb0 := run(false, false)
		for _, dot := range []bool{true, false} {
			y1, gx1, gw1, gb1 := run(true, dot)
			for name, pair := range map[string][2][]uint16{"y": {y1, y0}, "gx": {gx1, gx0}, "gw": {gw1, gw0}, "gb": {gb1, gb0}} {
				for i := range pair[0] {
					a, g := BF16ToF32(pair[0][i]), BF16ToF32(pair[1][i])
					if d := float64(a - g); d > 1.0/128*(1+abs64(float64(g))) || d < -1.0/128*(1+abs64(float64(g))) {
						t.Fatalf("%+v dot=%v: %s[%d]: per-sample %v generic %v", c, dot, name, i, a, g)
					}
				}
			}
		}
	}
}
