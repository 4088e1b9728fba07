package kernels

import (
	"os"
	"unsafe"
)

// Small float32 products on an AVX2+FMA kernel of hpusim's own (gemm_f32small_cgo.go)
// instead of one OpenBLAS call each: attention's per-head products (bmm of 64 batches of
// 64x64x16, 64x16x64, 64x64x64 at the bench transformer's shapes) spent more in OpenBLAS's
// interface, buffer and packing than in arithmetic. The kernel keeps a 4x16 tile of C in
// registers and sums every element as one fused multiply-add chain over k from zero. That
// is not OpenBLAS's summation order (its Haswell kernel splits the chain), so results may
// differ from it in the last bits; both stay within a few ulps of the float64 product
// (TestF32SmallMatchesBLAS), and each batch is one call, so any worker count gives the
// same bits. HPUSIM_F32SMALL=0 keeps OpenBLAS (A/B checks).
var f32SmallOn = f32SmallCPU && os.Getenv("HPUSIM_F32SMALL") != "0"

// f32SmallMaxK bounds k to one of OpenBLAS's K blocks (sgemm's Q is 256 or more on the
// AVX2 kernel sets): a longer chain OpenBLAS sums block by block into C.
const f32SmallMaxK = 256

// useF32Small reports whether a plain product (alpha 1, C overwritten) of m×n×k float32
// runs on the small kernel: below the size blasGemm splits over workers, k within one
// block, and wide enough for its 16-column tiles to pay. CPUs whose float32 GEMMs run on
// the AVX-512 micro-kernel keep it.
func useF32Small(m, n, k int) bool {
	return f32SmallOn && m >= 4 && n >= 8 && k >= 1 && k <= f32SmallMaxK &&
		float64(m)*float64(n)*float64(k) < blasSplitMin && !useF32Dot[float32](m, n, k)
}

// f32SmallGemm computes row-major C = op(A) op(B) (ldc) on the calling thread; a
// transposed B is first copied row-major into scratch.
func f32SmallGemm(tA, tB bool, m, n, k int, a unsafe.Pointer, lda int, b unsafe.Pointer, ldb int,
	c unsafe.Pointer, ldc int) {
	ars, acs := int64(lda), int64(1)
	if tA {
		ars, acs = 1, int64(lda)
	}
	if tB {
		sp := getF32(k * n)
		defer putF32(sp)
		bt := (*sp)[:k*n]
		src := unsafe.Slice((*float32)(b), (n-1)*ldb+k)
		for j := 0; j < n; j++ {
			row := src[j*ldb : j*ldb+k]
			for kk, v := range row {
				bt[kk*n+j] = v
			}
		}
		b, ldb = unsafe.Pointer(&bt[0]), n
	}
	f32SmallCall(m, n, k, a, ars, acs, b, ldb, c, ldc)
}
