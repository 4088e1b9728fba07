package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// b2Ref is the AVX2 kernel's arithmetic in Go: per element, float32 sums over blocks of
// 256 k in order (the product of two bfloat16 values is exact in float32, so a fused
// multiply-add equals the float32 product then sum), the blocks added in order.
func b2Ref(a, b Tensor, bi, M, N, K int) []float32 {
	at2 := func(t Tensor, i, j int) float32 {
		p := unsafe.Add(t.Ptr, (int64(bi)*t.Strides[0]+int64(i)*t.Strides[1]+int64(j)*t.Strides[2])*2)
		return BF16ToF32(*(*uint16)(p))
	}
	c := make([]float32, M*N)
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			var tot float32
			for k0 := 0; k0 < K; k0 += 256 {
				var s float32
				for kk := k0; kk < min(k0+256, K); kk++ {
					p := at2(a, i, kk) * at2(b, kk, j)
					s += p
				}
				if k0 == 0 {
					tot = s
				} else {
					tot += s
				}
			}
			c[i*N+j] = tot
		}
	}
	return c
}

// TestGemmB2MatchesReference checks the AVX2 bfloat16 kernel bit for bit against b2Ref
// over edge sizes (rows past a 6-row panel, columns past a 16-column panel, k past a
// 256 block and not a multiple of 8), every operand layout the packers special-case
// (row-major, transposed, strided, expanded, broadcast batch), and both splits (by
// columns and by rows) on 1 and 2 workers.
func TestGemmB2MatchesReference(t *testing.T) {
	if !b2CPU {
		t.Skip("no AVX2/FMA (or no cgo): the kernel is never used here")
	}
	r := rand.New(rand.NewSource(11))
	cases := []struct {
		B, m, k, n int64
		la, lb     bf16Layout
	}{
		{1, 13, 29, 37, bf16Layout{}, bf16Layout{}},
		{1, 6, 16, 16, bf16Layout{}, bf16Layout{trans: true}},
		{2, 70, 300, 150, bf16Layout{}, bf16Layout{trans: true}},
		{1, 64, 520, 200, bf16Layout{trans: true}, bf16Layout{}},
		{1, 200, 263, 40, bf16Layout{pad: 3}, bf16Layout{trans: true, pad: 5}},
		{3, 50, 64, 90, bf16Layout{step: 2}, bf16Layout{bcastB: true}},
		{2, 40, 33, 70, bf16Layout{bcastL: true}, bf16Layout{trans: true, bcastB: true}},
		{1, 1, 700, 300, bf16Layout{}, bf16Layout{trans: true}},
		{1, 300, 96, 1, bf16Layout{}, bf16Layout{}},
		{1, 257, 64, 513, bf16Layout{}, bf16Layout{}},
		{1, 513, 64, 97, bf16Layout{}, bf16Layout{trans: true}},
		// Partial panels on the vector packers: row-major A and k-contiguous B (8x8
		// transposes, 5 of 6 rows, 5 of 16 columns), transposed A and row-major B
		// (copies across lines, whole panels then a partial one).
		{1, 11, 136, 21, bf16Layout{}, bf16Layout{trans: true}},
		{1, 25, 64, 45, bf16Layout{trans: true}, bf16Layout{}},
		{1, 36, 40, 48, bf16Layout{trans: true, pad: 2}, bf16Layout{pad: 1}},
	}
	for ci, c := range cases {
		a := bf16View(r, c.B, c.m, c.k, c.la)
		b := bf16View(r, c.B, c.k, c.n, c.lb)
		M, K, N := int(c.m), int(c.k), int(c.n)
		for _, w := range []int{1, 2} {
			prev := SetThreads(w)
			got := make([]float32, int(c.B)*M*N)
			for i := range got {
				got[i] = float32(math.NaN()) // every element must be written
			}
			bgemmB2(a, b, got)
			SetThreads(prev)
			for bi := 0; bi < int(c.B); bi++ {
				want := b2Ref(a, b, bi, M, N, K)
				for e, v := range want {
					if g := got[bi*M*N+e]; math.Float32bits(g) != math.Float32bits(v) {
						t.Fatalf("case %d (%+v) w%d batch %d element (%d, %d): got %v, want %v", ci, c, w, bi,
							e/N, e%N, g, v)
					}
				}
			}
		}
	}
	// Large enough for the parallel splits (by columns, then by rows) on 2 workers.
	for _, s := range [][3]int64{{64, 512, 256}, {300, 64, 40}, {96, 300, 600}} {
		a := bf16View(r, 1, s[0], s[1], bf16Layout{})
		b := bf16View(r, 1, s[1], s[2], bf16Layout{trans: s[2] > 100})
		M, K, N := int(s[0]), int(s[1]), int(s[2])
		prev := SetThreads(2)
		got := make([]float32, M*N)
		bgemmB2(a, b, got)
		SetThreads(prev)
		want := b2Ref(a, b, 0, M, N, K)
		for e, v := range want {
			if math.Float32bits(got[e]) != math.Float32bits(v) {
				t.Fatalf("%v element %d: got %v, want %v", s, e, got[e], v)
			}
		}
	}
}

// TestGemmB2ThroughBatchedGemm runs bf16 products (with alpha, beta and self) through
// BatchedGemm with the AVX2 kernel on and off: the results may differ only by the sum
// order (each within a few bfloat16 ulps of a float64 reference), and with it on they are
// b2Ref's sums rounded once.
func TestGemmB2ThroughBatchedGemm(t *testing.T) {
	if !b2CPU || useBF16Dot(Tensor{DType: BFloat16}, Tensor{DType: BFloat16}) {
		t.Skip("bfloat16 GEMMs do not run on the AVX2 kernel here")
	}
	r := rand.New(rand.NewSource(12))
	for _, s := range [][3]int64{{33, 300, 47}, {128, 256, 128}, {64, 1024, 96}} {
		M, K, N := s[0], s[1], s[2]
		a := bf16View(r, 1, M, K, bf16Layout{})
		b := bf16View(r, 1, K, N, bf16Layout{trans: true})
		name := fmt.Sprint(s)
		var outs [2][]uint16
		old := gemmB2
		for i, on := range []bool{true, false} {
			gemmB2 = on
			out := bf16View(r, 1, M, N, bf16Layout{})
			if err := BatchedGemm(out, a, b, nil, 1, 0); err != nil {
				t.Fatal(err)
			}
			outs[i] = unsafe.Slice((*uint16)(out.Ptr), M*N)
		}
		gemmB2 = old
		want := b2Ref(a, b, 0, int(M), int(N), int(K))
		for e := range want {
			if outs[0][e] != F32ToBF16(want[e]) {
				t.Fatalf("%s element %d: got %x, want %x", name, e, outs[0][e], F32ToBF16(want[e]))
			}
			d := math.Abs(float64(BF16ToF32(outs[0][e]) - BF16ToF32(outs[1][e])))
			if d > 0.02*math.Abs(float64(BF16ToF32(outs[1][e])))+0.05 {
				t.Fatalf("%s element %d: on %v, off %v", name, e, BF16ToF32(outs[0][e]), BF16ToF32(outs[1][e]))
			}
		}
	}
}
