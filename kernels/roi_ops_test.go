package kernels

import (
	"math"
	"testing"
)

func TestNmsKeepGreedy(t *testing.T) {
	// sorted by score: box 1 overlaps box 0 (IoU 0.81), box 2 is apart, box 3 overlaps box 0 (0.81) and box 1 (0.65)
	boxes := []float32{0, 0, 10, 10, 0, 0, 9, 9, 20, 20, 30, 30, 1, 1, 10, 10}
	keep := make([]uint8, 4)
	if err := NmsKeep(tensorOf(keep, Bool, []int64{4}, []int64{1}), f32Tensor(boxes, []int64{4, 4}, []int64{4, 1}), 0.5); err != nil {
		t.Fatal(err)
	}
	if want := []uint8{1, 0, 1, 0}; string(keep) != string(want) {
		t.Fatalf("keep %v, want %v", keep, want)
	}
	// above every pair's IoU (at most 0.81) nothing is dropped
	if err := NmsKeep(tensorOf(keep, Bool, []int64{4}, []int64{1}), f32Tensor(boxes, []int64{4, 4}, []int64{4, 1}), 0.85); err != nil {
		t.Fatal(err)
	}
	if want := []uint8{1, 1, 1, 1}; string(keep) != string(want) {
		t.Fatalf("keep %v, want %v", keep, want)
	}
}

func TestRoiAlignOnePixelBins(t *testing.T) {
	// aligned, one sample per bin at pixel centres: roi_align reads the map itself
	in := make([]float32, 2*3*4)
	for i := range in {
		in[i] = float32(i)
	}
	rois := []float32{1, 0, 0, 4, 3} // batch 1, the whole 3x4 plane
	out := make([]float32, 12)
	p := RoiAlignParams{PooledH: 3, PooledW: 4, SamplingRatio: 1, Aligned: true, SpatialScale: 1}
	err := RoiAlign(f32Tensor(out, []int64{1, 1, 3, 4}, []int64{12, 12, 4, 1}),
		f32Tensor(in, []int64{2, 1, 3, 4}, []int64{12, 12, 4, 1}), f32Tensor(rois, []int64{1, 5}, []int64{5, 1}), p)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range out {
		if v != in[12+i] {
			t.Fatalf("out[%d] = %v, want %v", i, v, in[12+i])
		}
	}
	// backward puts each bin's gradient back on its pixel
	gin := make([]float32, 24)
	if err := RoiAlignBackward(f32Tensor(gin, []int64{2, 1, 3, 4}, []int64{12, 12, 4, 1}),
		f32Tensor(out, []int64{1, 1, 3, 4}, []int64{12, 12, 4, 1}), f32Tensor(rois, []int64{1, 5}, []int64{5, 1}), p); err != nil {
		t.Fatal(err)
	}
	for i := range gin {
		want := float32(0)
		if i >= 12 {
			want = in[i]
		}
		if math.Abs(float64(gin[i]-want)) > 1e-6 {
			t.Fatalf("gin[%d] = %v, want %v", i, gin[i], want)
		}
	}
}

func TestRoiOpsRejectBadShapes(t *testing.T) {
	b := make([]float32, 16)
	p := RoiAlignParams{PooledH: 2, PooledW: 2, SpatialScale: 1}
	cases := []func() error{
		func() error {
			return NmsKeep(tensorOf(make([]uint8, 3), Bool, []int64{3}, []int64{1}), f32Tensor(b, []int64{4, 4}, []int64{4, 1}), 0.5)
		},
		func() error {
			return NmsKeep(tensorOf(make([]uint8, 4), Bool, []int64{4}, []int64{1}), f32Tensor(b, []int64{4, 3}, []int64{3, 1}), 0.5)
		},
		func() error {
			return RoiAlign(f32Tensor(b, []int64{1, 1, 2, 2}, []int64{4, 4, 2, 1}), f32Tensor(b, []int64{1, 1, 4, 4}, []int64{16, 16, 4, 1}),
				f32Tensor(b, []int64{1, 4}, []int64{4, 1}), p)
		},
		func() error {
			return RoiAlign(f32Tensor(b, []int64{1, 2, 2, 2}, []int64{8, 4, 2, 1}), f32Tensor(b, []int64{1, 1, 4, 4}, []int64{16, 16, 4, 1}),
				f32Tensor(b, []int64{1, 5}, []int64{5, 1}), p)
		},
		func() error {
			return RoiAlignBackward(f32Tensor(b, []int64{1, 1, 4, 4}, []int64{16, 16, 4, 1}), f32Tensor(b, []int64{1, 1, 2, 2}, []int64{4, 4, 2, 1}),
				f32Tensor(b, []int64{1, 5}, []int64{5, 1}), RoiAlignParams{PooledH: 0, PooledW: 2})
		},
	}
	for i, c := range cases {
		if c() == nil {
			t.Fatalf("case %d: no error", i)
		}
	}
}
