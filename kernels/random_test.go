package kernels

import (
	"runtime"
	"testing"
	"unsafe"
)

func rndF32Tensor(buf []float32, sizes ...int64) Tensor {
	st := make([]int64, len(sizes))
	s := int64(1)
	for i := len(sizes) - 1; i >= 0; i-- {
		st[i] = s
		s *= sizes[i]
	}
	return Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: Float32, Sizes: sizes, Strides: st}
}

// Parallel generation (several goroutines) gives exactly the serial values.
func TestRandomParallelEqualsSerial(t *testing.T) {
	const n = 300_000
	s := Stream{Seed: 0x1234_5678_9abc, Offset: 77}
	fill := func(procs int, kind int) []float32 {
		old := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(old)
		buf := make([]float32, n)
		x := rndF32Tensor(buf, n)
		switch kind {
		case 0:
			_ = Uniform(x, s, 0, 1)
		case 1:
			_ = Normal(x, s, 0, 1)
		case 2:
			_ = Bernoulli(x, nil, s, 0.3)
		default:
			_ = RandomInt(x, s, -5, 11)
		}
		return buf
	}
	for kind := 0; kind < 4; kind++ {
		a, b := fill(1, kind), fill(2, kind)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("kind %d: element %d differs: serial %v, parallel %v", kind, i, a[i], b[i])
			}
		}
	}
}

func TestUniformRangeAndMean(t *testing.T) {
	buf := make([]float32, 100_000)
	if err := Uniform(rndF32Tensor(buf, int64(len(buf))), Stream{Seed: 1}, 0, 1); err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, v := range buf {
		if v < 0 || v >= 1 {
			t.Fatalf("value %v outside [0, 1)", v)
		}
		sum += float64(v)
	}
	if m := sum / float64(len(buf)); m < 0.49 || m > 0.51 {
		t.Fatalf("mean %v", m)
	}
}

// Out-of-range indices are reported before anything is written.
func TestIndexPutRejectsOutOfRange(t *testing.T) {
	dst := make([]float32, 4)
	src := []float32{1, 2, 3}
	idx := []int64{0, 4, 1}
	d := rndF32Tensor(dst, 3)
	d.Strides = []int64{0}
	spec := IndexSpec{Idx: []Tensor{{Ptr: unsafe.Pointer(&idx[0]), DType: Int64, Sizes: []int64{3}, Strides: []int64{1}}},
		Bound: []int64{4}, Stride: []int64{1}, Dim: []int64{0}}
	err := IndexPut(d, rndF32Tensor(src, 3), spec, RedAdd, 1, 1, 0)
	if err == nil || err.Error() != "index 4 is out of bounds for dimension 0 with size 4" {
		t.Fatalf("got %v", err)
	}
	for _, v := range dst {
		if v != 0 {
			t.Fatalf("wrote %v before failing", dst)
		}
	}
	idx[1] = -1
	if err := IndexPut(d, rndF32Tensor(src, 3), spec, RedAdd, 1, 1, 0); err == nil {
		t.Fatal("negative index accepted without WrapNegative")
	}
	spec.WrapNegative = true
	if err := IndexPut(d, rndF32Tensor(src, 3), spec, RedAdd, 1, 1, 0); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 1 || dst[1] != 3 || dst[3] != 2 {
		t.Fatalf("got %v", dst)
	}
}

func TestSortStableDescendingNaN(t *testing.T) {
	nan := float32(0)
	nan = nan / nan
	in := []float32{1, nan, 2, 1, -1}
	vals := make([]float32, 5)
	idx := make([]int64, 5)
	it := Tensor{Ptr: unsafe.Pointer(&idx[0]), DType: Int64, Sizes: []int64{5}, Strides: []int64{1}}
	if err := Sort(rndF32Tensor(vals, 5), it, rndF32Tensor(in, 5), 0, true); err != nil {
		t.Fatal(err)
	}
	want := []int64{1, 2, 0, 3, 4}
	for i := range want {
		if idx[i] != want[i] {
			t.Fatalf("indices %v, want %v", idx, want)
		}
	}
}
