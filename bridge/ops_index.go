package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// indexSpec reads (wrap, K, K x (bound, stride, dim)) from ints starting at i, taking the
// K index tensors from ts; it returns the spec and the next attribute position.
func indexSpec(ints []int64, ts []kernels.Tensor) (kernels.IndexSpec, int, error) {
	var s kernels.IndexSpec
	if len(ints) < 2 {
		return s, 0, fmt.Errorf("expected index attributes (wrap, K, ...)")
	}
	k := int(ints[1])
	if k < 0 || k > 64 || len(ts) < k || len(ints) < 2+3*k {
		return s, 0, fmt.Errorf("bad index count %d for %d tensors, %d attributes", k, len(ts), len(ints))
	}
	s.WrapNegative = ints[0] != 0
	s.Idx = ts[:k]
	for j := 0; j < k; j++ {
		s.Bound = append(s.Bound, ints[2+3*j])
		s.Stride = append(s.Stride, ints[3+3*j])
		s.Dim = append(s.Dim, ints[4+3*j])
	}
	return s, 2 + 3*k, nil
}

// Indexing, concatenation, sorting and range ops. Attribute layouts:
//
//	cat           T (out, inputs…)                       I (dim)
//	index_gather  T (out, self_restrided, idx…)          I (wrap, K, K×(bound, stride, dim))
//	index_put     T (self_restrided, values, idx…)       I (wrap, K, K×(…), reduce, int_alpha, parallel_dims) F (alpha)
//	div_count     T (res, count)                         (res /= max(count, 1); floor for integers)
//	nonzero_count T (count: int64 0-D, self)
//	nonzero       T (out [n, ndim] int64, self)
//	tri           T (out, input)                         I (k, upper)
//	sort          T (values, indices, self)              I (dim, descending[, stable])
//	topk          T (values, indices, self)              I (dim, k, largest[, sorted])
//	arange        T (out)                                I (is_int, int_start, int_step) F (start, step)
//	linspace      T (out)                                F (start, end)
func init() {
	Register("cat", -1, func(c *Call) error {
		if len(c.T) < 1 {
			return fmt.Errorf("expected an output tensor")
		}
		if err := needInts(c, 1); err != nil {
			return err
		}
		return kernels.Cat(c.T[0], c.T[1:], int(c.I[0]))
	})
	Register("index_gather", -1, func(c *Call) error {
		if len(c.T) < 2 {
			return fmt.Errorf("expected (out, self, indices...)")
		}
		s, _, err := indexSpec(c.I, c.T[2:])
		if err != nil {
			return err
		}
		if len(s.Idx) != len(c.T)-2 {
			return fmt.Errorf("%d index tensors passed, %d described", len(c.T)-2, len(s.Idx))
		}
		return kernels.IndexGather(c.T[0], c.T[1], s)
	})
	Register("index_put", -1, func(c *Call) error {
		if len(c.T) < 2 {
			return fmt.Errorf("expected (self, values, indices...)")
		}
		s, i, err := indexSpec(c.I, c.T[2:])
		if err != nil {
			return err
		}
		if len(s.Idx) != len(c.T)-2 {
			return fmt.Errorf("%d index tensors passed, %d described", len(c.T)-2, len(s.Idx))
		}
		if len(c.I) < i+3 || len(c.F) < 1 {
			return fmt.Errorf("expected attributes (reduce, int_alpha, parallel_dims) and (alpha)")
		}
		return kernels.IndexPut(c.T[0], c.T[1], s, int(c.I[i]), c.F[0], c.I[i+1], c.I[i+2])
	})
	Register("nonzero_count", 2, func(c *Call) error {
		if c.T[0].DType != kernels.Int64 || c.T[0].Numel() != 1 {
			return fmt.Errorf("count must be a one-element int64 tensor")
		}
		n := kernels.CountNonzero(c.T[1])
		return kernels.Fill(c.T[0], 0, n, true)
	})
	Register("div_count", 2, func(c *Call) error { return kernels.DivCount(c.T[0], c.T[1]) })
	Register("nonzero", 2, func(c *Call) error { return kernels.Nonzero(c.T[0], c.T[1]) })
	Register("tri", 2, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		return kernels.Tri(c.T[0], c.T[1], c.I[0], c.I[1] != 0)
	})
	Register("sort", 3, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		if len(c.I) > 2 && c.I[2] != 0 {
			return kernels.Sort(c.T[0], c.T[1], c.T[2], int(c.I[0]), c.I[1] != 0)
		}
		return kernels.SortUnstable(c.T[0], c.T[1], c.T[2], int(c.I[0]), c.I[1] != 0)
	})
	Register("topk", 3, func(c *Call) error {
		if err := needInts(c, 3); err != nil {
			return err
		}
		sorted := len(c.I) <= 3 || c.I[3] != 0
		return kernels.TopK(c.T[0], c.T[1], c.T[2], int(c.I[0]), c.I[1], c.I[2] != 0, sorted)
	})
	Register("arange", 1, func(c *Call) error {
		if err := needInts(c, 3); err != nil {
			return err
		}
		if len(c.F) < 2 {
			return fmt.Errorf("expected float attributes (start, step)")
		}
		return kernels.Arange(c.T[0], c.I[0] != 0, c.I[1], c.I[2], c.F[0], c.F[1])
	})
	Register("linspace", 1, func(c *Call) error {
		if len(c.F) < 2 {
			return fmt.Errorf("expected float attributes (start, end)")
		}
		return kernels.Linspace(c.T[0], c.F[0], c.F[1])
	})
}
