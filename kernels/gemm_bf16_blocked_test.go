package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"testing"
	"unsafe"
)

// bf16View is a B×rows×cols bfloat16 view into a fresh buffer of random values: element
// (b, i, j) at off + b*sb + i*si + j*sj for the given layout (transposed, padded rows,
// every other column, storage offset, broadcast batch).
type bf16Layout struct {
	trans  bool  // stored column-major (the view of a transposed matrix)
	pad    int64 // extra elements per stored line
	step   int64 // element step within a line (1 contiguous, 2 every other)
	off    int64 // storage offset
	bcastB bool  // batch stride 0
	bcastL bool  // line stride 0: every stored line is the same (an expanded row or column)
}

func bf16View(r *rand.Rand, B, rows, cols int64, l bf16Layout) Tensor {
	step := max(l.step, 1)
	lines, ln := rows, cols
	if l.trans {
		lines, ln = cols, rows
	}
	lineStride := ln*step + l.pad
	batch := lines * lineStride
	if l.bcastL {
		lineStride, batch = 0, ln*step+l.pad
	}
	nb := B
	if l.bcastB {
		nb = 1
	}
	buf := make([]uint16, l.off+nb*batch+1)
	for i := range buf {
		buf[i] = F32ToBF16(float32(r.NormFloat64()))
	}
	t := Tensor{Ptr: unsafe.Pointer(&buf[l.off]), DType: BFloat16, Sizes: []int64{B, rows, cols},
		Strides: []int64{batch, lineStride, step}}
	if l.trans {
		t.Strides[1], t.Strides[2] = step, lineStride
	}
	if l.bcastB {
		t.Strides[0] = 0
	}
	return t
}

// checkBF16Gemm runs BatchedGemm on bfloat16 operands and checks every element against a
// float64 reference of the same operands: within float32 accumulation error plus one
// bfloat16 rounding (a packing, tiling or epilogue mistake is off by O(1)); and the same
// bits on one worker as on all.
func checkBF16Gemm(t *testing.T, name string, out, a, b Tensor, self *Tensor, alpha, beta float64) {
	t.Helper()
	B, M, K, N := a.Sizes[0], a.Sizes[1], a.Sizes[2], b.Sizes[2]
	var selfVals []float64
	if self != nil { // read before the call: self may be out itself
		for bi := int64(0); bi < B; bi++ {
			for i := int64(0); i < M; i++ {
				for j := int64(0); j < N; j++ {
					selfVals = append(selfVals, bf16At(*self, bi, i, j))
				}
			}
		}
	}
	run := func() []uint16 {
		if self != nil && self.Ptr == out.Ptr { // in place: restore self first
			idx := 0
			for bi := int64(0); bi < B; bi++ {
				for i := int64(0); i < M; i++ {
					for j := int64(0); j < N; j++ {
						off := bi*out.Strides[0] + i*out.Strides[1] + j*out.Strides[2]
						*(*uint16)(unsafe.Add(out.Ptr, off*2)) = F32ToBF16(float32(selfVals[idx]))
						idx++
					}
				}
			}
		}
		if err := BatchedGemm(out, a, b, self, alpha, beta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []uint16
		for bi := int64(0); bi < B; bi++ {
			for i := int64(0); i < M; i++ {
				for j := int64(0); j < N; j++ {
					off := bi*out.Strides[0] + i*out.Strides[1] + j*out.Strides[2]
					got = append(got, *(*uint16)(unsafe.Add(out.Ptr, off*2)))
				}
			}
		}
		return got
	}
	got := run()
	idx := 0
	for bi := int64(0); bi < B; bi++ {
		for i := int64(0); i < M; i++ {
			for j := int64(0); j < N; j++ {
				var sum, mag float64
				for k := int64(0); k < K; k++ {
					p := bf16At(a, bi, i, k) * bf16At(b, bi, k, j)
					sum += p
					mag += math.Abs(p)
				}
				want := alpha * sum
				bound := math.Abs(alpha) * mag * float64(K+2) * 0x1p-24
				if self != nil {
					sv := beta * selfVals[idx]
					want += sv
					bound += math.Abs(sv) * 0x1p-23
				}
				bound += math.Abs(want)*0x1p-8 + 1e-30
				if v := float64(BF16ToF32(got[idx])); math.Abs(v-want) > bound {
					t.Fatalf("%s [%d,%d,%d]: %g, want %g (bound %g)", name, bi, i, j, v, want, bound)
				}
				idx++
			}
		}
	}
	prev := runtime.GOMAXPROCS(1)
	one := run()
	runtime.GOMAXPROCS(prev)
	for i := range one {
		if one[i] != got[i] {
			t.Fatalf("%s: element %d is %x on one worker, %x on %d", name, i, one[i], got[i], prev)
		}
	}
}

// TestGemmBF16Blocked drives the blocked kernel through its paths: A read in place or
// packed, the transposed product, every B panel width (n mod 64 in 16s and odd), partial
// row panels, odd k and k past one register pass (k blocks), strided, offset and
// broadcast operands, bias and in-place self, and outputs it cannot write directly.
func TestGemmBF16Blocked(t *testing.T) {
	if !bf16DotCPU {
		t.Skip("this CPU has no AVX512-BF16")
	}
	r := rand.New(rand.NewSource(5))
	type tc struct {
		B, m, n, k int64
		la, lb     bf16Layout
	}
	cases := []tc{
		{1, 1, 1, 1, bf16Layout{}, bf16Layout{}},
		{1, 1, 1, 2, bf16Layout{}, bf16Layout{trans: true}},
		{1, 5, 17, 3, bf16Layout{}, bf16Layout{}},
		{1, 7, 33, 32, bf16Layout{}, bf16Layout{trans: true}},
		{1, 13, 49, 31, bf16Layout{trans: true}, bf16Layout{}},
		{1, 12, 64, 33, bf16Layout{trans: true}, bf16Layout{trans: true}},
		{1, 6, 65, 64, bf16Layout{pad: 3}, bf16Layout{pad: 5}},
		{1, 11, 130, 66, bf16Layout{step: 2, off: 7}, bf16Layout{step: 2, off: 3}},
		{1, 70, 9, 40, bf16Layout{trans: true, pad: 1}, bf16Layout{trans: true, step: 2}},
		{3, 9, 20, 18, bf16Layout{off: 1}, bf16Layout{bcastB: true}},
		{3, 9, 20, 18, bf16Layout{bcastB: true}, bf16Layout{trans: true, off: 1}},
		{2, 64, 200, 301, bf16Layout{}, bf16Layout{}},            // parallel, odd k: A packed
		{2, 130, 96, 256, bf16Layout{}, bf16Layout{trans: true}}, // parallel, transposed product
		{1, 200, 70, 130, bf16Layout{trans: true}, bf16Layout{}}, // split by rows
		// Split by columns, each part packing its own B panels: per batch, and for a
		// broadcast B only in the first batch (the later ones reuse its panels).
		{2, 30, 300, 64, bf16Layout{}, bf16Layout{pad: 3}},
		{3, 30, 300, 64, bf16Layout{off: 2}, bf16Layout{bcastB: true}},
		// Transposed product: A^T packed from rows with adjacent pairs, whole 16 x 16 blocks
		// plus a tail of pairs, partial panels of 20 and 70 (64 + 6) lines.
		{1, 20, 150, 70, bf16Layout{}, bf16Layout{trans: true}},
		{1, 70, 200, 66, bf16Layout{pad: 2}, bf16Layout{trans: true}},
		{1, 8, 20, 2*gbKC2 + 6, bf16Layout{}, bf16Layout{}},            // two k blocks
		{1, 9, 37, 2*gbKC2 + 3, bf16Layout{}, bf16Layout{trans: true}}, // two k blocks, odd k
		// Expanded operands (row or column stride 0), which must not be read in place: the
		// kernel takes a zero row stride to mean "packed".
		{1, 5, 2, 4, bf16Layout{bcastL: true}, bf16Layout{}},
		{3, 7, 3, 6, bf16Layout{bcastL: true, bcastB: true}, bf16Layout{}},
		{1, 5, 16, 4, bf16Layout{}, bf16Layout{trans: true, bcastL: true}},
		{2, 64, 64, 64, bf16Layout{bcastL: true}, bf16Layout{trans: true, bcastL: true}},
	}
	for ci, c := range cases {
		a := bf16View(r, c.B, c.m, c.k, c.la)
		b := bf16View(r, c.B, c.k, c.n, c.lb)
		name := fmt.Sprintf("case %d %+v", ci, c)
		out := bf16View(r, c.B, c.m, c.n, bf16Layout{})
		checkBF16Gemm(t, name, out, a, b, nil, 1, 0)
		// Bias (a broadcast row) with alpha and beta.
		bias := bf16View(r, 1, 1, c.n, bf16Layout{})
		bias.Sizes, bias.Strides = []int64{c.B, c.m, c.n}, []int64{0, 0, 1}
		checkBF16Gemm(t, name+" bias", out, a, b, &bias, 0.5, 2)
		// In place (addmm_): self is out.
		checkBF16Gemm(t, name+" inplace", out, a, b, &out, 1, 1)
		// Outputs written through the float32 epilogue: strided columns, a float32 self.
		sout := bf16View(r, c.B, c.m, c.n, bf16Layout{step: 2, pad: 1})
		checkBF16Gemm(t, name+" strided out", sout, a, b, nil, 1, 0)
		tout := bf16View(r, c.B, c.m, c.n, bf16Layout{trans: true})
		checkBF16Gemm(t, name+" transposed out", tout, a, b, &bias, 1, -1)
	}
}
