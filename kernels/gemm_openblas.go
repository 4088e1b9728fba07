//go:build cgo && !noblas

package kernels

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import (
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// BLASName names the GEMM backend in use.
const BLASName = "openblas"

func init() {
	// OpenBLAS runs single-threaded except inside blasGemmThreaded: kernels that already
	// run one GEMM per worker (convolution, batched products, K splits) call it
	// concurrently, and its one thread pool cannot serve concurrent callers.
	C.openblas_set_num_threads(1)
}

// blasMu guards OpenBLAS's thread count, one global of the library: blasGemmThreaded
// raises it while it holds blasMu exclusively, and every single-threaded call holds it
// shared.
var blasMu sync.RWMutex

// blasThreadedMin is the smallest product (m*n*k) that runs on OpenBLAS's own threads:
// its threaded driver shares each packed panel between its threads, which the split in
// blasGemm cannot (every part packs the whole of the other operand). Against direct
// 2-thread OpenBLAS the split measured 0.67x at 256^3, 0.74-0.86x at 512^3 and 1024^3
// and 0.77-0.86x on a 64x1024x1024 linear layer; OpenBLAS's threads 0.81, 0.93-0.97 and
// 0.91. Those threads wait on each other, so nothing else may spin on the cores
// meanwhile: hpusim's idle workers park for the call (without that, threading every
// split-sized product made a transformer step 19 -> 23 ms; with it, and this threshold,
// training steps are unchanged), and lazy mode, where the host records concurrently,
// never threads (SerialBLAS). Below 2^24 multiply-adds (~0.1 ms) waking OpenBLAS's
// thread costs more than it saves. HPUSIM_BLAS_THREADED=0 never threads.
var blasThreadedMin = func() float64 {
	if os.Getenv("HPUSIM_BLAS_THREADED") == "0" {
		return math.Inf(1)
	}
	return 1 << 24
}()

// blasThreadsOff keeps every product off OpenBLAS's threads (see SerialBLAS).
var blasThreadsOff atomic.Bool

// SerialBLAS keeps every GEMM from now on off OpenBLAS's own threads. Lazy mode calls it:
// there the host thread records the next graph while the worker runs this one, and a
// threaded GEMM's extra thread oversubscribes the cores; OpenBLAS's threads wait on each
// other for shared panels, so one preempted thread stalls both (a lazy transformer step
// took 18.0 -> 22.6 ms with its 2^24-sized products threaded). hpusim's own split has
// no such waits: a late part is taken by whichever worker is free.
func SerialBLAS() { blasThreadsOff.Store(true) }

// blasGemmThreaded runs one GEMM on w OpenBLAS threads when it is large enough and no
// other BLAS call is in flight, and reports whether it did.
func blasGemmThreaded[T gemmFloat](w int, tA, tB bool, m, n, k int, alpha T, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta T, c unsafe.Pointer, ldc int) bool {
	if float64(m)*float64(n)*float64(k) < blasThreadedMin || blasThreadsOff.Load() {
		return false
	}
	// A RunParts in flight means this may be one of its parts, with a sibling part
	// about to call BLAS single-threaded; a held lock, that a call is in flight.
	if workPool.busy.Load() || !blasMu.TryLock() {
		return false
	}
	defer blasMu.Unlock()
	// hpusim's idle workers (the pool's and the C team's) park instead of spinning into
	// OpenBLAS's threads.
	hushTeam()
	workPool.hush.Store(true)
	defer workPool.hush.Store(false)
	C.openblas_set_num_threads(C.int(w))
	defer C.openblas_set_num_threads(1)
	blasCall(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return true
}

// f32DotReplacesBLAS: OpenBLAS runs a kernel set without AVX-512 (its core name), so on a
// CPU with AVX-512 float32 GEMMs run on hpusim's micro-kernel instead (gemm_f32dot.go).
func f32DotReplacesBLAS() bool {
	switch strings.ToLower(C.GoString(C.openblas_get_corename())) {
	case "skylakex", "cooperlake", "sapphirerapids":
		return false
	}
	return true
}

// blasThreads is OpenBLAS's current thread count.
func blasThreads() int { return int(C.openblas_get_num_threads()) }

func cTrans(t bool) C.enum_CBLAS_TRANSPOSE {
	if t {
		return C.CblasTrans
	}
	return C.CblasNoTrans
}

// blasGemm computes row-major C = alpha*op(A)*op(B) + beta*C (m×n, inner k). A product
// of blasThreadedMin or more runs on OpenBLAS's threads when it may; a large one is
// otherwise split by rows or columns of C over the workers. Each element's arithmetic is
// that of one sgemm call on its part, so neither changes results beyond which kernel edge
// handles which element.
func blasGemm[T gemmFloat](tA, tB bool, m, n, k int, alpha T, a unsafe.Pointer, lda int,
	b unsafe.Pointer, ldb int, beta T, c unsafe.Pointer, ldc int) {
	if useF32Dot[T](m, n, k) {
		f32DotGemm(tA, tB, m, n, k, any(alpha).(float32), a, lda, b, ldb, any(beta).(float32), c, ldc)
		return
	}
	w := Workers()
	if w < 2 || float64(m)*float64(n)*float64(k) < blasSplitMin {
		blasGemmSerial(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if blasGemmThreaded(w, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
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
	if useF32Dot[T](m, n, k) {
		f32DotSerial(tA, tB, m, n, k, any(alpha).(float32), a, lda, b, ldb, any(beta).(float32), c, ldc)
		return
	}
	blasMu.RLock()
	defer blasMu.RUnlock()
	blasCall(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// blasCall is the cblas call itself, on as many threads as OpenBLAS is set to.
func blasCall[T gemmFloat](tA, tB bool, m, n, k int, alpha T, a unsafe.Pointer, lda int,
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
