package kernels

import "unsafe"

// bfloat16 GEMM on the blocked VDPBF16PS kernel (gemm_bf16_blocked.h). Per batch, both
// operands are packed once into k-pair panels, split over the workers, then the tiles of
// the result are split over them by columns (or rows, for a narrow result). Each
// element's sum runs in one float32 register over all of k (or over blocks of gbKC2 k
// pairs added in order, for a long k), whatever the split. With a bfloat16 output whose
// columns are contiguous, the kernel applies alpha, beta*self and the rounding itself and
// writes out directly; otherwise it leaves float32 sums for bgemmHalf's epilogue.

// gbKC2 is the most k pairs one pass sums in registers: its B panel (256 KB) still streams
// well from L2. A longer k runs in blocks accumulated in float32 memory.
const gbKC2 = 1024

// gbEpilogue is what the tiles do with their sums (gb_epi in gemm_bf16_blocked.h).
type gbEpilogue struct {
	c     unsafe.Pointer // float32 result, row stride ldc, when o is nil
	ldc   int64
	add   bool
	o     unsafe.Pointer // bfloat16 result, row stride ldo
	ldo   int64
	s     unsafe.Pointer // bfloat16 self (nil: none), row stride lds
	lds   int64
	alpha float32
	beta  float32
	trans bool // tiles hold the transposed product (C'[r, c] = C[c, r])
}

// gbDirect reports whether the blocked kernel can write out itself: bfloat16 with
// contiguous columns, k short enough for one pass, no overlap with the operands, and self
// (if any) bfloat16 with contiguous (or broadcast-row) columns that out does not overlap
// unless it is out itself.
func gbDirect(out, a, b Tensor, self *Tensor, K int) bool {
	B, N := out.Sizes[0], out.Sizes[2]
	if out.DType != BFloat16 || (out.Strides[2] != 1 && N != 1) || (out.Strides[0] == 0 && B > 1) ||
		(K+1)/2 > gbKC2 || overlaps(out, a) || overlaps(out, b) {
		return false
	}
	if self == nil {
		return true
	}
	if self.DType != BFloat16 || (self.Strides[2] != 1 && N != 1) {
		return false
	}
	same := self.Ptr == out.Ptr && self.Strides[0] == out.Strides[0] && self.Strides[1] == out.Strides[1]
	return same || !overlaps(out, *self)
}

// gbSide is one operand of the kernel's product C' = A'@B' (A' m'×k, B' k×n'): element
// (r, c) of batch bi at ptr + (bi*sb + r*rs + c*cs)*2 bytes.
type gbSide struct {
	ptr        unsafe.Pointer
	sb, rs, cs int64
}

// bgemmBF16Blocked computes batch products of the bfloat16 3-D a and b: with direct,
// out = alpha*a@b + beta*self rounded into out; otherwise cbuf[bi] (M×N, dense float32) =
// a[bi]@b[bi]. The kernel reads its A operand in place when that is row-major with even
// k (only B is packed); when b's columns are the ones with contiguous k (F.linear's
// weight) and a's are not, or a is the larger, it computes the transposed product
// b^T@a^T instead, storing each tile transposed, so that the operand packed is the one
// that needs it, or the smaller. The whole call is one cgo call whose parts run on the C
// team (cteam.go); the split is decided here, from the sizes and Workers() alone.
func bgemmBF16Blocked(out, a, b Tensor, self *Tensor, alpha, beta float64, direct bool, cbuf []float32) {
	B, M, K, N := int(a.Sizes[0]), int(a.Sizes[1]), int(a.Sizes[2]), int(b.Sizes[2])
	ka := gbSide{a.Ptr, a.Strides[0], a.Strides[1], a.Strides[2]}
	kb := gbSide{b.Ptr, b.Strides[0], b.Strides[1], b.Strides[2]}
	// In place needs a nonzero row stride: the kernel takes lda 0 to mean "packed", and an
	// expanded operand (rows with stride 0) is packed instead.
	aIn := K%2 == 0 && (a.Strides[2] == 1 || K == 0) && a.Strides[1] != 0
	bIn := K%2 == 0 && b.Strides[1] == 1 && b.Strides[2] != 0
	trans := bIn && (!aIn || M < N)
	m, n := M, N
	if trans {
		ka = gbSide{b.Ptr, b.Strides[0], b.Strides[2], b.Strides[1]}
		kb = gbSide{a.Ptr, a.Strides[0], a.Strides[2], a.Strides[1]}
		m, n, aIn = N, M, true
	}
	k2 := (K + 1) / 2
	mp, np := (m+gbMR-1)/gbMR, (n+gbNR-1)/gbNR
	aLen, bLen := mp*gbMR*k2*2, np*gbNR*k2*2
	if aIn {
		aLen = 0
	}
	var p [gbtNParams]int64
	p[gbtB], p[gbtM], p[gbtN], p[gbtK], p[gbtRows], p[gbtCols] = int64(B), int64(M), int64(N), int64(K), int64(m), int64(n)
	p[gbtASB], p[gbtARS], p[gbtACS], p[gbtAIn] = ka.sb, ka.rs, ka.cs, b2i(aIn)
	p[gbtBSB], p[gbtBRS], p[gbtBCS], p[gbtTrans] = kb.sb, kb.rs, kb.cs, b2i(trans)
	var o, s unsafe.Pointer
	if direct {
		o, p[gbtOSB], p[gbtLDO] = out.Ptr, out.Strides[0], out.Strides[1]
		if self != nil {
			s, p[gbtSSB], p[gbtLDS] = self.Ptr, self.Strides[0], self.Strides[1]
		}
	} else {
		alpha, beta = 1, 0
	}
	work := float64(M) * float64(N) * float64(K)
	w := Workers()
	p[gbtWorkers] = int64(w)
	parts := 1 // scratch sets
	split := false
	if B > 1 && (work < blasSplitMin || w < 2) {
		// Small products (attention's per-head matmuls): whole batches per part, as
		// ParallelFor would chunk them, each part with its own scratch.
		per := B
		if cost := int64(max(work/8, 1)); w > 1 && int64(B)*cost >= 2*Grain {
			chunks := min(w, B)
			per = (B + chunks - 1) / chunks
		}
		p[gbtBatchPer], parts = int64(per), (B+per-1)/per
		split = parts > 1
	} else if work >= blasSplitMin && w >= 2 {
		// Columns split when there are enough B panels (each part then streams all of A,
		// which stays in cache, past its own B panels); rows otherwise.
		byCols := np >= 2*w
		total := mp
		if byCols {
			total = np
		}
		tparts := min(total, 2*w)
		p[gbtParallel], p[gbtByCols], p[gbtTilePer] = 1, b2i(byCols), int64((total+tparts-1)/tparts)
		split = true
	}
	p[gbtPALen], p[gbtPBLen] = int64(aLen), int64(bLen)
	fa, pa := bf16Scratch(parts * aLen)
	defer putF32(fa)
	fb, pb := bf16Scratch(parts * bLen)
	defer putF32(fb)
	err := runTeam(split, func(threads int) int {
		return gbTeam(threads, &p, ka.ptr, kb.ptr, pa, pb, cbuf, o, s, float32(alpha), float32(beta))
	})
	if err != nil {
		panic(err) // the kernel's parts report no error; a code here is a bug
	}
}
