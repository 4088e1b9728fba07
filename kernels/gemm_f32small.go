package kernels

import (
	"os"
	"strconv"
	"sync/atomic"
	"unsafe"
)

// Small and mid-sized float32 products on an AVX2+FMA kernel of hpusim's own
// (gemm_f32small_cgo.go) instead of OpenBLAS: attention's per-head products (bmm of 64
// batches of 64x64x16, 64x16x64, 64x64x64 at the bench transformer's shapes) and the MLP's
// linear layers (64x128x64, 64x64x128 and their gradients) spent more in OpenBLAS's
// interface, buffer and packing than in arithmetic. The kernel keeps a 6x16 tile of C in
// registers and sums every element as fused multiply-add chains over k from zero, one per
// block of 256 values of k, the blocks' sums added in k order; the epilogue rounds
// fma(beta, c, alpha*sum). That is not OpenBLAS's summation order (its Haswell kernel
// splits the chain), so results may differ from it in the last bits; both stay within a
// few ulps of the float64 product (TestF32SmallMatchesBLAS). No element's arithmetic
// depends on the tiling or on the split over workers, so any worker count gives the same
// bits. HPUSIM_F32SMALL=0 keeps OpenBLAS (A/B checks).
var f32SmallOn = f32SmallCPU && os.Getenv("HPUSIM_F32SMALL") != "0"

// f32SmallMax bounds m*n*k: past it OpenBLAS's cache blocking (and its own threads from
// 2^24) win, except for the shallow products below.
const f32SmallMax = 1 << 22

// f32SmallMidMax and f32SmallMidK: products up to 2^24 whose k is at most 256 run on the
// small kernel too. A 16-column strip of op(B) is then at most 16 KiB (in L1) and every
// 6-row tile of A streams through once per strip; OpenBLAS's packing of A buys nothing at
// that depth. Measured on the 2-core AVX2 machine (TestF32SmallTimings, one worker, medians
// of 60 interleaved rounds at loads 1-6) on the bench transformer's linear layers
// (1024 rows): forward 1024x256x64 388 vs OpenBLAS 416 us, 1024x64x256 386 vs 441,
// 1024x192x64 294 vs 323, 1024x64x64 100 vs 109 (plus the bias in the epilogue instead of
// a copy of self into C); input gradients 1024x256x64 446 vs 509, 1024x64x256 386 vs 461.
// The weight gradients (k = 1024, A read transposed) stay on OpenBLAS: 449-540 vs
// 438-478 us.
const (
	f32SmallMidMax = 1 << 24
	f32SmallMidK   = 256
)

// f32SmallMaxK bounds k: each 16-column strip of B (64 bytes a k) is reread for every
// 6-row tile, and should stay within L2.
const f32SmallMaxK = 4096

// f32SmallSplitMin is the smallest m*n*k split over the workers (blasSplitMin, where
// OpenBLAS's products split too); HPUSIM_F32SMALL_SPLIT=<m*n*k> moves it. Measured at a
// load of 5-7 on the 2-core machine (TestF32SmallTimings), one worker was faster at every
// MLP shape (64x128x64: 12.5 µs vs 15.5-19.5 split, OpenBLAS 15.8 on one thread and 20-22
// split): the second core was rarely free. Products are the same bits either way.
var f32SmallSplitMin = func() float64 {
	if v, err := strconv.Atoi(os.Getenv("HPUSIM_F32SMALL_SPLIT")); err == nil {
		return float64(v)
	}
	return blasSplitMin
}()

// f32SmallCalls counts products run on the small kernel (tests check the route), and
// f32SmallBiasCalls those of them with the bias in the epilogue (f32SmallBias).
var f32SmallCalls, f32SmallBiasCalls atomic.Int64

// useF32Small reports whether an m×n×k float32 product runs on the small kernel: wide
// enough for its 16-column tiles to pay, within f32SmallMax and f32SmallMaxK. CPUs whose
// float32 GEMMs run on the AVX-512 micro-kernel keep it.
func useF32Small(m, n, k int) bool {
	return f32SmallOn && m >= 4 && n >= 8 && k >= 1 && k <= f32SmallMaxK &&
		f32SmallSize(float64(m)*float64(n)*float64(k), k) && !useF32Dot[float32](m, n, k)
}

// f32SmallSize: the product size (mnk = m*n*k) the small kernel takes.
func f32SmallSize(mnk float64, k int) bool {
	return mnk < f32SmallMax || k <= f32SmallMidK && mnk <= f32SmallMidMax
}

// f32SmallGemm computes row-major C = alpha*op(A) op(B) + beta*C (beta 0: C is not read),
// or with a bias (n floats, nil for none) C = alpha*op(A) op(B) + beta*bias broadcast over
// the rows (addmm's self without its copy into C; C is not read). The work is split over
// the workers from f32SmallSplitMin: by 16-column strips of C when there are two or more,
// else by 6-row tiles. Each part packs op(B)'s strips into its own 16*k scratch floats.
func f32SmallGemm(tA, tB bool, m, n, k int, alpha float32, a unsafe.Pointer, lda int, b unsafe.Pointer, ldb int,
	beta float32, c unsafe.Pointer, ldc int, bias unsafe.Pointer) {
	f32SmallCalls.Add(1)
	if bias != nil {
		f32SmallBiasCalls.Add(1)
	}
	strips, tiles := (n+15)/16, (m+5)/6
	w := Workers()
	parts, per, byStrip := 1, 0, false
	if w >= 2 && float64(m)*float64(n)*float64(k) >= f32SmallSplitMin && (strips >= 2 || tiles >= 2) {
		byStrip = strips >= 2
		units := tiles
		if byStrip {
			units = strips
		}
		per = (units + min(units, w) - 1) / min(units, w)
		parts = (units + per - 1) / per
	}
	sp := getF32(parts * 16 * k)
	defer putF32(sp)
	scratch := (*sp)[:parts*16*k]
	run := func(pi, i0, i1, j0, j1 int) {
		f32SmallCall(i0, i1, j0, j1, k, a, lda, tA, b, ldb, tB, scratch[pi*16*k:(pi+1)*16*k], c, ldc, alpha, beta, bias)
	}
	switch {
	case parts == 1:
		run(0, 0, m, 0, n)
	case byStrip:
		RunParts(parts, func(pi int) { run(pi, 0, m, pi*per*16, min((pi+1)*per*16, n)) })
	default:
		RunParts(parts, func(pi int) { run(pi, pi*per*6, min((pi+1)*per*6, m), 0, n) })
	}
}
