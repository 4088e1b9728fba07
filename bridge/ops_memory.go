package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// Data movement ops: every copy (host<->device, device<->device, any strides, any dtype)
// and fills.
func init() {
	Register("copy", 2, func(c *Call) error { return kernels.Copy(c.T[0], c.T[1]) })
	Register("fill", 1, func(c *Call) error {
		if len(c.I) < 2 || len(c.F) < 1 {
			return fmt.Errorf("expected attributes (is_int, int_value, float_value)")
		}
		return kernels.Fill(c.T[0], c.F[0], c.I[1], c.I[0] != 0)
	})
	// debug_panic exists so tests can prove a kernel panic becomes a Python error.
	Register("debug_panic", 0, func(c *Call) error {
		if len(c.I) > 0 && c.I[0] != 0 {
			kernels.ParallelFor(1<<20, 1, func(lo, hi int64) { panic("debug_panic in a worker goroutine") })
		}
		panic("debug_panic")
	})
}
