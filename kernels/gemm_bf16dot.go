package kernels

import "unsafe"

// bfloat16 GEMM by VDPBF16PS (gemm_bf16dot_cgo.go): each product of two bfloat16 values
// is exact in float32 and the sums accumulate in float32, as in the widening path, but
// nothing is widened in memory and the instruction does twice the multiply-adds of a
// float32 FMA. Like every VDPBF16PS user (oneDNN's bf16 matmul among them) it treats
// subnormal inputs and sums as zero; their magnitude (< 1.2e-38) is far below bfloat16's
// tolerances. Each element's sum runs in k order in fixed blocks, so results do not
// depend on how the work is split.

// gemmBF16Dot enables the VDPBF16PS path where the CPU has it (a switch for tests and
// benchmarks comparing it with the widening path).
var gemmBF16Dot = true

func useBF16Dot(a, b Tensor) bool {
	return gemmBF16Dot && bf16DotCPU && a.DType == BFloat16 && b.DType == BFloat16
}

// bf16Scratch returns a scratch buffer of at least n uint16s (from the float32 free list).
func bf16Scratch(n int) (*[]float32, []uint16) {
	f := getF32((n + 1) / 2)
	return f, unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(*f))), n)
}

// bgemmBF16Dot sets cbuf[bi] (M×N, dense) to a[bi] @ b[bi] for the bfloat16 3-D operands.
func bgemmBF16Dot(cbuf []float32, a, b Tensor, B, M, N, K int) {
	k2 := (K + 1) / 2
	aLen := (M + bf16DotMR - 1) / bf16DotMR * bf16DotMR * k2 * 2
	bLen := func(cols int) int { return (cols + bf16DotNR - 1) / bf16DotNR * bf16DotNR * k2 * 2 }
	batchA := func(bi int) unsafe.Pointer { return at(a.Ptr, int64(bi)*a.Strides[0]*2) }
	batchB := func(bi int) unsafe.Pointer { return at(b.Ptr, int64(bi)*b.Strides[0]*2) }
	cAt := func(bi, j int) unsafe.Pointer { return unsafe.Pointer(&cbuf[bi*M*N+j]) }
	work := float64(M) * float64(N) * float64(K)
	if B > 1 && (work < blasSplitMin || N < 2*bf16DotNR) {
		// Small products: whole batches per worker.
		ParallelFor(int64(B), int64(max(work/8, 1)), func(lo, hi int64) {
			fa, pa := bf16Scratch(aLen)
			defer putF32(fa)
			fb, pb := bf16Scratch(bLen(N))
			defer putF32(fb)
			for bi := int(lo); bi < int(hi); bi++ {
				if bi == int(lo) || a.Strides[0] != 0 { // a broadcast A is packed once
					bf16DotPackA(pa, batchA(bi), a.Strides[1], a.Strides[2], M, K)
				}
				bf16DotPackB(pb, batchB(bi), b.Strides[1], b.Strides[2], K, 0, N)
				bf16DotGemm(pa, pb, M, N, K, cAt(bi, 0), N, false)
			}
		})
		return
	}
	fa, pa := bf16Scratch(aLen)
	defer putF32(fa)
	panels := (N + bf16DotNR - 1) / bf16DotNR
	parts := 1
	if work >= blasSplitMin && Workers() >= 2 {
		parts = min(panels, 2*Workers())
	}
	per := (panels + parts - 1) / parts
	parts = (panels + per - 1) / per
	for bi := 0; bi < B; bi++ {
		if bi == 0 || a.Strides[0] != 0 { // a broadcast A is packed once
			bf16DotPackA(pa, batchA(bi), a.Strides[1], a.Strides[2], M, K)
		}
		// Each part packs and multiplies its own columns of B.
		RunParts(parts, func(pi int) {
			n0 := pi * per * bf16DotNR
			n1 := min(n0+per*bf16DotNR, N)
			fb, pb := bf16Scratch(bLen(n1 - n0))
			defer putF32(fb)
			bf16DotPackB(pb, batchB(bi), b.Strides[1], b.Strides[2], K, n0, n1)
			bf16DotGemm(pa, pb, M, n1-n0, K, cAt(bi, n0), N, false)
		})
	}
}
