package kernels

import (
	"math"
	"testing"
)

// Bag sums, means and maxima against a direct loop, and the weight gradient of a sum
// against its definition (each position's bag gradient added to its row).
func TestEmbeddingBagForwardBackward(t *testing.T) {
	V, D := int64(5), int64(3)
	w := make([]float32, V*D)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)*1.7)) * 4
	}
	ix := []int64{4, 1, 1, 3, 0, 2, 4}
	off := []int64{0, 3, 3, 5} // bag 1 empty, bag 2 = {3, 0}, bag 3 = {2, 4}
	B := int64(len(off))
	weight := tensorOf(w, Float32, []int64{V, D}, []int64{D, 1})
	idxT := tensorOf(ix, Int64, []int64{int64(len(ix))}, []int64{1})
	offT := tensorOf(off, Int64, []int64{B}, []int64{1})
	for _, mode := range []int{BagSum, BagMean, BagMax} {
		out := make([]float32, B*D)
		bs := make([]int64, B)
		mi := make([]int64, B*D)
		miT := tensorOf(mi, Int64, []int64{B, D}, []int64{D, 1})
		if mode != BagMax {
			miT = tensorOf(mi[:B], Int64, []int64{B}, []int64{1})
		}
		err := EmbeddingBagForward(tensorOf(out, Float32, []int64{B, D}, []int64{D, 1}),
			tensorOf(bs, Int64, []int64{B}, []int64{1}), &miT, nil, weight, idxT, offT, nil,
			EmbeddingBagParams{Mode: mode, PaddingIdx: -1})
		if err != nil {
			t.Fatal(err)
		}
		for b := int64(0); b < B; b++ {
			end := int64(len(ix))
			if b+1 < B {
				end = off[b+1]
			}
			for d := int64(0); d < D; d++ {
				var want float32
				for j := off[b]; j < end; j++ {
					v := w[ix[j]*D+d]
					switch {
					case mode == BagMax && (j == off[b] || v > want):
						want = v
					case mode != BagMax:
						want += v
					}
				}
				if mode == BagMean && end > off[b] {
					want /= float32(end - off[b])
				}
				if got := out[b*D+d]; math.Abs(float64(got-want)) > 1e-6 {
					t.Fatalf("mode %d bag %d dim %d: %v, want %v", mode, b, d, got, want)
				}
			}
		}
	}
	grad := make([]float32, B*D)
	for i := range grad {
		grad[i] = float32(i + 1)
	}
	gw := make([]float32, V*D)
	bs := make([]int64, B)
	err := EmbeddingBagBackward(tensorOf(gw, Float32, []int64{V, D}, []int64{D, 1}),
		tensorOf(grad, Float32, []int64{B, D}, []int64{D, 1}), idxT, offT,
		tensorOf(bs, Int64, []int64{B}, []int64{1}), nil, nil, EmbeddingBagParams{Mode: BagSum, PaddingIdx: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, V*D)
	for b := int64(0); b < B; b++ {
		end := int64(len(ix))
		if b+1 < B {
			end = off[b+1]
		}
		for j := off[b]; j < end; j++ {
			if ix[j] == 1 {
				continue // padding
			}
			for d := int64(0); d < D; d++ {
				want[ix[j]*D+d] += grad[b*D+d]
			}
		}
	}
	for i := range want {
		if gw[i] != want[i] {
			t.Fatalf("grad_weight[%d] = %v, want %v", i, gw[i], want[i])
		}
	}
	// A bad index is an error with torch's message, not a panic.
	bad := tensorOf([]int64{0, 9}, Int64, []int64{2}, []int64{1})
	err = EmbeddingBagForward(tensorOf(make([]float32, D), Float32, []int64{1, D}, []int64{D, 1}),
		tensorOf(make([]int64, 1), Int64, []int64{1}, []int64{1}), nil, nil, weight, bad,
		tensorOf([]int64{0}, Int64, []int64{1}, []int64{1}), nil, EmbeddingBagParams{PaddingIdx: -1})
	if err == nil || err.Error() != "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be 9" {
		t.Fatalf("bad index: %v", err)
	}
}
