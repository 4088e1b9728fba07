//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include "gemm_f32small.h"
*/
import "C"

import "unsafe"

var f32SmallCPU = C.hpusim_f32small_supported() != 0

// f32SmallCall computes rows [i0, i1) and columns [j0, j1) of C = alpha*op(A) op(B) +
// beta*(C or bias) (see the C above); bs holds 16*k floats of scratch for B's strips.
func f32SmallCall(i0, i1, j0, j1, k int, a unsafe.Pointer, lda int, ta bool, b unsafe.Pointer, ldb int, tb bool,
	bs []float32, c unsafe.Pointer, ldc int, alpha, beta float32, bias unsafe.Pointer) {
	C.hpusim_f32small(C.int64_t(i0), C.int64_t(i1), C.int64_t(j0), C.int64_t(j1), C.int64_t(k), (*C.float)(a),
		C.int64_t(lda), cBool(ta), (*C.float)(b), C.int64_t(ldb), cBool(tb), (*C.float)(unsafe.Pointer(&bs[0])),
		(*C.float)(c), C.int64_t(ldc), C.float(alpha), C.float(beta), (*C.float)(bias))
}
