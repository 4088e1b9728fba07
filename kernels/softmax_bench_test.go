package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// causalScores is the reference transformer's attention scores: [16*4*64, 64] rows of
// normal values with the causal mask's -inf above the diagonal.
func causalScores(M, N int64) []float32 {
	r := rand.New(rand.NewSource(1))
	x := make([]float32, M*N)
	for m := int64(0); m < M; m++ {
		for n := int64(0); n < N; n++ {
			if n > m%N {
				x[m*N+n] = float32(math.Inf(-1))
			} else {
				x[m*N+n] = float32(r.NormFloat64())
			}
		}
	}
	return x
}

func f32T(v []float32, M, N int64) Tensor {
	return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Float32, Sizes: []int64{M, N}, Strides: []int64{N, 1}}
}

func benchSoftmax(b *testing.B, N int64, workers int) {
	M := 16 * 4 * 64 * 64 / N
	x := causalScores(M, N)
	y := make([]float32, M*N)
	defer SetThreads(SetThreads(workers))
	b.SetBytes(M * N * 8)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Softmax(false, f32T(y, M, N), f32T(x, M, N), SoftmaxOpts{LastDim: true, Inner: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchSoftmaxBwd(b *testing.B, N int64, workers int) {
	M := 16 * 4 * 64 * 64 / N
	x := causalScores(M, N)
	y := make([]float32, M*N)
	if err := Softmax(false, f32T(y, M, N), f32T(x, M, N), SoftmaxOpts{LastDim: true, Inner: 1}); err != nil {
		b.Fatal(err)
	}
	g := make([]float32, M*N)
	for i := range g {
		g[i] = float32(i%13) - 6
	}
	o := make([]float32, M*N)
	defer SetThreads(SetThreads(workers))
	b.SetBytes(M * N * 12)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := SoftmaxBackward(false, f32T(o, M, N), f32T(g, M, N), f32T(y, M, N), true); err != nil {
			b.Fatal(err)
		}
	}
}

// The reference transformer's softmax: f32[16,4,64,64] over the last dim, causal mask.
func BenchmarkSoftmaxAttn64W1(b *testing.B)    { benchSoftmax(b, 64, 1) }
func BenchmarkSoftmaxAttn64W2(b *testing.B)    { benchSoftmax(b, 64, 2) }
func BenchmarkSoftmaxAttn1024W2(b *testing.B)  { benchSoftmax(b, 1024, 2) }
func BenchmarkSoftmaxBwdAttn64W1(b *testing.B) { benchSoftmaxBwd(b, 64, 1) }
func BenchmarkSoftmaxBwdAttn64W2(b *testing.B) { benchSoftmaxBwd(b, 64, 2) }
