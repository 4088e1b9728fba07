package kernels

import (
	"os"
	"unsafe"
)

// bfloat16 GEMM on CPUs without AVX512-BF16 (gemm_bf16_avx2_cgo.go): each operand is
// widened to float32 while it is packed into the micro-kernel's panels, instead of being
// widened into a float32 copy that OpenBLAS then reads and packs again (that extra pass
// over memory made bf16 products 0.7-0.9x of float32 ones on an AVX2 machine). Each
// element's sum runs in float32 with fused multiply-adds in k order, in blocks of 256
// added in order, whatever the split; bgemmHalf's epilogue rounds it once.

// gemmB2 is the switch (tests flip it to compare with the widen-then-sgemm path);
// HPUSIM_BF16_AVX2=0 turns it off.
var gemmB2 = b2CPU && os.Getenv("HPUSIM_BF16_AVX2") != "0"

// useB2 reports whether bgemmHalf runs a and b on the AVX2 kernel.
func useB2(a, b Tensor) bool {
	return gemmB2 && a.DType == BFloat16 && b.DType == BFloat16
}

// b2ColChunk is how many B column panels one part packs and multiplies at a time (64
// columns: with k up to 1024, 256 KB of float32 panels, kept in the core's L2).
const (
	b2ColChunk = 4
	b2RowChunk = 16
)

// bgemmB2 computes cbuf[bi] (M×N, dense float32) = a[bi]@b[bi] for the bfloat16 3-D a, b.
func bgemmB2(a, b Tensor, cbuf []float32) {
	B, M, K, N := int(a.Sizes[0]), int(a.Sizes[1]), int(a.Sizes[2]), int(b.Sizes[2])
	w := Workers()
	work := float64(M) * float64(N) * float64(K)
	if B > 1 && (work < blasSplitMin || w < 2) {
		ParallelFor(int64(B), int64(max(work/8, 1)), func(lo, hi int64) {
			for bi := int(lo); bi < int(hi); bi++ {
				b2One(a, b, bi, M, N, K, cbuf[bi*M*N:(bi+1)*M*N], 1)
			}
		})
		return
	}
	if work < blasSplitMin {
		w = 1
	}
	for bi := 0; bi < B; bi++ {
		b2One(a, b, bi, M, N, K, cbuf[bi*M*N:(bi+1)*M*N], w)
	}
}

// b2One is batch bi's product into c (M×N dense) on w workers.
func b2One(a, b Tensor, bi, M, N, K int, c []float32, w int) {
	ap := unsafe.Add(a.Ptr, int64(bi)*a.Strides[0]*2)
	bp := unsafe.Add(b.Ptr, int64(bi)*b.Strides[0]*2)
	ars, acs := a.Strides[1], a.Strides[2]
	brs, bcs := b.Strides[1], b.Strides[2]
	mp, np := (M+b2MR-1)/b2MR, (N+b2NR-1)/b2NR
	aLen, bLen := mp*b2MR*K, np*b2NR*K
	if w < 2 || (mp < 2 && np < 2) {
		sp := getF32(aLen + bLen)
		defer putF32(sp)
		pa, pb := (*sp)[:aLen:aLen], (*sp)[aLen:aLen+bLen]
		b2PackA(pa, ap, ars, acs, K, 0, M)
		b2PackB(pb, bp, brs, bcs, K, 0, N)
		b2Gemm(pa, pb, M, N, K, c, N)
		return
	}
	if np >= 2*w || np >= mp {
		// By columns: A packed once (its panels split over the workers), then each part
		// packs a chunk of B's columns and multiplies it while it is in cache.
		sp := getF32(aLen)
		defer putF32(sp)
		pa := (*sp)[:aLen:aLen]
		per := (mp + w - 1) / w
		RunParts((mp+per-1)/per, func(pi int) {
			p0, p1 := pi*per, min((pi+1)*per, mp)
			b2PackA(pa[p0*b2MR*K:p1*b2MR*K], ap, ars, acs, K, p0*b2MR, min(p1*b2MR, M))
		})
		RunParts((np+b2ColChunk-1)/b2ColChunk, func(pi int) {
			c0, c1 := pi*b2ColChunk*b2NR, min((pi+1)*b2ColChunk*b2NR, N)
			n := (c1 - c0 + b2NR - 1) / b2NR * b2NR * K
			bs := getF32(n)
			defer putF32(bs)
			pb := (*bs)[:n:n]
			b2PackB(pb, bp, brs, bcs, K, c0, c1)
			b2Gemm(pa, pb, M, c1-c0, K, c[c0:], N)
		})
		return
	}
	// By rows: B packed once, then each part packs a chunk of A's rows and multiplies it.
	sp := getF32(bLen)
	defer putF32(sp)
	pb := (*sp)[:bLen:bLen]
	per := (np + w - 1) / w
	RunParts((np+per-1)/per, func(pi int) {
		q0, q1 := pi*per, min((pi+1)*per, np)
		b2PackB(pb[q0*b2NR*K:q1*b2NR*K], bp, brs, bcs, K, q0*b2NR, min(q1*b2NR, N))
	})
	RunParts((mp+b2RowChunk-1)/b2RowChunk, func(pi int) {
		r0, r1 := pi*b2RowChunk*b2MR, min((pi+1)*b2RowChunk*b2MR, M)
		n := (r1 - r0 + b2MR - 1) / b2MR * b2MR * K
		as := getF32(n)
		defer putF32(as)
		pa := (*as)[:n:n]
		b2PackA(pa, ap, ars, acs, K, r0, r1)
		b2Gemm(pa, pb, r1-r0, N, K, c[r0*N:], N)
	})
}
