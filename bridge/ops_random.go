package bridge

import (
	"fmt"

	"hpusim/kernels"
)

func stream(c *Call) (kernels.Stream, error) {
	if len(c.I) < 2 {
		return kernels.Stream{}, fmt.Errorf("expected attributes (seed, offset, ...)")
	}
	return kernels.Stream{Seed: uint64(c.I[0]), Offset: uint64(c.I[1])}, nil
}

func needFloats(c *Call, n int) error {
	if len(c.F) < n {
		return fmt.Errorf("expected %d float attributes, got %d", n, len(c.F))
	}
	return nil
}

// Random ops over a Philox4x32-10 stream; seed and offset are drawn per call from the hpu
// generator by the Python side. Attribute layouts:
//
//	uniform     T (out)              I (seed, offset)               F (from, to)
//	normal      T (out)              I (seed, offset)               F (mean, std)
//	bernoulli   T (out[, p])         I (seed, offset)               F (p)
//	random_int  T (out)              I (seed, offset, from, span)   (span 0 = 2^64)
//	dropout     T (out, mask, input) I (seed, offset)               F (p)
//	dropout_bwd T (grad_input, grad, mask)                          F (scale)
func init() {
	Register("uniform", 1, func(c *Call) error {
		s, err := stream(c)
		if err != nil {
			return err
		}
		if err := needFloats(c, 2); err != nil {
			return err
		}
		return kernels.Uniform(c.T[0], s, c.F[0], c.F[1])
	})
	Register("normal", 1, func(c *Call) error {
		s, err := stream(c)
		if err != nil {
			return err
		}
		if err := needFloats(c, 2); err != nil {
			return err
		}
		return kernels.Normal(c.T[0], s, c.F[0], c.F[1])
	})
	Register("bernoulli", -1, func(c *Call) error {
		if len(c.T) != 1 && len(c.T) != 2 {
			return fmt.Errorf("expected 1 or 2 tensors, got %d", len(c.T))
		}
		s, err := stream(c)
		if err != nil {
			return err
		}
		if err := needFloats(c, 1); err != nil {
			return err
		}
		var p *kernels.Tensor
		if len(c.T) == 2 {
			p = &c.T[1]
		}
		return kernels.Bernoulli(c.T[0], p, s, c.F[0])
	})
	Register("random_int", 1, func(c *Call) error {
		s, err := stream(c)
		if err != nil {
			return err
		}
		if err := needInts(c, 4); err != nil {
			return err
		}
		return kernels.RandomInt(c.T[0], s, c.I[2], uint64(c.I[3]))
	})
	Register("dropout", 3, func(c *Call) error {
		s, err := stream(c)
		if err != nil {
			return err
		}
		if err := needFloats(c, 1); err != nil {
			return err
		}
		return kernels.Dropout(c.T[0], c.T[1], c.T[2], s, c.F[0])
	})
	Register("dropout_bwd", 3, func(c *Call) error {
		if err := needFloats(c, 1); err != nil {
			return err
		}
		return kernels.DropoutBackward(c.T[0], c.T[1], c.T[2], c.F[0])
	})
}
