package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

func redF32(v []float32, sizes, strides []int64) Tensor {
	return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Float32, Sizes: sizes, Strides: strides}
}

func TestReduceSumMatchesFloat64Reference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	M, N := int64(7), int64(5000)
	x := make([]float32, M*N)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) + 0.25
	}
	for _, transposed := range []bool{false, true} {
		in := redF32(x, []int64{M, N}, []int64{N, 1})
		if transposed { // same data viewed [N?]: reduce columns of an [N, M]-contiguous layout
			in = redF32(x, []int64{M, N}, []int64{1, M})
		}
		out := make([]float32, M)
		if err := Reduce(RedSum, redF32(out, []int64{M}, []int64{1}), in, []float64{0, 0}); err != nil {
			t.Fatal(err)
		}
		for m := int64(0); m < M; m++ {
			ref := 0.0
			for n := int64(0); n < N; n++ {
				ref += float64(*(*float32)(unsafe.Add(in.Ptr, 4*(m*in.Strides[0]+n*in.Strides[1]))))
			}
			if d := math.Abs(float64(out[m]) - ref); d > 1e-5*math.Max(1, math.Abs(ref)) {
				t.Errorf("transposed=%v row %d: got %v want %v", transposed, m, out[m], ref)
			}
		}
	}
}

func TestArgReduceNaNAndTies(t *testing.T) {
	x := []float32{1, 3, 3, 2, float32(math.NaN()), 5}
	idx := make([]int64, 2)
	vals := make([]float32, 2)
	err := ArgReduce(false, redF32(vals, []int64{2}, []int64{1}),
		Tensor{Ptr: unsafe.Pointer(&idx[0]), DType: Int64, Sizes: []int64{2}, Strides: []int64{1}},
		redF32(x, []int64{2, 3}, []int64{3, 1}))
	if err != nil {
		t.Fatal(err)
	}
	if idx[0] != 1 || vals[0] != 3 || idx[1] != 1 || !math.IsNaN(float64(vals[1])) {
		t.Fatalf("got idx %v vals %v", idx, vals)
	}
}

func TestElementwiseBF16RoundsOnceOnStore(t *testing.T) {
	// 1 + 2^-9 is not representable in bf16 (7 mantissa bits): a tie rounds to even (1.0);
	// 1 + 3*2^-9 rounds up to 1 + 2^-7.
	a := []uint16{F32ToBF16(1), F32ToBF16(1)}
	b := []uint16{F32ToBF16(1.0 / 512), F32ToBF16(3.0 / 512)}
	o := make([]uint16, 2)
	mk := func(v []uint16) Tensor {
		return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: BFloat16, Sizes: []int64{2}, Strides: []int64{1}}
	}
	if err := Elementwise(EWOps["add"], BFloat16, mk(o), []Tensor{mk(a), mk(b)}, []float64{1, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if BF16ToF32(o[0]) != 1 || BF16ToF32(o[1]) != 1+1.0/128 {
		t.Fatalf("got %v %v", BF16ToF32(o[0]), BF16ToF32(o[1]))
	}
	if err := Elementwise(EWOps["add"], BFloat16, mk(o), []Tensor{mk(a)}, nil); err == nil {
		t.Fatal("wrong operand count accepted")
	}
}
