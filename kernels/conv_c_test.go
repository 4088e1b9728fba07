package kernels

import (
	"math"
	"math/rand"
	"testing"
)

// convCCases are awkward geometries for comparing the C helpers of the per-sample path
// (conv_cgo.go) with the Go loops: strides, paddings larger than the kernel reach,
// dilation, groups, 1x1 kernels that are not pointwise, non-square and odd sizes, and
// kernels that overhang the input so whole output rows or columns read only padding.
var convCCases = []struct {
	N, C, H, W, O, KH, KW int
	p                     ConvParams
}{
	{2, 3, 8, 7, 4, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{2, 2, 9, 9, 4, 3, 3, ConvParams{2, 2, 0, 0, 1, 1, 1}},
	{1, 3, 7, 9, 5, 3, 5, ConvParams{1, 1, 2, 2, 1, 1, 1}},
	{2, 4, 11, 10, 6, 3, 3, ConvParams{1, 1, 2, 2, 2, 2, 2}},
	{3, 4, 9, 9, 6, 3, 2, ConvParams{2, 1, 0, 2, 2, 1, 2}},
	{2, 6, 5, 7, 6, 1, 1, ConvParams{2, 2, 0, 0, 1, 1, 3}},
	{2, 2, 5, 6, 3, 1, 1, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{2, 2, 1, 11, 3, 1, 3, ConvParams{1, 2, 0, 1, 1, 2, 1}},
	{1, 2, 4, 3, 3, 5, 5, ConvParams{1, 1, 2, 2, 1, 1, 1}},
	{2, 3, 13, 12, 4, 3, 3, ConvParams{3, 2, 2, 1, 2, 3, 1}},
	{1, 1, 3, 3, 2, 3, 3, ConvParams{1, 1, 4, 3, 1, 1, 1}},
	{1, 2, 3, 6000, 3, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}}, // planes too wide to pad on the stack
	{1, 1, 2, 9000, 2, 2, 3, ConvParams{1, 1, 0, 2, 1, 2, 1}},
	{2, 2, 6, 8, 2, 3, 3, ConvParams{2, 1, 1, 1, 1, 1, 1}},
	{64, 1, 28, 28, 16, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
	{5, 16, 14, 14, 32, 3, 3, ConvParams{1, 1, 1, 1, 1, 1, 1}},
}

// specialF32 is n normal values with some NaNs, infinities, signed zeros and subnormals.
func specialF32(r *rand.Rand, n int) []float32 {
	x := randF32(r, n)
	sp := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.Copysign(0, -1)), 0, 1e-40, -3e38}
	for i := range x {
		if r.Intn(40) == 0 {
			x[i] = sp[r.Intn(len(sp))]
		}
	}
	return x
}

// sameF32 reports whether a and b hold the same bits, any two NaNs counting as equal.
func sameF32(t *testing.T, name string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: lengths %d, %d", name, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			t.Fatalf("%s[%d]: %v (%#x) vs %v (%#x)", name, i, a[i], math.Float32bits(a[i]), b[i], math.Float32bits(b[i]))
		}
	}
}

func convGeomOf(t *testing.T, N, C, H, W, O, KH, KW int, p ConvParams) convGeom {
	t.Helper()
	in := f32Tensor(make([]float32, 1), []int64{int64(N), int64(C), int64(H), int64(W)}, nil)
	wt := f32Tensor(make([]float32, 1), []int64{int64(O), int64(C / p.Groups), int64(KH), int64(KW)}, nil)
	OH := (H+2*p.PadH-p.DilH*(KH-1)-1)/p.StrideH + 1
	OW := (W+2*p.PadW-p.DilW*(KW-1)-1)/p.StrideW + 1
	g, err := convGeometry(in, wt, []int64{int64(N), int64(O), int64(OH), int64(OW)}, p)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The float32 helpers (C under cgo) against the Go loops, one sample and group at a time.
func TestConvCHelpersMatchGo(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for ci, tc := range convCCases {
		g := convGeomOf(t, 1, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		x := specialF32(r, g.C*g.H*g.W)
		for gi := 0; gi < g.G; gi++ {
			c1, c2 := specialF32(r, g.Kc*g.P), specialF32(r, g.Kc*g.P) // garbage to overwrite
			im2colF32(c1, x, g, tc.p, gi)
			im2colRows(c2, x, g, tc.p, gi, 1, 0, g.Kc)
			sameF32(t, "im2col", c1, c2)

			col := specialF32(r, g.Kc*g.P)
			d1, d2 := specialF32(r, g.C*g.H*g.W), make([]float32, g.C*g.H*g.W)
			copy(d2, d1)
			col2imF32(d1, col, g, tc.p, gi)
			col2imRows(d2, col, g, tc.p, gi, 1, 0, g.Cg)
			sameF32(t, "col2im", d1, d2)
		}
		y, b := specialF32(r, g.O*g.P), specialF32(r, g.O)
		y2 := append([]float32(nil), y...)
		convBiasAddF32(y, b, g.O, g.P)
		convBiasAddGo(y2, b, g.O, g.P)
		sameF32(t, "bias", y, y2)
		s1, s2 := specialF32(r, g.O), specialF32(r, g.O)
		convRowSumsF32(y, s1, g.O, g.P)
		convRowSumsGo(y, s2, g.O, g.P)
		sameF32(t, "rowsums", s1, s2)
		if t.Failed() {
			t.Fatalf("case %d", ci)
		}
	}
	// Row sums of every row count (the C version does rows eight at a time) and length.
	for o := 0; o <= 19; o++ {
		for _, p := range []int{0, 1, 7, 33} {
			dy := specialF32(r, o*p)
			s1, s2 := make([]float32, o), make([]float32, o)
			convRowSumsF32(dy, s1, o, p)
			convRowSumsGo(dy, s2, o, p)
			sameF32(t, "rowsums", s1, s2)
		}
	}
}

// Whole float32 convolutions, forward and all gradients, through the per-sample path
// with the C helpers and with the Go loops: bit-identical (NaNs aside).
func TestConvCMatchesGo(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	for ci, tc := range convCCases {
		g := convGeomOf(t, tc.N, tc.C, tc.H, tc.W, tc.O, tc.KH, tc.KW, tc.p)
		xs, ws, ys := [4]int{g.N, g.C, g.H, g.W}, [4]int{g.O, g.Cg, g.KH, g.KW}, [4]int{g.N, g.O, g.OH, g.OW}
		for _, special := range []bool{false, true} {
			gen := randF32
			if special {
				gen = specialF32
			}
			x, w, b, gy := gen(r, g.N*g.C*g.H*g.W), gen(r, g.O*g.Cg*g.KH*g.KW), gen(r, g.O), gen(r, g.N*g.O*g.P)
			bt := f32Tensor(b, []int64{int64(g.O)}, []int64{1})
			run := func(noC bool) (y, gx, gw, gb []float32) {
				old := convNoC
				convNoC = noC
				defer func() { convNoC = old }()
				y, gx, gw, gb = make([]float32, len(gy)), make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.O)
				if err := Conv2dForward(contig4(y, ys), contig4(x, xs), contig4(w, ws), &bt, tc.p); err != nil {
					t.Fatal(err)
				}
				gxt, gwt := contig4(gx, xs), contig4(gw, ws)
				gbt := f32Tensor(gb, []int64{int64(g.O)}, []int64{1})
				if err := Conv2dBackward(&gxt, &gwt, &gbt, contig4(gy, ys), contig4(x, xs), contig4(w, ws), tc.p); err != nil {
					t.Fatal(err)
				}
				return
			}
			y1, gx1, gw1, gb1 := run(false)
			y2, gx2, gw2, gb2 := run(true)
			sameF32(t, "y", y1, y2)
			sameF32(t, "gx", gx1, gx2)
			sameF32(t, "gw", gw1, gw2)
			sameF32(t, "gb", gb1, gb2)
			if t.Failed() {
				t.Fatalf("case %d special %v", ci, special)
			}
		}
	}
}
