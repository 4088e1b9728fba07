//go:build cgo && !noblas

package kernels

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import "unsafe"

// BLASName names the GEMM backend in use.
const BLASName = "openblas"

func init() {
	// Two threads match the two cores of the emulated host; set explicitly so the
	// environment (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS) cannot oversubscribe.
	C.openblas_set_num_threads(2)
}

func cTrans(t bool) C.enum_CBLAS_TRANSPOSE {
	if t {
		return C.CblasTrans
	}
	return C.CblasNoTrans
}

// blasGemm computes row-major C = alpha*op(A)*op(B) + beta*C (m×n, inner k).
func blasGemm[T gemmFloat](tA, tB bool, m, n, k int, alpha T, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta T, c unsafe.Pointer, ldc int) {
	switch any(alpha).(type) {
	case float32:
		C.cblas_sgemm(C.CblasRowMajor, cTrans(tA), cTrans(tB), C.blasint(m), C.blasint(n), C.blasint(k),
			C.float(alpha), (*C.float)(a), C.blasint(lda), (*C.float)(b), C.blasint(ldb),
			C.float(beta), (*C.float)(c), C.blasint(ldc))
	case float64:
		C.cblas_dgemm(C.CblasRowMajor, cTrans(tA), cTrans(tB), C.blasint(m), C.blasint(n), C.blasint(k),
			C.double(alpha), (*C.double)(a), C.blasint(lda), (*C.double)(b), C.blasint(ldb),
			C.double(beta), (*C.double)(c), C.blasint(ldc))
	}
}
