//go:build !cgo || noblas

package kernels

import "unsafe"

// BLASName names the GEMM backend in use.
const BLASName = "gonum"

// blasGemm computes row-major C = alpha*op(A)*op(B) + beta*C (m×n, inner k) with gonum.
func blasGemm[T gemmFloat](tA, tB bool, m, n, k int, alpha T, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta T, c unsafe.Pointer, ldc int) {
	gonumGemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// blasGemmSerial is blasGemm (gonum's GEMM runs on the calling goroutine).
func blasGemmSerial[T gemmFloat](tA, tB bool, m, n, k int, alpha T, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta T, c unsafe.Pointer, ldc int) {
	gonumGemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SerialBLAS is a no-op: gonum's GEMM has no threads of its own.
func SerialBLAS() {}

// f32DotReplacesBLAS: gonum's GEMM is the no-cgo path; it keeps every product.
func f32DotReplacesBLAS() bool { return false }
