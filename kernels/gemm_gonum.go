package kernels

import (
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

func gonumTrans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// matLen is how many elements a row-major r×c matrix with leading dimension ld spans.
func matLen(r, c, ld int) int {
	if r == 0 || c == 0 {
		return 0
	}
	return (r-1)*ld + c
}

// gonumGemm is the pure-Go GEMM; it is also the oracle of the Go tests.
func gonumGemm[T gemmFloat](tA, tB bool, m, n, k int, alpha T, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta T, c unsafe.Pointer, ldc int) {
	ar, ac := m, k
	if tA {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB {
		br, bc = n, k
	}
	impl := gonum.Implementation{}
	switch al := any(alpha).(type) {
	case float32:
		impl.Sgemm(gonumTrans(tA), gonumTrans(tB), m, n, k, al,
			unsafe.Slice((*float32)(a), matLen(ar, ac, lda)), lda,
			unsafe.Slice((*float32)(b), matLen(br, bc, ldb)), ldb,
			float32(beta), unsafe.Slice((*float32)(c), matLen(m, n, ldc)), ldc)
	case float64:
		impl.Dgemm(gonumTrans(tA), gonumTrans(tB), m, n, k, al,
			unsafe.Slice((*float64)(a), matLen(ar, ac, lda)), lda,
			unsafe.Slice((*float64)(b), matLen(br, bc, ldb)), ldb,
			float64(beta), unsafe.Slice((*float64)(c), matLen(m, n, ldc)), ldc)
	}
}
