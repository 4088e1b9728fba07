package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// setConvDirect switches the direct convolution on or off and returns the undo.
func setConvDirect(on bool) func() {
	old := convDirect
	convDirect = on
	return func() { convDirect = old }
}

// needDconv skips a test of the float32 direct kernels on CPUs that have neither the
// AVX-512 nor the AVX2 + FMA ones.
func needDconv(t testing.TB) {
	if !dconvCPU() {
		t.Skip("no AVX-512F or AVX2+FMA (or no cgo)")
	}
}

type directCase struct {
	N, C, H, W, O, KH, KW int
	p                     ConvParams
}

// directCases: the reference CNN's layer 2, channel counts that leave partial 16-lane
// vectors and 32-channel blocks, row lengths split over several position tiles (and
// one position), stride 2 along H (forward only), dilation, uneven and zero padding,
// groups, 1x1, 5x5 and kernels as large as the image.
var directCases = []directCase{
	{3, 16, 14, 14, 32, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{2, 16, 9, 11, 20, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{2, 12, 10, 7, 13, 5, 5, ConvParams{1, 1, 2, 2, 1, 1, 1}},
	{1, 12, 12, 13, 40, 3, 3, ConvParams{1, 1, 0, 0, 1, 1, 1}},
	{2, 14, 13, 12, 17, 3, 3, ConvParams{1, 1, 2, 3, 2, 2, 1}},
	{2, 24, 6, 6, 24, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 2}},
	{1, 40, 5, 4, 16, 1, 1, ConvParams{1, 1, 0, 0, 1, 1, 1}},
	{2, 16, 7, 37, 33, 2, 3, ConvParams{1, 1, 1, 0, 1, 1, 1}},
	{2, 12, 3, 29, 48, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{2, 12, 3, 15, 16, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{2, 13, 5, 1, 12, 3, 1, ConvParams{1, 1, 1, 0, 1, 1, 1}},
	{2, 12, 9, 9, 64, 9, 9, ConvParams{1, 1, 4, 4, 1, 1, 1}},
	{2, 12, 9, 9, 12, 9, 9, ConvParams{1, 1, 0, 0, 1, 1, 1}},
	{3, 12, 9, 40, 28, 3, 3, ConvParams{1, 1, 2, 1, 1, 1, 1}},
	{2, 16, 11, 9, 32, 3, 3, ConvParams{2, 1, 1, 1, 1, 1, 1}}, // stride 2 along H (forward only)
	{2, 16, 12, 9, 20, 3, 3, ConvParams{3, 1, 0, 1, 2, 1, 1}}, // stride 3, dilation 2 along H
	{2, 16, 7, 9, 32, 3, 3, ConvParams{1, 1, 3, 1, 1, 1, 1}},  // pad past the kernel: no dx here
	{1, 64, 4, 4, 48, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 4}},  // 4 groups of 16 -> 12
}

func directSetup(t *testing.T, r *rand.Rand, tc directCase) (x, w, gy []float32, g convGeom, OH, OW int) {
	x = randF32(r, tc.N*tc.C*tc.H*tc.W)
	w = randF32(r, tc.O*(tc.C/tc.p.Groups)*tc.KH*tc.KW)
	_, OH, OW = naiveConv(x[:tc.C*tc.H*tc.W], w, nil, 1, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
	gy = randF32(r, tc.N*tc.O*OH*OW)
	g = convGeomOf(t, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
	return
}

// The direct forward against the naive float64 loop and against the other paths.
func TestConvDirectForward(t *testing.T) {
	needDconv(t)
	defer setF32Dot(f32DotCPU)() // the AVX-512 micro-kernel where the CPU has it
	r := rand.New(rand.NewSource(21))
	for ci, tc := range directCases {
		x, w, _, g, OH, OW := directSetup(t, r, tc)
		b := randF32(r, tc.O)
		if !dconvChainOK(g.Kc) {
			continue // too many taps for the AVX2 kernels
		}
		if !convDirectFwdOK(g, tc.p) {
			t.Fatalf("case %d: expected the direct forward to take %+v", ci, g)
		}
		want, _, _ := naiveConv(x, w, b, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		run := func(direct bool) []float32 {
			defer setConvDirect(direct)()
			y := make([]float32, len(want))
			for i := range y {
				y[i] = float32(math.NaN()) // every element must be written
			}
			bt := f32Tensor(b, []int64{int64(tc.O)}, []int64{1})
			err := Conv2dForward(contig4(y, [4]int{tc.N, tc.O, OH, OW}), contig4(x, [4]int{tc.N, tc.C, tc.H, tc.W}),
				contig4(w, [4]int{tc.O, tc.C / tc.p.Groups, tc.KH, tc.KW}), &bt, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			return y
		}
		got, ref := run(true), run(false)
		closeToScale(t, ci, "forward (vs other paths)", got, ref)
		closeToScale(t, ci, "forward (vs float64)", got, want)
	}
}

// The direct gradients against the other paths (themselves checked against the naive
// adjoints), each gradient alone and all together; the input gradient is fully written.
func TestConvDirectBackward(t *testing.T) {
	needDconv(t)
	defer setF32Dot(f32DotCPU)() // the AVX-512 micro-kernel where the CPU has it
	r := rand.New(rand.NewSource(22))
	for ci, tc := range directCases {
		x, w, gy, g, OH, OW := directSetup(t, r, tc)
		xs, ws, ys := [4]int{tc.N, tc.C, tc.H, tc.W}, [4]int{tc.O, tc.C / tc.p.Groups, tc.KH, tc.KW}, [4]int{tc.N, tc.O, OH, OW}
		weight := tc.p.StrideH == 1 && g.Kc >= dconvMinK
		input := weight && tc.p.PadH <= tc.p.DilH*(tc.KH-1) && tc.p.PadW <= tc.p.DilW*(tc.KW-1) && g.Cg >= dconvMinO &&
			g.Og*g.KH*g.KW >= dconvMinK && dconvChainOK(g.Og*g.KH*g.KW)
		if convDirectBwdOK(g, tc.p, false, true) != weight || convDirectBwdOK(g, tc.p, true, false) != input {
			t.Fatalf("case %d: routing of %+v %+v: weight %v input %v", ci, g, tc.p, weight, input)
		}
		for _, want := range [][2]bool{{true, true}, {true, false}, {false, true}} {
			wantW, wantX := want[0] && weight, want[1] && input
			if !wantW && !wantX {
				continue
			}
			run := func(direct bool) (gx, gw, gb []float32) {
				defer setConvDirect(direct)()
				var gxt, gwt, gbt *Tensor
				if wantW {
					gw, gb = make([]float32, len(w)), make([]float32, tc.O)
					a, b := contig4(gw, ws), f32Tensor(gb, []int64{int64(tc.O)}, []int64{1})
					gwt, gbt = &a, &b
				}
				if wantX {
					gx = make([]float32, len(x))
					for i := range gx {
						gx[i] = float32(math.NaN())
					}
					v := contig4(gx, xs)
					gxt = &v
				}
				if err := Conv2dBackward(gxt, gwt, gbt, contig4(gy, ys), contig4(x, xs), contig4(w, ws), tc.p); err != nil {
					t.Fatal(err)
				}
				return
			}
			gx, gw, gb := run(true)
			rx, rw, rb := run(false)
			closeToScale(t, ci, "weight", gw, rw)
			closeToScale(t, ci, "bias", gb, rb)
			closeToScale(t, ci, "input", gx, rx)
		}
	}
}

// Channel slices (dense planes, sample stride longer than a sample) in every operand.
func TestConvDirectSampleStride(t *testing.T) {
	needDconv(t)
	defer setF32Dot(f32DotCPU)() // the AVX-512 micro-kernel where the CPU has it
	r := rand.New(rand.NewSource(23))
	N, C, H, W, O := 5, 16, 9, 10, 20
	p := ConvParams{1, 1, 1, 1, 1, 1, 1}
	sliced := func(buf []float32, c, h, w int) Tensor { // channels [0, c) of [N, 2c, h, w]
		return f32Tensor(buf, []int64{int64(N), int64(c), int64(h), int64(w)},
			[]int64{int64(2 * c * h * w), int64(h * w), int64(w), 1})
	}
	x, gy, w := randF32(r, N*2*C*H*W), randF32(r, N*2*O*H*W), randF32(r, O*C*9)
	run := func(direct bool) (y, gx, gw []float32) {
		defer setConvDirect(direct)()
		y, gx, gw = make([]float32, N*2*O*H*W), make([]float32, N*2*C*H*W), make([]float32, len(w))
		if err := Conv2dForward(sliced(y, O, H, W), sliced(x, C, H, W), contig4(w, [4]int{O, C, 3, 3}), nil, p); err != nil {
			t.Fatal(err)
		}
		gxt, gwt := sliced(gx, C, H, W), contig4(gw, [4]int{O, C, 3, 3})
		if err := Conv2dBackward(&gxt, &gwt, nil, sliced(gy, O, H, W), sliced(x, C, H, W), contig4(w, [4]int{O, C, 3, 3}), p); err != nil {
			t.Fatal(err)
		}
		return
	}
	y, gx, gw := run(true)
	ry, rx, rw := run(false)
	closeToScale(t, 0, "forward", y, ry) // the other channels stay zero in both
	closeToScale(t, 0, "weight", gw, rw)
	closeToScale(t, 0, "input", gx, rx)
}

// Layers too small for the register tiles keep the other paths.
func TestConvDirectRouting(t *testing.T) {
	g := convGeom{N: 1, C: 1, H: 28, W: 28, O: 16, KH: 3, KW: 3, OH: 28, OW: 28, G: 1, Cg: 1, Og: 16, Kc: 9, P: 784}
	s1 := ConvParams{1, 1, 1, 1, 1, 1, 1}
	if convDirectFwdOK(g, s1) || convDirectBwdOK(g, s1, false, true) {
		t.Fatal("the CNN's first layer (Kc 9) must keep im2col")
	}
	dw := convGeom{N: 1, C: 32, H: 14, W: 14, O: 32, KH: 3, KW: 3, OH: 14, OW: 14, G: 32, Cg: 1, Og: 1, Kc: 9, P: 196}
	if convDirectFwdOK(dw, s1) || convDirectBwdOK(dw, s1, true, true) {
		t.Fatal("a depthwise convolution must keep the other paths")
	}
	g2 := convGeom{N: 1, C: 16, H: 14, W: 14, O: 32, KH: 3, KW: 3, OH: 14, OW: 14, G: 1, Cg: 16, Og: 32, Kc: 144, P: 196}
	if convDirectFwdOK(g2, ConvParams{1, 2, 1, 1, 1, 1, 1}) {
		t.Fatal("stride 2 along W must keep the other paths")
	}
	if convDirectBwdOK(g2, ConvParams{2, 2, 1, 1, 1, 1, 1}, false, true) {
		t.Fatal("a strided backward must keep the other paths")
	}
	g3 := convGeom{N: 1, C: 64, H: 8, W: 8, O: 64, KH: 3, KW: 3, OH: 8, OW: 8, G: 1, Cg: 64, Og: 64, Kc: 576, P: 64}
	if !f32DotCPU && (convDirectFwdOK(g3, s1) || convDirectBwdOK(g3, s1, true, false)) {
		t.Fatal("the AVX2 kernels must not sum 576 taps in one chain")
	}
	if dconvCPU() && (!convDirectFwdOK(g2, s1) || !convDirectBwdOK(g2, s1, true, true)) {
		t.Fatal("the CNN's second layer should run direct")
	}
}

// closeBF16 compares bfloat16 results summed in different orders before one rounding:
// within two bf16 ulps of the tensor's largest value.
func closeBF16(t *testing.T, ci int, name string, got, want []uint16) {
	t.Helper()
	scale := 1.0
	for _, v := range want {
		scale = max(scale, math.Abs(float64(BF16ToF32(v))))
	}
	for i := range want {
		a, b := float64(BF16ToF32(got[i])), float64(BF16ToF32(want[i]))
		if d := math.Abs(a - b); !(d <= scale/64) {
			t.Fatalf("case %d: %s element %d: direct %v, generic %v", ci, name, i, a, b)
		}
	}
}

// The bfloat16 direct paths against the generic path (float32 sums of the widened
// operands, rounded once), forward and each gradient, over directCases.
func TestConvDirectBF16(t *testing.T) {
	if !bf16DotCPU {
		t.Skip("no AVX512-BF16")
	}
	r := rand.New(rand.NewSource(24))
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
	t1 := func(p []uint16) Tensor {
		return Tensor{Ptr: unsafe.Pointer(&p[0]), DType: BFloat16, Sizes: []int64{int64(len(p))}, Strides: []int64{1}}
	}
	// plus the CNN's first layer and a 1-channel 3x3 of 20 channels: weight gradient only
	extra := []directCase{{2, 1, 28, 28, 16, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
		{2, 1, 9, 10, 20, 3, 3, ConvParams{1, 1, 0, 1, 1, 1, 1}}}
	for ci, tc := range append(append([]directCase{}, directCases...), extra...) {
		g := convGeomOf(t, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		if ci < len(directCases) && !convDirectBF16FwdOK(g, tc.p) {
			t.Fatalf("case %d: expected the direct bf16 forward to take %+v", ci, g)
		}
		weight := convDirectBF16BwdOK(g, tc.p, false, true)
		input := convDirectBF16BwdOK(g, tc.p, true, false)
		if weight != (tc.p.StrideH == 1 && g.OW%2 == 0 && g.Kc >= dconvBF16WeightMinK) || (ci >= len(directCases) && !weight) {
			t.Fatalf("case %d: bf16 weight-gradient routing %v", ci, weight)
		}
		xs, ws, ys := [4]int{tc.N, tc.C, tc.H, tc.W}, [4]int{tc.O, tc.C / tc.p.Groups, tc.KH, tc.KW}, [4]int{tc.N, tc.O, g.OH, g.OW}
		x, w, b, gy := bf(tc.N*tc.C*tc.H*tc.W), bf(tc.O*g.Cg*tc.KH*tc.KW), bf(tc.O), bf(tc.N*tc.O*g.OH*g.OW)
		run := func(direct bool, wantX, wantW bool) (y, gx, gw, gb []uint16) {
			defer setConvDirect(direct)()
			old := convPerSample
			convPerSample = direct
			defer func() { convPerSample = old }()
			y = make([]uint16, len(gy))
			bt := t1(b)
			if err := Conv2dForward(t4(y, ys), t4(x, xs), t4(w, ws), &bt, tc.p); err != nil {
				t.Fatal(err)
			}
			var gxt, gwt, gbt *Tensor
			if wantX {
				gx = make([]uint16, len(x))
				for i := range gx {
					gx[i] = 0x7fc0 // every element must be written
				}
				v := t4(gx, xs)
				gxt = &v
			}
			if wantW {
				gw, gb = make([]uint16, len(w)), make([]uint16, tc.O)
				a, c := t4(gw, ws), t1(gb)
				gwt, gbt = &a, &c
			}
			if gxt != nil || gwt != nil {
				if err := Conv2dBackward(gxt, gwt, gbt, t4(gy, ys), t4(x, xs), t4(w, ws), tc.p); err != nil {
					t.Fatal(err)
				}
			}
			return
		}
		y, gx, gw, gb := run(true, input, weight)
		ry, rx, rw, rb := run(false, input, weight)
		closeBF16(t, ci, "forward", y, ry)
		closeBF16(t, ci, "input gradient", gx, rx)
		closeBF16(t, ci, "weight gradient", gw, rw)
		closeBF16(t, ci, "bias gradient", gb, rb)
	}
}

// The direct weight gradient sums fixed blocks of samples: the same bits on one worker
// as on two, over batch sizes that split into uneven blocks.
func TestConvDirectWorkersDeterministic(t *testing.T) {
	needDconv(t)
	r := rand.New(rand.NewSource(25))
	for _, n := range []int{1, 3, 17, 40} {
		tc := directCase{n, 16, 9, 10, 20, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}}
		x, w, gy, g, OH, OW := directSetup(t, r, tc)
		if !convDirectBwdOK(g, tc.p, true, true) {
			t.Fatalf("n %d: expected the direct backward", n)
		}
		run := func(workers int) (gx, gw []float32) {
			gx, gw = make([]float32, len(x)), make([]float32, len(w))
			withWorkers(t, workers, func() {
				gxt, gwt := contig4(gx, [4]int{n, 16, 9, 10}), contig4(gw, [4]int{20, 16, 3, 3})
				if err := Conv2dBackward(&gxt, &gwt, nil, contig4(gy, [4]int{n, 20, OH, OW}), contig4(x, [4]int{n, 16, 9, 10}),
					contig4(w, [4]int{20, 16, 3, 3}), tc.p); err != nil {
					t.Fatal(err)
				}
			})
			return
		}
		gx1, gw1 := run(1)
		gx2, gw2 := run(2)
		for i := range gw1 {
			if math.Float32bits(gw1[i]) != math.Float32bits(gw2[i]) {
				t.Fatalf("n %d: weight gradient %d differs: %v on 1 worker, %v on 2", n, i, gw1[i], gw2[i])
			}
		}
		for i := range gx1 {
			if math.Float32bits(gx1[i]) != math.Float32bits(gx2[i]) {
				t.Fatalf("n %d: input gradient %d differs", n, i)
			}
		}
	}
}

func TestConvDirectWeightBlocks(t *testing.T) {
	for _, c := range []struct{ n, size, nb, bs int }{
		{64, 4608, 16, 4}, {3, 10, 3, 1}, {17, 10, 9, 2}, {1, 1 << 30, 1, 1}, {64, 1 << 21, 2, 32}, {0, 5, 0, 1},
	} {
		if nb, bs := dconvWeightBlocks(c.n, c.size); nb != c.nb || bs != c.bs {
			t.Fatalf("%+v: got %d blocks of %d", c, nb, bs)
		}
	}
}
