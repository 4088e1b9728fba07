package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// Sorting-based selections, statistics, counting and sampling
// (python/.../_ops/selection_ops.py). Layouts:
//
//	line_select   T (values [M], indices [M], in [M,N])          I (kind, k)
//	searchsorted  T (out [M,K], seq [M,N], vals [M,K][, sorter]) I (right)
//	unique        T (vals, inverse, counts, count, in)           I (consecutive)
//	histogramdd   T (hist, in [N,D][, weight], edges x D)        I (algorithm, has_weight, threads)
//	linspace_cpu  T (out [n])                                    I (lanes)  F (start, end)
//	bincount      T (out, in[, weights])
//	multinomial   T (out [M,S], probs [M,C])                     I (seed, offset, replacement)
func init() {
	// Written operands for the lazy engine's hazard checks (the rest are only read).
	for name, w := range map[string][]int{
		"line_select": {0, 1}, "searchsorted": {0}, "unique": {0, 1, 2, 3},
		"histogramdd": {0}, "linspace_cpu": {0}, "bincount": {0}, "multinomial": {0},
	} {
		fixedWrites[name] = w
	}
	Register("line_select", 3, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		return kernels.LineSelect(int(c.I[0]), c.I[1], c.T[0], c.T[1], c.T[2])
	})
	Register("searchsorted", -1, func(c *Call) error {
		if len(c.T) != 3 && len(c.T) != 4 {
			return fmt.Errorf("expected 3 or 4 tensors, got %d", len(c.T))
		}
		if err := needInts(c, 1); err != nil {
			return err
		}
		var sorter *kernels.Tensor
		if len(c.T) == 4 {
			sorter = &c.T[3]
		}
		return kernels.SearchSorted(c.T[0], c.T[1], c.T[2], sorter, c.I[0] != 0)
	})
	Register("unique", 5, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		return kernels.Unique(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], c.I[0] != 0)
	})
	Register("histogramdd", -1, func(c *Call) error {
		if err := needInts(c, 3); err != nil {
			return err
		}
		first := 2
		var w *kernels.Tensor
		if c.I[1] != 0 {
			first = 3
		}
		if len(c.T) < first+1 {
			return fmt.Errorf("expected hist, input[, weight] and at least one edge tensor, got %d tensors", len(c.T))
		}
		if first == 3 {
			w = &c.T[2]
		}
		return kernels.Histogramdd(c.T[0], c.T[1], w, c.T[first:], int(c.I[0]), c.I[2])
	})
	Register("linspace_cpu", 1, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		if err := needFloats(c, 2); err != nil {
			return err
		}
		return kernels.LinspaceCPU(c.T[0], c.F[0], c.F[1], c.I[0])
	})
	Register("bincount", -1, func(c *Call) error {
		if len(c.T) != 2 && len(c.T) != 3 {
			return fmt.Errorf("expected 2 or 3 tensors, got %d", len(c.T))
		}
		var w *kernels.Tensor
		if len(c.T) == 3 {
			w = &c.T[2]
		}
		return kernels.Bincount(c.T[0], c.T[1], w)
	})
	Register("multinomial", 2, func(c *Call) error {
		s, err := stream(c)
		if err != nil {
			return err
		}
		if err := needInts(c, 3); err != nil {
			return err
		}
		return kernels.Multinomial(c.T[0], c.T[1], s, c.I[2] != 0)
	})
}
