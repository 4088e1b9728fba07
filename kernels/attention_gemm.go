package kernels

import "unsafe"

// attGemm is the attention tiles' product: row-major C (m x n) = alpha*A*B, or, with
// accum, C + alpha*A*B, the rows of C first scaled by rs when it is given. A's element
// (r, kk) is at a[r*ars + kk*acs] (one of the strides 1: a tile read as it lies or as its
// transpose), B is row-major with leading dimension ldb. kind tells which products the
// causal limit zeroes (the tile's query i0+r or i0+kk sees key j0+c when c <= r+off,
// off = i0-j0), so the AVX-512 loops (attention_gemm_cgo.go) can skip them; elsewhere it
// is a serial sgemm, which computes them (they are zeros or later masked anyway).
//
// With kind attKeyByQuery the operand A is read down its columns past row m, up to 11
// floats beyond the tile: the tile buffers keep attSlack floats of room.
func attGemm(m, n, k int64, a unsafe.Pointer, ars, acs int64, b unsafe.Pointer, ldb int64, c unsafe.Pointer, ldc int64,
	alpha float32, accum bool, rs []float32, kind attCausalKind, off int64) {
	if m <= 0 || n <= 0 {
		return
	}
	if attGemmFast {
		attGemmC(m, n, k, a, ars, acs, b, ldb, c, ldc, alpha, accum, rs, kind, off)
		return
	}
	beta := float32(0)
	if accum {
		beta = 1
		if rs != nil {
			for r := int64(0); r < m; r++ {
				row := unsafe.Slice((*float32)(unsafe.Add(c, r*ldc*4)), n)
				for j := range row {
					row[j] *= rs[r]
				}
			}
		}
	}
	if k <= 0 {
		if !accum {
			for r := int64(0); r < m; r++ {
				clear(unsafe.Slice((*float32)(unsafe.Add(c, r*ldc*4)), n))
			}
		}
		return
	}
	tA, lda := false, ars
	if acs != 1 {
		tA, lda = true, acs
	}
	blasGemmSerial(tA, false, int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc))
}

// attCausalKind says how a product's rows and k index map to queries and keys.
type attCausalKind int

const (
	attNoCausal   attCausalKind = iota
	attQueryKey                 // rows queries, columns keys: whole masked blocks are zeros
	attQueryByKey               // rows queries, k keys (P V, dS K)
	attKeyByQuery               // rows keys, k queries (P^T dO, dS^T Q)
)

// attSlack is the room kept after each tile buffer (see attGemm).
const attSlack = 16
