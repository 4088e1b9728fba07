package kernels

import (
	"math"
	"math/rand"
	"testing"
)

// lanesCases: the reference CNN's first layer, row lengths below, at and past a 16-lane
// vector (masked tails), channel counts that leave a partial 16-channel block, stride 2
// and 3 along H, dilation, padding larger than half the kernel, asymmetric padding,
// groups (two channels a group), a 5x5 kernel and a kernel as large as the image.
var lanesCases = []directCase{
	{3, 1, 28, 28, 16, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{2, 1, 9, 5, 8, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{2, 1, 7, 16, 19, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{1, 3, 12, 33, 40, 3, 3, ConvParams{1, 1, 0, 0, 1, 1, 1}},
	{2, 2, 13, 12, 17, 3, 3, ConvParams{2, 1, 2, 3, 2, 2, 1}},
	{2, 1, 12, 9, 9, 3, 3, ConvParams{3, 1, 3, 1, 1, 2, 1}},
	{2, 1, 10, 7, 12, 5, 5, ConvParams{1, 1, 4, 3, 1, 1, 1}},
	{2, 4, 6, 6, 24, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 2}},
	{1, 1, 5, 4, 16, 5, 4, ConvParams{1, 1, 0, 0, 1, 1, 1}},
	{2, 1, 1, 40, 8, 1, 3, ConvParams{1, 1, 0, 1, 1, 1, 1}},
}

// The lanes forward against the naive float64 loop and against the im2col path; every
// output element is written.
func TestConvLanesForward(t *testing.T) {
	needF32Dot(t)
	defer setF32Dot(true)()
	r := rand.New(rand.NewSource(31))
	for ci, tc := range lanesCases {
		x, w, _, g, OH, OW := directSetup(t, r, tc)
		if !convLanesFwdOK(g, tc.p) {
			t.Fatalf("case %d: expected the lanes forward to take %+v", ci, g)
		}
		b := randF32(r, tc.O)
		want, _, _ := naiveConv(x, w, b, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		for _, bias := range []bool{true, false} {
			if !bias {
				want, _, _ = naiveConv(x, w, nil, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
			}
			run := func(direct bool) []float32 {
				defer setConvDirect(direct)()
				y := make([]float32, len(want))
				for i := range y {
					y[i] = float32(math.NaN())
				}
				var bt *Tensor
				if bias {
					t := f32Tensor(b, []int64{int64(tc.O)}, []int64{1})
					bt = &t
				}
				err := Conv2dForward(contig4(y, [4]int{tc.N, tc.O, OH, OW}), contig4(x, [4]int{tc.N, tc.C, tc.H, tc.W}),
					contig4(w, [4]int{tc.O, tc.C / tc.p.Groups, tc.KH, tc.KW}), bt, tc.p)
				if err != nil {
					t.Fatal(err)
				}
				return y
			}
			got, ref := run(true), run(false)
			closeToScale(t, ci, "forward (vs im2col)", got, ref)
			closeToScale(t, ci, "forward (vs float64)", got, want)
		}
	}
}

// Shapes the lanes forward must leave to the other paths.
func TestConvLanesRouting(t *testing.T) {
	for _, tc := range []struct {
		C, O, KH, KW int
		p            ConvParams
	}{
		{1, 16, 3, 3, ConvParams{1, 2, 1, 1, 1, 1, 1}},  // stride 2 along W
		{1, 4, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},   // too few channels
		{16, 32, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}}, // 144 taps: the direct kernel
		{16, 16, 1, 1, ConvParams{1, 1, 0, 0, 1, 1, 1}}, // pointwise: a GEMM
	} {
		g := convGeomOf(t, 2, tc.C, 8, 8, tc.O, tc.KH, tc.KW, tc.p)
		if convLanesFwdOK(g, tc.p) {
			t.Errorf("%+v: the lanes forward should not take it", tc)
		}
	}
}
