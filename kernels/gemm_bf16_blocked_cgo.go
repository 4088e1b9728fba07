//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
// The epilogue rounds alpha*sum and beta*self before adding them, as bgemmHalf does.
#pragma GCC optimize("fp-contract=off")
#include "gemm_bf16_blocked.h"

// The epilogue's pointers arrive as arguments (a Go struct holding them would be Go
// memory with Go pointers in it, which cgo may not pass).
static void hpusim_gb_run(const uint16_t *pa, int64_t lda, const uint16_t *pb, int64_t m, int64_t n, int64_t k, int64_t p0,
                          int64_t p1, int64_t q0, int64_t q1, int64_t kk0, int64_t kk1, float *c, int64_t ldc,
                          int add, uint16_t *o, int64_t ldo, const uint16_t *s, int64_t lds, float alpha,
                          float beta, int trans) {
	gb_epi e = {c, ldc, add, o, ldo, s, lds, alpha, beta, alpha != 1.0f, trans};
	hpusim_gb_tiles(pa, lda, pb, m, n, k, p0, p1, q0, q1, kk0, kk1, &e);
}
*/
import "C"

import "unsafe"

// gbMR and gbNR are the blocked kernel's tile: A panels of gbMR rows, B panels of up to
// gbNR columns (gemm_bf16_blocked.h).
const (
	gbMR = 6
	gbNR = 64
)

func u16p(s []uint16) *C.uint16_t { return (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(s))) }

// gbPackA packs A panels [p0, p1) of the m×k bfloat16 matrix at a (element strides rs, cs).
func gbPackA(dst []uint16, a unsafe.Pointer, rs, cs int64, m, k, p0, p1 int) {
	C.hpusim_gb_pack_a(u16p(dst), (*C.uint16_t)(a), C.int64_t(rs), C.int64_t(cs), C.int64_t(m), C.int64_t(k),
		C.int64_t(p0), C.int64_t(p1))
}

// gbPackB packs B panels [q0, q1) of the k×n bfloat16 matrix at b (element strides rs, cs).
func gbPackB(dst []uint16, b unsafe.Pointer, rs, cs int64, k, n, q0, q1 int) {
	C.hpusim_gb_pack_b(u16p(dst), (*C.uint16_t)(b), C.int64_t(rs), C.int64_t(cs), C.int64_t(k), C.int64_t(n),
		C.int64_t(q0), C.int64_t(q1))
}

// gbTiles runs the tiles of A panels [p0, p1) × B panels [q0, q1) over k pairs [kk0, kk1)
// with epilogue e; A is packed at pa (lda 0) or read in place (row-major, row stride lda).
func gbTiles(pa unsafe.Pointer, lda int64, pb []uint16, m, n, k, p0, p1, q0, q1, kk0, kk1 int, e *gbEpilogue) {
	C.hpusim_gb_run((*C.uint16_t)(pa), C.int64_t(lda), u16p(pb), C.int64_t(m), C.int64_t(n), C.int64_t(k), C.int64_t(p0), C.int64_t(p1),
		C.int64_t(q0), C.int64_t(q1), C.int64_t(kk0), C.int64_t(kk1),
		(*C.float)(e.c), C.int64_t(e.ldc), C.int(b2i(e.add)), (*C.uint16_t)(e.o), C.int64_t(e.ldo),
		(*C.uint16_t)(e.s), C.int64_t(e.lds), C.float(e.alpha), C.float(e.beta), C.int(b2i(e.trans)))
}
