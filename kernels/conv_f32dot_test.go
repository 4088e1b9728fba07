package kernels

import (
	"math"
	"math/rand"
	"testing"
)

// The implicit-GEMM forward must give the im2col path's bits (same products, same k order
// and blocks) and agree with the naive loop, over padding, dilation, groups, kernel
// shapes, row counts that leave a partial 12-row panel, inner dimensions past one
// 256-block, grids that end mid-panel, and bias or none.
func TestConvImplicitMatchesIm2col(t *testing.T) {
	needF32Dot(t)
	defer setF32Dot(true)()
	defer setConvDirect(false)() // these test the paths behind it
	r := rand.New(rand.NewSource(11))
	cases := []struct {
		N, C, H, W, O, KH, KW int
		p                     ConvParams
		bias                  bool
	}{
		{3, 16, 14, 14, 32, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}, true}, // the reference CNN's layer 2
		{2, 32, 9, 11, 20, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}, false}, // Kc 288: two k-blocks; 20 rows
		{2, 8, 10, 7, 13, 5, 5, ConvParams{1, 1, 2, 2, 1, 1, 1}, true},   // 5x5, pad 2
		{1, 12, 12, 13, 16, 3, 3, ConvParams{1, 1, 0, 0, 1, 1, 1}, true}, // no padding
		{2, 6, 13, 12, 9, 3, 3, ConvParams{1, 1, 2, 3, 2, 2, 1}, false},  // dilation 2, pads 2/3
		{2, 24, 6, 6, 24, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 2}, true},   // 2 groups
		{1, 40, 5, 4, 12, 1, 1, ConvParams{1, 1, 0, 0, 1, 1, 1}, false},  // pointwise
		{2, 16, 7, 20, 33, 2, 3, ConvParams{1, 1, 1, 0, 1, 1, 1}, true},  // even kernel, 33 rows
	}
	for ci, tc := range cases {
		x := randF32(r, tc.N*tc.C*tc.H*tc.W)
		w := randF32(r, tc.O*(tc.C/tc.p.Groups)*tc.KH*tc.KW)
		var b []float32
		if tc.bias {
			b = randF32(r, tc.O)
		}
		want, OH, OW := naiveConv(x, w, b, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		run := func(implicit bool) []float32 {
			convImplicit = implicit
			defer func() { convImplicit = true }()
			y := make([]float32, len(want))
			var bt *Tensor
			if b != nil {
				v := f32Tensor(b, []int64{int64(tc.O)}, []int64{1})
				bt = &v
			}
			err := Conv2dForward(contig4(y, [4]int{tc.N, tc.O, OH, OW}), contig4(x, [4]int{tc.N, tc.C, tc.H, tc.W}),
				contig4(w, [4]int{tc.O, tc.C / tc.p.Groups, tc.KH, tc.KW}), bt, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			return y
		}
		g, _ := convGeometry(contig4(x, [4]int{tc.N, tc.C, tc.H, tc.W}), contig4(w, [4]int{tc.O, tc.C / tc.p.Groups, tc.KH, tc.KW}),
			[]int64{int64(tc.N), int64(tc.O), int64(OH), int64(OW)}, tc.p)
		if !convF32DotOK(g, tc.p) {
			t.Fatalf("case %d: expected the implicit path to take %+v", ci, g)
		}
		got, ref := run(true), run(false)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
				t.Fatalf("case %d: element %d: implicit %v, im2col %v", ci, i, got[i], ref[i])
			}
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("case %d: element %d: %v, naive %v", ci, i, got[i], want[i])
			}
		}
	}
}

// Strides above 1, short inner dimensions and the float32 kernel switched off stay on
// the im2col path.
func TestConvImplicitRouting(t *testing.T) {
	g := convGeom{N: 1, C: 16, H: 14, W: 14, O: 32, KH: 3, KW: 3, OH: 14, OW: 14, G: 1, Cg: 16, Og: 32, Kc: 144, P: 196}
	s1 := ConvParams{1, 1, 1, 1, 1, 1, 1}
	if f32DotOn && !convF32DotOK(g, s1) {
		t.Fatal("layer 2 of the CNN should take the implicit path")
	}
	if convF32DotOK(g, ConvParams{2, 2, 1, 1, 1, 1, 1}) {
		t.Fatal("stride 2 must use im2col")
	}
	g1 := g
	g1.C, g1.Cg, g1.Kc = 1, 1, 9
	if convF32DotOK(g1, s1) {
		t.Fatal("Kc 9 must use im2col")
	}
	defer setF32Dot(false)()
	if convF32DotOK(g, s1) {
		t.Fatal("HPUSIM_F32DOT=0 must use im2col")
	}
}
