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
	// OpenBLAS runs single-threaded; blasGemm splits large products over goroutines
	// itself. OpenBLAS's own threads would spin-wait (sched_yield) between calls and take
	// a core from the Go kernels that run between GEMMs, and they cannot serve the
	// concurrent calls of kernels that already run per worker (conv blocks, K splits).
	C.openblas_set_num_threads(1)
}

func cTrans(t bool) C.enum_CBLAS_TRANSPOSE {
	if t {
		return C.CblasTrans
	}
	return C.CblasNoTrans
}

// blasGemm computes row-major C = alpha*op(A)*op(B) + beta*C (m×n, inner k), splitting
// the rows or columns of C over the workers when the product is large. Each element's
// arithmetic is that of one sgemm call on its part, so the split does not change results
// beyond which kernel edge handles which element.
func blasGemm[T gemmFloat](tA, tB bool, m, n, k int, alpha T, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta T, c unsafe.Pointer, ldc int) {
	w := Workers()
	// Someone raised OpenBLAS's thread count (a benchmark comparing against it, say):
	// let it thread, as concurrent calls into its one thread pool would queue.
	if w < 2 || float64(m)*float64(n)*float64(k) < blasSplitMin || C.openblas_get_num_threads() != 1 {
		blasGemmSerial(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	es := int(unsafe.Sizeof(alpha))
	// Split the longer of C's dims, in multiples of the micro-kernel's tile.
	byRows := m >= n
	total, align := n, 8
	if byRows {
		total, align = m, 16
	}
	if total < 2*align {
		blasGemmSerial(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// More parts than workers, claimed dynamically: a helper that is late (its thread
	// was descheduled) leaves its share to the others.
	parts := 2 * w
	per := (total + parts - 1) / parts
	per = (per + align - 1) / align * align
	parts = (total + per - 1) / per
	RunParts(parts, func(pi int) {
		lo := pi * per
		hi := min(lo+per, total)
		ap, bp, cp := a, b, c
		mm, nn := m, n
		if byRows {
			mm = hi - lo
			cp = unsafe.Add(c, lo*ldc*es)
			if tA {
				ap = unsafe.Add(a, lo*es)
			} else {
				ap = unsafe.Add(a, lo*lda*es)
			}
		} else {
			nn = hi - lo
			cp = unsafe.Add(c, lo*es)
			if tB {
				bp = unsafe.Add(b, lo*ldb*es)
			} else {
				bp = unsafe.Add(b, lo*es)
			}
		}
		blasGemmSerial(tA, tB, mm, nn, k, alpha, ap, lda, bp, ldb, beta, cp, ldc)
	})
}

// blasGemmSerial is one BLAS call on the calling thread (for callers that already run
// one GEMM per worker).
func blasGemmSerial[T gemmFloat](tA, tB bool, m, n, k int, alpha T, a unsafe.Pointer, lda int,
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
