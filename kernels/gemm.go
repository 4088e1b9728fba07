package kernels

import (
	"fmt"
	"slices"
	"unsafe"
)

// gemmFloat is a compute type of the BLAS path: float32 serves float32, bfloat16 and
// float16 (converted while packing, accumulated in float32, rounded on store); float64
// serves float64.
type gemmFloat interface{ float32 | float64 }

// loadRowT converts n elements of dtype dt, byte stride s, into dst.
func loadRowT[T gemmFloat](dst []T, p unsafe.Pointer, s int64, dt DType) {
	switch dt {
	case Float32:
		for i := range dst {
			dst[i] = T(*(*float32)(at(p, int64(i)*s)))
		}
	case BFloat16:
		for i := range dst {
			dst[i] = T(BF16ToF32(*(*uint16)(at(p, int64(i)*s))))
		}
	case Float16:
		for i := range dst {
			dst[i] = T(F16ToF32(*(*uint16)(at(p, int64(i)*s))))
		}
	case Float64:
		for i := range dst {
			dst[i] = T(*(*float64)(at(p, int64(i)*s)))
		}
	default:
		panic(fmt.Sprintf("loadRowT: unsupported dtype %v", dt))
	}
}

// storeRowT converts src into n elements of dtype dt at byte stride s, rounding to
// nearest-even.
func storeRowT[T gemmFloat](p unsafe.Pointer, s int64, dt DType, src []T) {
	switch dt {
	case Float32:
		for i, v := range src {
			*(*float32)(at(p, int64(i)*s)) = float32(v)
		}
	case BFloat16:
		for i, v := range src {
			*(*uint16)(at(p, int64(i)*s)) = F32ToBF16(float32(v))
		}
	case Float16:
		for i, v := range src {
			*(*uint16)(at(p, int64(i)*s)) = F32ToF16(float32(v))
		}
	case Float64:
		for i, v := range src {
			*(*float64)(at(p, int64(i)*s)) = float64(v)
		}
	default:
		panic(fmt.Sprintf("storeRowT: unsupported dtype %v", dt))
	}
}

// nativeOf reports whether dtype dt is stored exactly as the compute type T.
func nativeOf[T gemmFloat](dt DType) bool {
	var z T
	switch any(z).(type) {
	case float32:
		return dt == Float32
	default:
		return dt == Float64
	}
}

// isGemmDType reports dtypes the GEMM-based kernels accept.
func isGemmDType(dt DType) bool {
	return dt == Float32 || dt == BFloat16 || dt == Float16 || dt == Float64
}

// matView is an r×c matrix at p with element strides (sr, sc).
type matView struct {
	p      unsafe.Pointer
	dt     DType
	r, c   int
	sr, sc int64
}

// operand returns a BLAS-ready (pointer, leading dimension, transposed) form of m, using
// m's memory directly when its dtype and strides allow, else packing it into *buf.
func operand[T gemmFloat](m matView, buf *[]T) (unsafe.Pointer, int, bool) {
	sr, sc := m.sr, m.sc
	if m.c == 1 {
		sc = 1
	}
	if m.r == 1 {
		sr = int64(max(m.c, 1))
	}
	if nativeOf[T](m.dt) && m.r > 0 && m.c > 0 {
		if sc == 1 && sr >= int64(max(m.c, 1)) {
			return m.p, int(sr), false
		}
		if sr == 1 && sc >= int64(max(m.r, 1)) {
			return m.p, int(sc), true
		}
	}
	n := m.r * m.c
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	dst := (*buf)[:n]
	es := int64(m.dt.Size())
	ParallelFor(int64(m.r), int64(m.c), func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			loadRowT(dst[i*int64(m.c):(i+1)*int64(m.c)], at(m.p, i*m.sr*es), m.sc*es, m.dt)
		}
	})
	if n == 0 {
		var z T
		return unsafe.Pointer(&z), max(m.c, 1), false
	}
	return unsafe.Pointer(&dst[0]), max(m.c, 1), false
}

func check3(name string, t Tensor) error {
	if t.Dim() != 3 {
		return fmt.Errorf("%s must be 3-D, got %d-D", name, t.Dim())
	}
	if !isGemmDType(t.DType) && !isIntGemmDType(t.DType) {
		return fmt.Errorf("%s: unsupported dtype %v", name, t.DType)
	}
	return nil
}

// BatchedGemm computes out[b] = alpha * a[b]@m2[b] + beta * self[b] over 3-D strided
// operands (self may be nil, and is ignored when beta == 0, as in torch). Any operand may
// be a transposed or broadcast (0-stride) view.
func BatchedGemm(out, a, b Tensor, self *Tensor, alpha, beta float64) error {
	for _, x := range []struct {
		n string
		t Tensor
	}{{"out", out}, {"mat1", a}, {"mat2", b}} {
		if err := check3(x.n, x.t); err != nil {
			return err
		}
	}
	B, M, K, N := a.Sizes[0], a.Sizes[1], a.Sizes[2], b.Sizes[2]
	if b.Sizes[0] != B || b.Sizes[1] != K || out.Sizes[0] != B || out.Sizes[1] != M || out.Sizes[2] != N {
		return fmt.Errorf("shape mismatch: out %v, mat1 %v, mat2 %v", out.Sizes, a.Sizes, b.Sizes)
	}
	if a.DType != b.DType || a.DType != out.DType {
		return fmt.Errorf("dtype mismatch: out %v, mat1 %v, mat2 %v", out.DType, a.DType, b.DType)
	}
	if beta == 0 {
		self = nil
	}
	if self != nil {
		if err := check3("self", *self); err != nil {
			return err
		}
		for i, s := range []int64{B, M, N} {
			if self.Sizes[i] != s {
				return fmt.Errorf("self of shape %v does not broadcast to %v", self.Sizes, out.Sizes)
			}
		}
	}
	if !a.DType.IsFloat() {
		return bgemmInt(out, a, b, self, alpha, beta) // gemm_int.go
	}
	if a.DType == BFloat16 || a.DType == Float16 {
		bgemmHalf(out, a, b, self, alpha, beta) // gemm_bf16.go
		return nil
	}
	if a.DType == Float64 {
		bgemm[float64](out, a, b, self, alpha, beta)
	} else {
		bgemm[float32](out, a, b, self, alpha, beta)
	}
	return nil
}

// overlaps reports whether the memory spans of x and y intersect.
func overlaps(x, y Tensor) bool {
	span := func(t Tensor) (lo, hi uintptr) {
		es := int64(t.DType.Size())
		var l, h int64
		for d, n := range t.Sizes {
			if n == 0 {
				return 0, 0
			}
			if st := (n - 1) * t.Strides[d] * es; st < 0 {
				l += st
			} else {
				h += st
			}
		}
		return uintptr(t.Ptr) + uintptr(l), uintptr(t.Ptr) + uintptr(h+es)
	}
	xl, xh := span(x)
	yl, yh := span(y)
	return xl < yh && yl < xh
}

func batchMat(t Tensor, bi int64) matView {
	es := int64(t.DType.Size())
	return matView{p: at(t.Ptr, bi*t.Strides[0]*es), dt: t.DType, r: int(t.Sizes[1]), c: int(t.Sizes[2]),
		sr: t.Strides[1], sc: t.Strides[2]}
}

// blasSplitMin is the smallest m*n*k worth splitting over workers (OpenBLAS's own
// threading threshold); bmm splits smaller products by batch instead.
const blasSplitMin = 1 << 18

// bgemmOne computes batch bi's product into c (ldc): alpha*a_bi@b_bi + beta0*c, where
// beta0 applies when K == 0 too (c = beta0*c). kOrder allows CPU's plain k-order sum for
// the tiny shapes where torch uses it (a plain product: alpha 1, no self). abuf/bbuf hold
// operands BLAS cannot take.
func bgemmOne[T gemmFloat](a, b Tensor, bi int64, M, N, K int, alpha float64, kOrder bool, beta0 T,
	c unsafe.Pointer, ldc int, abuf, bbuf *[]T) {
	if K == 0 {
		for i := 0; i < M; i++ {
			row := unsafe.Slice((*T)(at(c, int64(i*ldc)*int64(unsafe.Sizeof(T(0))))), N)
			if beta0 == 0 {
				clear(row)
				continue
			}
			for j := range row {
				row[j] *= beta0
			}
		}
		return
	}
	ap, lda, ta := operand(batchMat(a, bi), abuf)
	bp, ldb, tb := operand(batchMat(b, bi), bbuf)
	al := T(alpha)
	if _, ok := any(al).(float32); ok && alpha == 1 && kOrder && cpuKOrderShape(ta, tb, M, K, N) {
		smallGemmKOrder32(ta, tb, M, N, K, ap, lda, bp, ldb, c, ldc)
	} else if ok && useF32Small(M, N, K) {
		f32SmallGemm(ta, tb, M, N, K, float32(alpha), ap, lda, bp, ldb, any(beta0).(float32), c, ldc, nil)
	} else {
		blasGemm(ta, tb, M, N, K, al, ap, lda, bp, ldb, beta0, c, ldc)
	}
}

func bgemm[T gemmFloat](out, a, b Tensor, self *Tensor, alpha, beta float64) {
	B, M, K, N := int(a.Sizes[0]), int(a.Sizes[1]), int(a.Sizes[2]), int(b.Sizes[2])
	if B == 0 || M == 0 || N == 0 {
		return
	}
	var abuf, bbuf, cbuf []T
	o0 := batchMat(out, 0)
	direct := nativeOf[T](out.DType) && (o0.sc == 1 || N == 1) && o0.sr >= int64(N)
	if M == 1 {
		direct = nativeOf[T](out.DType) && (o0.sc == 1 || N == 1)
	}
	if direct && self != nil {
		// addmm/baddbmm as CPU torch runs them: self (broadcast) copied into out, then
		// one GEMM with beta accumulating onto it. Needs out apart from the operands
		// (self may be out itself, as in addmm_).
		same := self.Ptr == out.Ptr && slices.Equal(self.Strides, out.Strides) && self.DType == out.DType
		if overlaps(out, a) || overlaps(out, b) || (!same && overlaps(out, *self)) || out.Strides[0] == 0 && B > 1 {
			direct = false
		} else if !same {
			if _, ok := any(T(0)).(float32); ok && B == 1 && f32SmallBias(out, a, b, *self, M, N, K, alpha, beta) {
				return
			}
			if err := Copy(out, *self); err != nil {
				panic(err)
			}
		}
	}
	if !direct {
		cbuf = make([]T, M*N)
	}
	beta0 := T(0)
	if direct && self != nil {
		beta0 = T(beta)
	}
	if direct && B > 1 && float64(M)*float64(N)*float64(K) < blasSplitMin {
		// Many small products (attention's per-head matmuls): the batches split over
		// the workers, each with its own operand buffers; every product is the same
		// single call it is in the loop below, so the results are too.
		ParallelFor(int64(B), int64(M*N*max(K, 1)), func(lo, hi int64) {
			var abuf, bbuf []T
			for bi := lo; bi < hi; bi++ {
				om := batchMat(out, bi)
				ldc := N
				if M > 1 {
					ldc = int(om.sr)
				}
				bgemmOne(a, b, bi, M, N, K, alpha, alpha == 1 && self == nil, beta0, om.p, ldc, &abuf, &bbuf)
			}
		})
		return
	}
	for bi := 0; bi < B; bi++ {
		om := batchMat(out, int64(bi))
		cptr, ldc := unsafe.Pointer(nil), N
		if direct {
			cptr = om.p
			if M > 1 {
				ldc = int(om.sr)
			}
		} else {
			cptr = unsafe.Pointer(&cbuf[0])
		}
		al := alpha
		if !direct {
			al = 1
		}
		bgemmOne(a, b, int64(bi), M, N, K, al, alpha == 1 && self == nil, beta0, cptr, ldc, &abuf, &bbuf)
		if direct {
			continue
		}
		// Epilogue: out = alpha*C + beta*self, rounded once into out's dtype.
		var sm matView
		if self != nil {
			sm = batchMat(*self, int64(bi))
		}
		oes := int64(out.DType.Size())
		ParallelFor(int64(M), int64(N), func(lo, hi int64) {
			tmp := make([]T, N)
			for i := lo; i < hi; i++ {
				crow := cbuf[i*int64(N) : (i+1)*int64(N)]
				if self != nil {
					ses := int64(self.DType.Size())
					loadRowT(tmp, at(sm.p, i*sm.sr*ses), sm.sc*ses, sm.dt)
					for j := range tmp {
						tmp[j] = T(alpha)*crow[j] + T(beta)*tmp[j]
					}
				} else if alpha != 1 {
					for j := range tmp {
						tmp[j] = T(alpha) * crow[j]
					}
				} else {
					copy(tmp, crow)
				}
				storeRowT(at(om.p, i*om.sr*oes), om.sc*oes, out.DType, tmp)
			}
		})
	}
}

// f32SmallBias runs a float32 addmm whose self is a row broadcast over out's rows (a
// Linear layer's bias) on the small kernel with the bias in its epilogue,
// out = alpha*a@b + beta*bias, instead of copying self into out first and reading it back:
// the same roundings, fma(beta, bias, alpha*sum), so the same bits. It reports false (and
// does nothing) for any other case. out is one direct matrix apart from a, b and self.
func f32SmallBias(out, a, b, self Tensor, M, N, K int, alpha, beta float64) bool {
	if self.DType != Float32 || !useF32Small(M, N, K) || overlaps(out, self) ||
		!(self.Strides[1] == 0 || M == 1) || !(self.Strides[2] == 1 || N == 1) {
		return false
	}
	var abuf, bbuf []float32
	ap, lda, ta := operand(batchMat(a, 0), &abuf)
	bp, ldb, tb := operand(batchMat(b, 0), &bbuf)
	om := batchMat(out, 0)
	ldc := N
	if M > 1 {
		ldc = int(om.sr)
	}
	f32SmallGemm(ta, tb, M, N, K, float32(alpha), ap, lda, bp, ldb, float32(beta), om.p, ldc, self.Ptr)
	return true
}

// cpuKOrderShape reports the tiny float32 products (M, N <= 8, K <= 5) for which torch's
// CPU BLAS (MKL's small-matrix path) was measured to compute every element as a plain
// sum over k in increasing order, each product rounded before it is added (no FMA),
// starting from zero. ta/tb say whether A/B are read transposed (column-major). The
// shapes left out use other kernels (vectorised partial sums) that this does not model.
func cpuKOrderShape(ta, tb bool, M, K, N int) bool {
	if M > 8 || N > 8 || K > 5 {
		return false
	}
	if K <= 3 {
		return true
	}
	switch {
	case !ta && !tb:
		return !(K == 5 && M >= 4 && (N == 1 || N == 5))
	case ta && !tb:
		return true
	case ta && tb:
		return !(M == 1 && K == 5 && N >= 4)
	case K == 4: // !ta && tb
		return M == 1 || N <= 3
	default:
		return N <= 3 && !(M >= 4 && N == 1)
	}
}

// smallGemmKOrder32 computes C = A@B for float32 operands in BLAS layout (row-major with
// leading dimensions; ta/tb read A/B transposed) as sum_k fl(a_ik*b_kj), k ascending.
func smallGemmKOrder32(ta, tb bool, M, N, K int, a unsafe.Pointer, lda int, b unsafe.Pointer, ldb int,
	c unsafe.Pointer, ldc int) {
	ael := func(i, k int) float32 {
		if ta {
			return *(*float32)(at(a, int64(k*lda+i)*4))
		}
		return *(*float32)(at(a, int64(i*lda+k)*4))
	}
	bel := func(k, j int) float32 {
		if tb {
			return *(*float32)(at(b, int64(j*ldb+k)*4))
		}
		return *(*float32)(at(b, int64(k*ldb+j)*4))
	}
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			var s float32
			for k := 0; k < K; k++ {
				s += float32(ael(i, k) * bel(k, j)) // the conversion forbids FMA fusion
			}
			*(*float32)(at(c, int64(i*ldc+j)*4)) = s
		}
	}
}

// BatchedGemmNaive computes out[b] = a[b] @ m2[b] for float32/float64 3-D strided operands
// with torch CPU's small-bmm loop (used when K*M*N < 400): every element summed over k in
// increasing order in the operand dtype, each product rounded before it is added.
func BatchedGemmNaive(out, a, b Tensor) error {
	for _, t := range []Tensor{out, a, b} {
		if t.Dim() != 3 || (t.DType != Float32 && t.DType != Float64) || t.DType != out.DType {
			return fmt.Errorf("bmm_naive: float32/float64 3-D operands of one dtype, got %v %v", t.DType, t.Sizes)
		}
	}
	B, M, K, N := a.Sizes[0], a.Sizes[1], a.Sizes[2], b.Sizes[2]
	if b.Sizes[0] != B || b.Sizes[1] != K || out.Sizes[0] != B || out.Sizes[1] != M || out.Sizes[2] != N {
		return fmt.Errorf("shape mismatch: out %v, mat1 %v, mat2 %v", out.Sizes, a.Sizes, b.Sizes)
	}
	if out.DType == Float64 {
		naiveBmm[float64](out, a, b)
	} else {
		naiveBmm[float32](out, a, b)
	}
	return nil
}

func naiveBmm[T float32 | float64](out, a, b Tensor) {
	B, M, K, N := a.Sizes[0], a.Sizes[1], a.Sizes[2], b.Sizes[2]
	es := int64(unsafe.Sizeof(T(0)))
	el := func(t Tensor, bi, i, j int64) *T {
		return (*T)(at(t.Ptr, (bi*t.Strides[0]+i*t.Strides[1]+j*t.Strides[2])*es))
	}
	ParallelFor(B, M*N*max(K, 1), func(lo, hi int64) {
		for bi := lo; bi < hi; bi++ {
			for i := int64(0); i < M; i++ {
				for j := int64(0); j < N; j++ {
					var s T
					for k := int64(0); k < K; k++ {
						s += T(*el(a, bi, i, k) * *el(b, bi, k, j)) // the conversion forbids FMA fusion
					}
					*el(out, bi, i, j) = s
				}
			}
		}
	})
}
