package kernels

import (
	"testing"
	"unsafe"
)

// The bench transformer's attention dropout: 16x4x64x64 float32 (and its residual one,
// 16x64x64), one worker and the default count.
func benchDropout(b *testing.B, n int, workers int) {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%97) * 0.01
	}
	o := make([]float32, n)
	m := make([]uint8, n)
	mk := func(p unsafe.Pointer, dt DType) Tensor {
		return Tensor{Ptr: p, DType: dt, Sizes: []int64{int64(n)}, Strides: []int64{1}}
	}
	in, out, mask := mk(unsafe.Pointer(&x[0]), Float32), mk(unsafe.Pointer(&o[0]), Float32), mk(unsafe.Pointer(&m[0]), Bool)
	if workers > 0 {
		defer SetThreads(SetThreads(workers))
	}
	b.SetBytes(int64(n) * 9)
	for i := 0; i < b.N; i++ {
		if err := Dropout(out, mask, in, Stream{Seed: 42, Offset: uint64(i) * 16}, 0.1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDropoutAttn1(b *testing.B)  { benchDropout(b, 16*4*64*64, 1) }
func BenchmarkDropoutAttn(b *testing.B)   { benchDropout(b, 16*4*64*64, 0) }
func BenchmarkDropoutResid1(b *testing.B) { benchDropout(b, 16*64*64, 1) }

func BenchmarkPhilox1(b *testing.B) {
	w := make([]uint32, 4*rndBatch)
	b.SetBytes(int64(len(w)) * 4)
	for i := 0; i < b.N; i++ {
		philoxBlocks(w, Stream{Seed: 42, Offset: 7}, uint64(i)*rndBatch)
	}
}
