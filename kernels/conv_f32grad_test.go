package kernels

import (
	"math"
	"math/rand"
	"testing"
)

// The AVX-512 gradients (conv_f32grad.go) against the im2col path and, through it, the
// naive loop's adjoints (TestConvForwardBackwardVsNaive): weight, bias and input gradients
// over padding, dilation, groups, rows wider than one 16-lane vector, partial 4x6 weight
// tiles, partial 12-row input tiles, output-gradient channels past one 256-block, and a
// sample count that leaves a block of one.
func TestConvGradImplicitMatchesIm2col(t *testing.T) {
	needF32Dot(t)
	defer setF32Dot(true)()
	defer setConvDirect(false)() // these test the paths behind it
	r := rand.New(rand.NewSource(12))
	cases := []struct {
		N, C, H, W, O, KH, KW int
		p                     ConvParams
	}{
		{3, 16, 14, 14, 32, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},  // the reference CNN's layer 2
		{3, 1, 28, 28, 16, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},   // layer 1: Kc 9, two vectors a row
		{2, 12, 9, 11, 7, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},    // 7 rows: a 4+3 split
		{2, 13, 10, 7, 5, 5, 5, ConvParams{1, 1, 2, 2, 1, 1, 1}},    // 5x5, Kc 325
		{1, 12, 12, 16, 6, 3, 3, ConvParams{1, 1, 0, 0, 1, 1, 1}},   // no padding, a full 16-lane row
		{2, 14, 13, 12, 9, 3, 3, ConvParams{1, 1, 2, 3, 2, 2, 1}},   // dilation 2, pads 2/3
		{2, 24, 6, 6, 24, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 2}},    // 2 groups of 12
		{1, 40, 5, 4, 12, 1, 1, ConvParams{1, 1, 0, 0, 1, 1, 1}},    // pointwise
		{2, 16, 7, 37, 33, 2, 3, ConvParams{1, 1, 1, 0, 1, 1, 1}},   // even kernel, 3 vectors a row
		{1, 12, 4, 5, 300, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},   // Og 300: two k-blocks for dx
		{5, 3, 8, 8, 4, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},      // Cg 3: weight path only
		{2, 12, 1, 20, 8, 1, 3, ConvParams{1, 1, 0, 1, 1, 1, 1}},    // 1-D
		{2, 12, 6, 6, 8, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // Og 8
		{1, 12, 3, 3, 4, 3, 3, ConvParams{1, 1, 2, 2, 1, 1, 1}},     // padding past the kernel
		{2, 16, 15, 33, 20, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},  // grid ends mid-panel
		{2, 12, 5, 5, 8, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // small plane
		{3, 32, 7, 7, 16, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 4}},    // 4 groups of 8 (weight only)
		{2, 12, 10, 10, 10, 3, 3, ConvParams{1, 1, 0, 0, 1, 1, 1}},  // valid convolution
		{2, 12, 9, 9, 4, 4, 4, ConvParams{1, 1, 3, 3, 1, 1, 1}},     // 4x4, pad 3
		{1, 12, 6, 18, 5, 3, 2, ConvParams{1, 1, 1, 0, 1, 2, 1}},    // width dilation only
		{2, 16, 14, 14, 32, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 16}}, // depthwise
		{2, 12, 30, 30, 6, 7, 7, ConvParams{1, 1, 3, 3, 1, 1, 1}},   // 7x7
		{4, 12, 11, 3, 7, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},    // narrow
		{2, 12, 6, 6, 4, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // Og 4
		{2, 12, 6, 6, 1, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // one output channel
		{2, 12, 6, 6, 6, 1, 1, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // 1x1 with padding
		{1, 12, 2, 2, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // 2x2 image
		{2, 12, 8, 8, 6, 3, 3, ConvParams{1, 1, 1, 1, 3, 3, 1}},     // dilation 3, OH 4
		{2, 12, 20, 20, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},   // 20-wide rows
		{2, 12, 17, 17, 6, 2, 2, ConvParams{1, 1, 0, 0, 1, 1, 1}},   // OW 16
		{2, 12, 18, 33, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},   // OW 33
		{2, 12, 4, 4, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // 4x4
		{2, 12, 4, 4, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // repeated: pooled buffers
		{2, 12, 9, 9, 6, 3, 3, ConvParams{1, 1, 1, 2, 1, 1, 1}},     // uneven pads
		{2, 12, 9, 9, 6, 3, 3, ConvParams{1, 1, 2, 1, 1, 1, 1}},     // uneven pads
		{2, 12, 9, 9, 6, 3, 1, ConvParams{1, 1, 1, 0, 1, 1, 1}},     // 3x1
		{2, 12, 9, 9, 6, 1, 3, ConvParams{1, 1, 0, 1, 1, 1, 1}},     // 1x3
		{3, 12, 9, 9, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // odd sample count
		{1, 12, 9, 9, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // one sample
		{2, 24, 9, 9, 12, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},    // Cg 24
		{2, 12, 9, 9, 6, 3, 3, ConvParams{1, 1, 1, 1, 2, 1, 1}},     // height dilation only
		{2, 36, 5, 5, 12, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 3}},    // 3 groups of 12
		{2, 12, 9, 9, 6, 5, 3, ConvParams{1, 1, 2, 1, 1, 1, 1}},     // 5x3
		{2, 12, 9, 9, 6, 3, 5, ConvParams{1, 1, 1, 2, 1, 1, 1}},     // 3x5
		{2, 12, 9, 9, 6, 2, 2, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // even kernel, pad 1
		{2, 12, 9, 9, 6, 2, 2, ConvParams{1, 1, 0, 0, 2, 2, 1}},     // dilated even kernel
		{2, 12, 31, 31, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},   // 31-wide rows
		{2, 12, 32, 32, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},   // 32-wide rows
		{2, 12, 32, 32, 6, 3, 3, ConvParams{1, 1, 0, 0, 1, 1, 1}},   // OW 30
		{2, 12, 33, 16, 6, 1, 1, ConvParams{1, 1, 0, 0, 1, 1, 1}},   // pointwise, OW 16
		{2, 12, 2, 100, 6, 1, 5, ConvParams{1, 1, 0, 2, 1, 1, 1}},   // long rows
		{2, 12, 100, 2, 6, 5, 1, ConvParams{1, 1, 2, 0, 1, 1, 1}},   // tall
		{1, 12, 1, 1, 6, 1, 1, ConvParams{1, 1, 0, 0, 1, 1, 1}},     // 1x1 image
		{1, 12, 1, 1, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // 1x1 image, 3x3 pad 1
		{2, 12, 9, 9, 6, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},     // plain
		{2, 12, 9, 9, 6, 3, 3, ConvParams{1, 1, 4, 4, 1, 1, 1}},     // pad 4
		{2, 12, 9, 9, 6, 3, 3, ConvParams{1, 1, 1, 1, 4, 4, 1}},     // dilation 4
		{2, 12, 9, 9, 6, 3, 3, ConvParams{1, 1, 0, 0, 4, 4, 1}},     // dilation 4, OH 1
		{2, 12, 9, 9, 6, 9, 9, ConvParams{1, 1, 0, 0, 1, 1, 1}},     // kernel = image
		{2, 12, 9, 9, 6, 9, 9, ConvParams{1, 1, 4, 4, 1, 1, 1}},     // kernel = image, same size
	}
	for ci, tc := range cases {
		xs, ws := [4]int{tc.N, tc.C, tc.H, tc.W}, [4]int{tc.O, tc.C / tc.p.Groups, tc.KH, tc.KW}
		x := randF32(r, tc.N*tc.C*tc.H*tc.W)
		w := randF32(r, tc.O*(tc.C/tc.p.Groups)*tc.KH*tc.KW)
		_, OH, OW := naiveConv(x[:tc.C*tc.H*tc.W], w, nil, 1, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		ys := [4]int{tc.N, tc.O, OH, OW}
		gy := randF32(r, tc.N*tc.O*OH*OW)
		g := convGeomOf(t, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		input := g.Cg >= f32DotMR
		if !convF32GradOK(g, tc.p, input) {
			t.Fatalf("case %d: expected the implicit gradients to take %+v", ci, g)
		}
		run := func(implicit bool) (gx, gw, gb []float32) {
			convImplicit = implicit
			defer func() { convImplicit = true }()
			gw, gb = make([]float32, len(w)), make([]float32, tc.O)
			gwt, gbt := contig4(gw, ws), f32Tensor(gb, []int64{int64(tc.O)}, []int64{1})
			var gxt *Tensor
			if input {
				gx = make([]float32, len(x))
				for i := range gx {
					gx[i] = float32(math.NaN()) // every element must be written
				}
				v := contig4(gx, xs)
				gxt = &v
			}
			if err := Conv2dBackward(gxt, &gwt, &gbt, contig4(gy, ys), contig4(x, xs), contig4(w, ws), tc.p); err != nil {
				t.Fatal(err)
			}
			return
		}
		gx, gw, gb := run(true)
		rx, rw, rb := run(false)
		closeToScale(t, ci, "weight", gw, rw)
		closeToScale(t, ci, "bias", gb, rb)
		if input {
			closeToScale(t, ci, "input", gx, rx)
		}
	}
}

// closeToScale compares two float32 sums of many products computed in different orders:
// the rounding error grows with the size of the terms, not of the (possibly cancelled)
// result, so the bound is relative to the largest value of the tensor.
func closeToScale(t *testing.T, ci int, name string, got, want []float32) {
	t.Helper()
	scale := 1.0
	for _, v := range want {
		scale = max(scale, math.Abs(float64(v)))
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); !(d <= 2e-6*scale) {
			t.Fatalf("case %d: %s gradient element %d: implicit %v, im2col %v", ci, name, i, got[i], want[i])
		}
	}
}

// Infinities and NaNs reach exactly the gradients they reach on the im2col path: the
// padded grid's extra columns, which the kernels compute over, never add 0*inf.
func TestConvGradImplicitNonFinite(t *testing.T) {
	needF32Dot(t)
	defer setF32Dot(true)()
	defer setConvDirect(false)() // these test the paths behind it
	r := rand.New(rand.NewSource(13))
	N, C, H, W, O := 2, 12, 6, 7, 6
	p := ConvParams{1, 1, 1, 1, 1, 1, 1}
	xs, ws, ys := [4]int{N, C, H, W}, [4]int{O, C, 3, 3}, [4]int{N, O, H, W}
	x, w, gy := randF32(r, N*C*H*W), randF32(r, O*C*9), randF32(r, N*O*H*W)
	x[W-1] = float32(math.Inf(1))             // last column of sample 0, channel 0
	x[C*H*W+W] = float32(math.Inf(-1))        // first column of sample 1
	w[4] = float32(math.Inf(1))               // centre tap of output channel 0
	gy[(O*H*W)+2*W+W-1] = float32(math.NaN()) // last column of sample 1, channel 0
	run := func(implicit bool) (gx, gw []float32) {
		convImplicit = implicit
		defer func() { convImplicit = true }()
		gx, gw = make([]float32, len(x)), make([]float32, len(w))
		gxt, gwt := contig4(gx, xs), contig4(gw, ws)
		if err := Conv2dBackward(&gxt, &gwt, nil, contig4(gy, ys), contig4(x, xs), contig4(w, ws), p); err != nil {
			t.Fatal(err)
		}
		return
	}
	gx, gw := run(true)
	rx, rw := run(false)
	// Without padding the grid's extra columns of the last row, shifted by the last tap,
	// fall on the next channel's first row: an infinite weight of channel 0 must not
	// reach channel 1 there.
	p = ConvParams{1, 1, 0, 0, 1, 1, 1}
	ys = [4]int{N, O, H - 2, W - 2}
	w = randF32(r, O*C*9)
	w[8] = float32(math.Inf(1)) // output channel 0, input channel 0, tap (2, 2)
	x, gy = randF32(r, N*C*H*W), randF32(r, N*O*(H-2)*(W-2))
	gx2, gw2 := run(true)
	rx2, rw2 := run(false)
	for i := H * W; i < 2*H*W; i++ { // channel 1 of sample 0
		if math.IsNaN(float64(gx2[i])) || math.IsInf(float64(gx2[i]), 0) {
			t.Fatalf("channel 1 element %d is %v (im2col %v)", i-H*W, gx2[i], rx2[i])
		}
	}
	for name, pair := range map[string][2][]float32{"input": {gx, rx}, "weight": {gw, rw}, "input, no padding": {gx2, rx2},
		"weight, no padding": {gw2, rw2}} {
		for i := range pair[0] {
			a, b := float64(pair[0][i]), float64(pair[1][i])
			if math.IsNaN(a) != math.IsNaN(b) || math.IsInf(a, 1) != math.IsInf(b, 1) || math.IsInf(a, -1) != math.IsInf(b, -1) {
				t.Fatalf("%s gradient element %d: implicit %v, im2col %v", name, i, a, b)
			}
		}
	}
}

// The weight gradient's sums depend on the sample split, not on timing: two runs agree
// bit for bit.
func TestConvGradImplicitDeterministic(t *testing.T) {
	needF32Dot(t)
	r := rand.New(rand.NewSource(14))
	N, C, H, W, O := 8, 16, 14, 14, 32
	p := ConvParams{1, 1, 1, 1, 1, 1, 1}
	xs, ws, ys := [4]int{N, C, H, W}, [4]int{O, C, 3, 3}, [4]int{N, O, H, W}
	x, w, gy := randF32(r, N*C*H*W), randF32(r, O*C*9), randF32(r, N*O*H*W)
	var first []float32
	for run := 0; run < 5; run++ {
		gw, gx := make([]float32, len(w)), make([]float32, len(x))
		gwt, gxt := contig4(gw, ws), contig4(gx, xs)
		if err := Conv2dBackward(&gxt, &gwt, nil, contig4(gy, ys), contig4(x, xs), contig4(w, ws), p); err != nil {
			t.Fatal(err)
		}
		all := append(gw, gx...)
		if first == nil {
			first = all
			continue
		}
		for i := range all {
			if math.Float32bits(all[i]) != math.Float32bits(first[i]) {
				t.Fatalf("run %d element %d: %v, first run %v", run, i, all[i], first[i])
			}
		}
	}
}

// Routing: stride 2, the kernel switched off, huge weight tiles, and the input gradient
// with fewer than 12 channels a group stay on the im2col path.
func TestConvGradImplicitRouting(t *testing.T) {
	g := convGeom{N: 1, C: 16, H: 14, W: 14, O: 32, KH: 3, KW: 3, OH: 14, OW: 14, G: 1, Cg: 16, Og: 32, Kc: 144, P: 196}
	s1 := ConvParams{1, 1, 1, 1, 1, 1, 1}
	if f32DotOn && !convF32GradOK(g, s1, true) {
		t.Fatal("layer 2 of the CNN should take the implicit gradients")
	}
	if convF32GradOK(g, ConvParams{2, 2, 1, 1, 1, 1, 1}, false) {
		t.Fatal("stride 2 must use im2col")
	}
	g1 := g
	g1.C, g1.Cg, g1.Kc = 1, 1, 9
	if f32DotOn && !convF32GradOK(g1, s1, false) {
		t.Fatal("layer 1's weight gradient should take the implicit path")
	}
	if convF32GradOK(g1, s1, true) {
		t.Fatal("an input gradient with one channel must use im2col")
	}
	big := g
	big.O, big.Og, big.C, big.Cg, big.Kc = 512, 512, 512, 512, 512*9
	if convF32GradOK(big, s1, false) {
		t.Fatal("a 512x512x3x3 weight gradient must use im2col (lane sums too large)")
	}
	defer setF32Dot(false)()
	if convF32GradOK(g, s1, true) {
		t.Fatal("HPUSIM_F32DOT=0 must use im2col")
	}
}

// Input, output gradient and input gradient may be channel slices of larger tensors:
// dense planes, but a sample stride longer than a sample. The weight gradient's blocks
// of samples must follow the stride, not assume consecutive samples.
func TestConvGradImplicitSampleStride(t *testing.T) {
	needF32Dot(t)
	defer setF32Dot(true)()
	defer setConvDirect(false)() // these test the paths behind it
	r := rand.New(rand.NewSource(15))
	N, C, H, W, O := 5, 12, 9, 10, 8
	p := ConvParams{1, 1, 1, 1, 1, 1, 1}
	sliced := func(buf []float32, c, h, w int) Tensor { // channels [0, c) of [N, 2c, h, w]
		return f32Tensor(buf, []int64{int64(N), int64(c), int64(h), int64(w)},
			[]int64{int64(2 * c * h * w), int64(h * w), int64(w), 1})
	}
	x, gy, w := randF32(r, N*2*C*H*W), randF32(r, N*2*O*H*W), randF32(r, O*C*9)
	run := func(implicit bool) (gx, gw []float32) {
		convImplicit = implicit
		defer func() { convImplicit = true }()
		gx, gw = make([]float32, N*2*C*H*W), make([]float32, len(w))
		gxt, gwt := sliced(gx, C, H, W), contig4(gw, [4]int{O, C, 3, 3})
		if err := Conv2dBackward(&gxt, &gwt, nil, sliced(gy, O, H, W), sliced(x, C, H, W), contig4(w, [4]int{O, C, 3, 3}), p); err != nil {
			t.Fatal(err)
		}
		return
	}
	gx, gw := run(true)
	rx, rw := run(false)
	closeToScale(t, 0, "weight", gw, rw)
	closeToScale(t, 0, "input", gx, rx) // the other channels stay zero in both
}
