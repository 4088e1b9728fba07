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

func (s gbSide) at(bi int) unsafe.Pointer { return at(s.ptr, int64(bi)*s.sb*2) }

// bgemmBF16Blocked computes batch products of the bfloat16 3-D a and b: with direct,
// out = alpha*a@b + beta*self rounded into out; otherwise cbuf[bi] (M×N, dense float32) =
// a[bi]@b[bi]. The kernel reads its A operand in place when that is row-major with even
// k (only B is packed); when b's columns are the ones with contiguous k (F.linear's
// weight) and a's are not, or a is the larger, it computes the transposed product
// b^T@a^T instead, storing each tile transposed, so that the operand packed is the one
// that needs it, or the smaller.
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
	epi := func(bi int) gbEpilogue {
		if !direct {
			return gbEpilogue{c: unsafe.Pointer(&cbuf[bi*M*N]), ldc: int64(N), alpha: 1, beta: 0, trans: trans}
		}
		e := gbEpilogue{o: at(out.Ptr, int64(bi)*out.Strides[0]*2), ldo: out.Strides[1], alpha: float32(alpha),
			beta: float32(beta), trans: trans}
		if self != nil {
			e.s, e.lds = at(self.Ptr, int64(bi)*self.Strides[0]*2), self.Strides[1]
		}
		return e
	}
	// run computes panels [p0,p1)×[q0,q1) of batch bi in k blocks.
	run := func(pa, pb []uint16, bi, p0, p1, q0, q1 int) {
		e := epi(bi)
		ap, lda := unsafe.Pointer(unsafe.SliceData(pa)), int64(0)
		if aIn {
			ap, lda = ka.at(bi), ka.rs
		}
		for kk0 := 0; kk0 < k2; kk0 += gbKC2 {
			e.add = kk0 > 0
			gbTiles(ap, lda, pb, m, n, K, p0, p1, q0, q1, kk0, min(kk0+gbKC2, k2), &e)
		}
	}
	packA := func(dst []uint16, bi, p0, p1 int) { gbPackA(dst, ka.at(bi), ka.rs, ka.cs, m, K, p0, p1) }
	packB := func(dst []uint16, bi, q0, q1 int) { gbPackB(dst, kb.at(bi), kb.rs, kb.cs, K, n, q0, q1) }
	work := float64(M) * float64(N) * float64(K)
	w := Workers()
	if B > 1 && (work < blasSplitMin || w < 2) {
		// Small products (attention's per-head matmuls): whole batches per worker.
		ParallelFor(int64(B), int64(max(work/8, 1)), func(lo, hi int64) {
			fa, pa := bf16Scratch(aLen)
			defer putF32(fa)
			fb, pb := bf16Scratch(bLen)
			defer putF32(fb)
			for bi := int(lo); bi < int(hi); bi++ {
				if !aIn && (bi == int(lo) || ka.sb != 0) { // a broadcast operand is packed once
					packA(pa, bi, 0, mp)
				}
				if bi == int(lo) || kb.sb != 0 {
					packB(pb, bi, 0, np)
				}
				run(pa, pb, bi, 0, mp, 0, np)
			}
		})
		return
	}
	fa, pa := bf16Scratch(aLen)
	defer putF32(fa)
	fb, pb := bf16Scratch(bLen)
	defer putF32(fb)
	parallel := work >= blasSplitMin && w >= 2
	for bi := 0; bi < B; bi++ {
		needA, needB := !aIn && (bi == 0 || ka.sb != 0), bi == 0 || kb.sb != 0
		if !parallel {
			if needA {
				packA(pa, bi, 0, mp)
			}
			if needB {
				packB(pb, bi, 0, np)
			}
			run(pa, pb, bi, 0, mp, 0, np)
			continue
		}
		// Columns split when there are enough B panels (each part then streams all of A,
		// which stays in cache, past its own B panels); rows otherwise.
		byCols := np >= 2*w
		// Split by columns, every part packs its own B panels just before it uses them:
		// no pass over B and no wait between packing and computing, and the panels are
		// still in the core's L2 when its tiles read them. Only what every part reads
		// (A, or B of a split by rows) is packed first, by all the workers.
		ownB := byCols && needB
		if needA || (needB && !ownB) {
			gbPackParallel(w, needA, needB && !ownB, mp, np, func(p0, p1 int) { packA(pa, bi, p0, p1) },
				func(q0, q1 int) { packB(pb, bi, q0, q1) })
		}
		total := mp
		if byCols {
			total = np
		}
		parts := min(total, 2*w)
		per := (total + parts - 1) / parts
		parts = (total + per - 1) / per
		RunParts(parts, func(pi int) {
			lo, hi := pi*per, min((pi+1)*per, total)
			if byCols {
				if ownB {
					packB(pb, bi, lo, hi)
				}
				run(pa, pb, bi, 0, mp, lo, hi)
			} else {
				run(pa, pb, bi, lo, hi, 0, np)
			}
		})
	}
}

// gbPackParallel packs A's mp and B's np panels (those needed) in about 2*w parts of
// similar size.
func gbPackParallel(w int, needA, needB bool, mp, np int, packA, packB func(lo, hi int)) {
	type span struct {
		b      bool
		lo, hi int
	}
	var spans []span
	split := func(isB bool, n, size int) {
		// Parts of about (total packed)/(2w) elements.
		per := max(1, int(int64(mp*gbMR)*b2i(needA)+int64(np*gbNR)*b2i(needB))/(2*w)/size)
		for lo := 0; lo < n; lo += per {
			spans = append(spans, span{isB, lo, min(lo+per, n)})
		}
	}
	if needA {
		split(false, mp, gbMR)
	}
	if needB {
		split(true, np, gbNR)
	}
	RunParts(len(spans), func(i int) {
		s := spans[i]
		if s.b {
			packB(s.lo, s.hi)
		} else {
			packA(s.lo, s.hi)
		}
	})
}
