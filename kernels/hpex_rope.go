package kernels

import "fmt"

// Rotary position embedding (hpex apply_rotary_pos_emb, hpu::rotary_pos_embedding):
// out = x*cos + rot(x)*sin over the last dim, with rot the BLOCKWISE (GPT-NeoX rotate_half:
// [-x2, x1]) or PAIRWISE (GPT-J: (-x1, x0) per pair) rotation. The backward applies the
// transpose: dx = g*cos + rot^T(g*sin). cos and sin are 4-D views of x's shape (broadcast
// dims have stride 0); arithmetic in float32, rounded once.

// RoPE modes, as the bridge's RotaryPosEmbeddingMode.
const (
	RoPEBlockwise = 0
	RoPEPairwise  = 1
)

// RotaryEmbedding writes out from x, cos and sin (all [A,B,C,D]).
func RotaryEmbedding(out, x, cos, sin Tensor, mode int, backward bool) error {
	for _, t := range []Tensor{out, x, cos, sin} {
		if t.Dim() != 4 {
			return fmt.Errorf("rotary_pos_embedding: expected 4-D operands")
		}
		if t.DType != Float32 && t.DType != BFloat16 {
			return fmt.Errorf("rotary_pos_embedding: dtype %v; float32 and bfloat16 are supported", t.DType)
		}
		for i := range t.Sizes {
			if t.Sizes[i] != x.Sizes[i] {
				return fmt.Errorf("rotary_pos_embedding: shape %v does not match the input's %v", t.Sizes, x.Sizes)
			}
		}
	}
	D := x.Sizes[3]
	if D%2 != 0 {
		return fmt.Errorf("rotary_pos_embedding: the last dim (%d) must be even", D)
	}
	if mode != RoPEBlockwise && mode != RoPEPairwise {
		return fmt.Errorf("rotary_pos_embedding: unknown mode %d", mode)
	}
	A, B, C := x.Sizes[0], x.Sizes[1], x.Sizes[2]
	ParallelFor(A*B*C, D*4, func(lo, hi int64) {
		xr, cr, sr, or := make([]float32, D), make([]float32, D), make([]float32, D), make([]float32, D)
		half := D / 2
		for r := lo; r < hi; r++ {
			a, b, c := r/(B*C), (r/C)%B, r%C
			attLoad(xr, sub3(x, a), b, c, 0, 1)
			attLoad(cr, sub3(cos, a), b, c, 0, 1)
			attLoad(sr, sub3(sin, a), b, c, 0, 1)
			if !backward {
				for j := int64(0); j < D; j++ {
					var rot float32
					switch {
					case mode == RoPEBlockwise && j < half:
						rot = -xr[j+half]
					case mode == RoPEBlockwise:
						rot = xr[j-half]
					case j%2 == 0:
						rot = -xr[j+1]
					default:
						rot = xr[j-1]
					}
					or[j] = xr[j]*cr[j] + rot*sr[j]
				}
			} else {
				// x holds the output gradient g: dx = g*cos + rot^T(g*sin).
				for j := int64(0); j < D; j++ {
					var rt float32
					switch {
					case mode == RoPEBlockwise && j < half:
						rt = xr[j+half] * sr[j+half]
					case mode == RoPEBlockwise:
						rt = -xr[j-half] * sr[j-half]
					case j%2 == 0:
						rt = xr[j+1] * sr[j+1]
					default:
						rt = -xr[j-1] * sr[j-1]
					}
					or[j] = xr[j]*cr[j] + rt
				}
			}
			attStore(sub3(out, a), b, c, 0, 1, or)
		}
	})
	return nil
}

// sub3 views [A,B,C,D] at a as [1,B,C,D] laid out for attLoad's (b, h, row) indexing:
// attLoad(t, b, h, r0, n) reads row r0 of head (b, h); here (b, c) pick the row.
func sub3(t Tensor, a int64) Tensor {
	es := int64(t.DType.Size())
	return Tensor{Ptr: at(t.Ptr, a*t.Strides[0]*es), DType: t.DType,
		Sizes:   []int64{t.Sizes[1], t.Sizes[2], 1, t.Sizes[3]},
		Strides: []int64{t.Strides[1], t.Strides[2], 0, t.Strides[3]}}
}
