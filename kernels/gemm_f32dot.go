package kernels

import (
	"os"
	"unsafe"
)

// float32 GEMM on hpusim's AVX-512 micro-kernel (gemm_f32dot_cgo.go): A and B are packed
// into 12-row and 32-column panels and a 12×32 tile of float32 sums is kept in registers,
// summed with fused multiply-adds in k order in fixed blocks of 256. Each element is
// computed by one tile whatever the split, so results do not depend on the worker count.
//
// It stands in for OpenBLAS where OpenBLAS runs kernels without AVX-512 on a CPU that has
// it: OpenBLAS 0.3.21 takes AMD Zen 4 for AVX2-only ("Haswell"), and OPENBLAS_CORETYPE
// may pin a kernel set too. There it runs sgemm 1.3-1.9x faster than OpenBLAS's kernels
// on the reference models' shapes (kernels/gemm_f32dot_test.go benchmarks both).
// HPUSIM_F32DOT=0 keeps OpenBLAS.

// f32DotOn is the switch (tests and benchmarks flip it to compare with OpenBLAS).
var f32DotOn = f32DotCPU && os.Getenv("HPUSIM_F32DOT") != "0" && f32DotReplacesBLAS()

// f32DotMaxPacked bounds the packed copies of A and B (floats, 64 MB): the driver packs
// both operands whole, so larger products stay with OpenBLAS's fixed-size blocking.
const f32DotMaxPacked = 1 << 24

// useF32Dot reports whether an m×n×k GEMM of element type T runs on the micro-kernel. A
// product narrower than half a column panel (n < 16) or shorter than 8 rows would leave
// most of each 12×32 tile idle: OpenBLAS's smaller tiles do those better.
func useF32Dot[T gemmFloat](m, n, k int) bool {
	var z T
	_, f32 := any(z).(float32)
	return f32 && f32DotOn && m >= 8 && n >= 16 && float64(m+n)*float64(k) <= f32DotMaxPacked
}

func f32DotStrides(t bool, ld int) (rs, cs int64) {
	if t {
		return 1, int64(ld)
	}
	return int64(ld), 1
}

func f32DotPanelLen(rows, per, k int) int { return (rows + per - 1) / per * per * k }

// f32DotSerial is one GEMM on the calling thread: row-major C = alpha*op(A)*op(B) + beta*C.
func f32DotSerial(tA, tB bool, m, n, k int, alpha float32, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta float32, c unsafe.Pointer, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	if k <= 0 || alpha == 0 {
		f32DotTiles(nil, nil, m, n, 0, alpha, beta, c, ldc)
		return
	}
	aLen, bLen := f32DotPanelLen(m, f32DotMR, k), f32DotPanelLen(n, f32DotNR, k)
	sp := getF32(aLen + bLen)
	defer putF32(sp)
	pa, pb := (*sp)[:aLen:aLen], (*sp)[aLen:aLen+bLen]
	ars, acs := f32DotStrides(tA, lda)
	brs, bcs := f32DotStrides(tB, ldb)
	f32DotPackA(pa, a, ars, acs, m, k)
	f32DotPackB(pb, b, brs, bcs, k, n)
	f32DotTiles(pa, pb, m, n, k, alpha, beta, c, ldc)
}

// f32DotGemm is f32DotSerial split over the workers along C's longer side: by rows, each
// part packing its rows of A and all of B; by columns, A packed once (its panels in
// parallel) and each part packing and multiplying its own columns of B. Either way each
// part streams the smaller operand whole and its own share of the larger one.
func f32DotGemm(tA, tB bool, m, n, k int, alpha float32, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta float32, c unsafe.Pointer, ldc int) {
	w := Workers()
	colPanels := (n + f32DotNR - 1) / f32DotNR
	rowPanels := (m + f32DotMR - 1) / f32DotMR
	byRows := m >= n
	if w < 2 || k <= 0 || alpha == 0 || float64(m)*float64(n)*float64(k) < blasSplitMin ||
		(byRows && rowPanels < 2) || (!byRows && colPanels < 2) {
		f32DotSerial(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	ars, acs := f32DotStrides(tA, lda)
	brs, bcs := f32DotStrides(tB, ldb)
	if byRows {
		parts := min(rowPanels, 2*w)
		per := (rowPanels + parts - 1) / parts * f32DotMR
		parts = (m + per - 1) / per
		RunParts(parts, func(pi int) {
			lo := pi * per
			hi := min(lo+per, m)
			f32DotSerial(tA, tB, hi-lo, n, k, alpha, unsafe.Add(a, int64(lo)*ars*4), lda, b, ldb, beta,
				unsafe.Add(c, lo*ldc*4), ldc)
		})
		return
	}
	aLen := f32DotPanelLen(m, f32DotMR, k)
	sp := getF32(aLen)
	defer putF32(sp)
	pa := (*sp)[:aLen:aLen]
	packParts := min(rowPanels, w)
	perPack := (rowPanels + packParts - 1) / packParts
	RunParts((rowPanels+perPack-1)/perPack, func(pi int) {
		p0 := pi * perPack
		p1 := min(p0+perPack, rowPanels)
		r0 := p0 * f32DotMR
		f32DotPackA(pa[p0*f32DotMR*k:p1*f32DotMR*k], unsafe.Add(a, int64(r0)*ars*4), ars, acs, min(p1*f32DotMR, m)-r0, k)
	})
	parts := min(colPanels, 2*w)
	per := (colPanels + parts - 1) / parts
	parts = (colPanels + per - 1) / per
	RunParts(parts, func(pi int) {
		n0 := pi * per * f32DotNR
		n1 := min(n0+per*f32DotNR, n)
		bLen := f32DotPanelLen(n1-n0, f32DotNR, k)
		bp := getF32(bLen)
		defer putF32(bp)
		pb := (*bp)[:bLen:bLen]
		f32DotPackB(pb, unsafe.Add(b, int64(n0)*bcs*4), brs, bcs, k, n1-n0)
		f32DotTiles(pa, pb, m, n1-n0, k, alpha, beta, unsafe.Add(c, n0*4), ldc)
	})
}
