package kernels

import "unsafe"

// bfloat16 rows through the float32 C row kernels: the
// generic paths of layer norm, softmax and sum load reduced inputs into float32 exactly,
// compute in float32 and round each result once on store, so widening the operands into
// float32 scratch, running the float32 kernel that performs the same operations, and
// rounding its results once (nearest-even) gives the same bits.

// reducedRows reports whether every operand is a bfloat16 [M,D] view with unit column
// stride and the C row kernels are available. float16 stays on the generic paths: its
// rounding keeps a NaN's sign, which the C and Go float32 code do not agree on (either
// may commute an add of two NaNs); bfloat16 rounds every NaN to 0x7fc0.
func reducedRows(ts ...Tensor) bool {
	for _, t := range ts {
		if t.DType != BFloat16 || t.Dim() != 2 || t.Strides[1] != 1 {
			return false
		}
	}
	return haveCNorm && !noCNorm
}

// halfBlock bounds the elements of a block of rows widened at a time (L1/L2 resident).
const halfBlock = 4096

// loadRowsF32 widens rows [r0, r0+len(dst)/D) of the [M,D] view t (unit column stride)
// exactly into dst, contiguous.
func loadRowsF32(dst []float32, t Tensor, r0 int64) {
	D := t.Sizes[1]
	es := int64(t.DType.Size())
	if t.Strides[0] == D {
		loadRowF32(dst, at(t.Ptr, r0*D*es), es, t.DType)
		return
	}
	for r := int64(0); r*D < int64(len(dst)); r++ {
		loadRowF32(dst[r*D:(r+1)*D], at(t.Ptr, (r0+r)*t.Strides[0]*es), es, t.DType)
	}
}

// storeRowsF32 rounds the contiguous rows src once (nearest-even) into rows
// [r0, r0+len(src)/D) of the [M,D] view t (unit column stride).
func storeRowsF32(t Tensor, r0 int64, src []float32) {
	D := t.Sizes[1]
	es := int64(t.DType.Size())
	if t.Strides[0] == D {
		storeRowF32(at(t.Ptr, r0*D*es), es, t.DType, src)
		return
	}
	for r := int64(0); r*D < int64(len(src)); r++ {
		storeRowF32(at(t.Ptr, (r0+r)*t.Strides[0]*es), es, t.DType, src[r*D:(r+1)*D])
	}
}

// widenRows widens the [M,D] view t (unit column stride) exactly into a contiguous
// float32 tensor in buf (len M*D), rows split over the workers.
func widenRows(t Tensor, buf []float32) Tensor {
	M, D := t.Sizes[0], t.Sizes[1]
	ParallelFor(M, D, func(lo, hi int64) { loadRowsF32(buf[lo*D:hi*D], t, lo) })
	return f32RowsTensor(buf, M, D)
}

// f32RowsTensor views buf as a contiguous float32 [M,D] tensor.
func f32RowsTensor(buf []float32, M, D int64) Tensor {
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(unsafe.SliceData(buf))
	}
	return Tensor{Ptr: p, DType: Float32, Sizes: []int64{M, D}, Strides: []int64{D, 1}}
}

// narrowRows rounds the contiguous float32 [M,D] tensor src once (nearest-even) into
// the [M,D] view dst (unit column stride), rows split over the workers.
func narrowRows(dst, src Tensor) {
	M, D := src.Sizes[0], src.Sizes[1]
	buf := unsafe.Slice((*float32)(src.Ptr), M*D)
	ParallelFor(M, D, func(lo, hi int64) { storeRowsF32(dst, lo, buf[lo*D:hi*D]) })
}
