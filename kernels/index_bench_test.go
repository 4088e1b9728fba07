package kernels

import (
	"math/rand"
	"testing"
	"unsafe"
)

// BenchmarkEmbedding times the reference transformer's embedding lookup (index_select of
// 1024 rows from a [128, 64] float32 table) and its backward.
func BenchmarkEmbedding(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	w := benchTensor(r, Float32, 128, 64)
	out := benchTensor(r, Float32, 1024, 64)
	ix := make([]int64, 1024)
	for i := range ix {
		ix[i] = r.Int63n(128)
	}
	idx := Tensor{Ptr: unsafe.Pointer(&ix[0]), DType: Int64, Sizes: []int64{1024}, Strides: []int64{1}}
	b.Run("fwd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := IndexSelect(out, w, idx, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bwd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := EmbeddingBackward(w, out, idx, -1, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}
