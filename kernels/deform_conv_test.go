package kernels

import (
	"math"
	"testing"
)

func contig(sizes ...int64) []int64 {
	st := make([]int64, len(sizes))
	s := int64(1)
	for i := len(sizes) - 1; i >= 0; i-- {
		st[i] = s
		s *= sizes[i]
	}
	return st
}

// Non-finite and huge offsets sample nothing (zero) instead of reading outside the input,
// and every gradient stays finite where the columns are; shapes that do not fit are errors.
func TestDeformNonFiniteOffsetsStayInBounds(t *testing.T) {
	const B, C, H, W, K = 1, 2, 4, 5, 3
	p := DeformParams{KH: K, KW: K, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, OffsetGroups: 1, UseMask: true}
	oh, ow := int64(H), int64(W)
	in := make([]float32, B*C*H*W)
	for i := range in {
		in[i] = float32(i%7) - 3
	}
	off := make([]float32, B*2*K*K*oh*ow)
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e30, -1e30, 3.5, -0.5}
	for i := range off {
		off[i] = specials[i%len(specials)]
	}
	mask := make([]float32, B*K*K*oh*ow)
	for i := range mask {
		mask[i] = 0.5
	}
	cols := make([]float32, C*K*K*B*oh*ow)
	tIn := tensorOf(in, Float32, []int64{B, C, H, W}, contig(B, C, H, W))
	tOff := tensorOf(off, Float32, []int64{B, 2 * K * K, oh, ow}, contig(B, 2*K*K, oh, ow))
	tMask := tensorOf(mask, Float32, []int64{B, K * K, oh, ow}, contig(B, K*K, oh, ow))
	tCols := tensorOf(cols, Float32, []int64{C * K * K, B * oh * ow}, contig(C*K*K, B*oh*ow))
	if err := DeformIm2col(tCols, tIn, tOff, tMask, p); err != nil {
		t.Fatal(err)
	}
	for i, v := range cols {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("column %d = %v from non-finite offsets", i, v)
		}
	}
	gin := make([]float32, len(in))
	if err := DeformCol2im(tensorOf(gin, Float32, []int64{B, C, H, W}, contig(B, C, H, W)), tCols, tOff, tMask, p); err != nil {
		t.Fatal(err)
	}
	goff, gmask := make([]float32, len(off)), make([]float32, len(mask))
	err := DeformCol2imCoord(tensorOf(goff, Float32, []int64{B, 2 * K * K, oh, ow}, contig(B, 2*K*K, oh, ow)),
		tensorOf(gmask, Float32, []int64{B, K * K, oh, ow}, contig(B, K*K, oh, ow)), tCols, tIn, tOff, tMask, p)
	if err != nil {
		t.Fatal(err)
	}
	// an offset tensor for another output size is refused, not read past its end
	short := tensorOf(off, Float32, []int64{B, 2 * K * K, oh - 1, ow}, contig(B, 2*K*K, oh-1, ow))
	if DeformIm2col(tCols, tIn, short, tMask, p) == nil {
		t.Fatal("offset of the wrong output size accepted")
	}
}

// roi_pool's argmax and ps_roi_pool's channel map must be int32 of the output's shape, and
// position-sensitive pooling needs channels divisible by the bins.
func TestRoiPoolShapeChecks(t *testing.T) {
	in := tensorOf(make([]float32, 1*8*4*4), Float32, []int64{1, 8, 4, 4}, contig(1, 8, 4, 4))
	rois := tensorOf([]float32{0, 0, 0, 3, 3}, Float32, []int64{1, 5}, contig(1, 5))
	out := tensorOf(make([]float32, 8*4), Float32, []int64{1, 8, 2, 2}, contig(1, 8, 2, 2))
	idx64 := tensorOf(make([]int64, 8*4), Int64, []int64{1, 8, 2, 2}, contig(1, 8, 2, 2))
	idx := tensorOf(make([]int32, 8*4), Int32, []int64{1, 8, 2, 2}, contig(1, 8, 2, 2))
	p := RoiPoolParams{PooledH: 2, PooledW: 2, SpatialScale: 1}
	if RoiPool(out, idx64, in, rois, p) == nil {
		t.Fatal("int64 argmax accepted")
	}
	if err := RoiPool(out, idx, in, rois, p); err != nil {
		t.Fatal(err)
	}
	if PsRoiPool(out, idx, in, rois, RoiPoolParams{PooledH: 3, PooledW: 3, SpatialScale: 1}) == nil {
		t.Fatal("8 channels over 3x3 bins accepted")
	}
	psOut := tensorOf(make([]float32, 2*4), Float32, []int64{1, 2, 2, 2}, contig(1, 2, 2, 2))
	psIdx := tensorOf(make([]int32, 2*4), Int32, []int64{1, 2, 2, 2}, contig(1, 2, 2, 2))
	if err := PsRoiAlign(psOut, psIdx, in, rois, RoiAlignParams{PooledH: 2, PooledW: 2, SpatialScale: 1}); err != nil {
		t.Fatal(err)
	}
	if got := psIdx.Sizes; got[1] != 2 {
		t.Fatal(got)
	}
}
