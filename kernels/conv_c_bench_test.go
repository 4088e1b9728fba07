package kernels

import (
	"math/rand"
	"testing"
)

// BenchmarkConvHelpers times the per-sample helpers (one sample, all groups) at the
// reference CNN's layer shapes, C (under cgo) and Go.
func BenchmarkConvHelpers(b *testing.B) {
	p := ConvParams{1, 1, 1, 1, 1, 1, 1}
	for _, c := range []struct {
		name    string
		c, o, h int
	}{{"conv1", 1, 16, 28}, {"conv2", 16, 32, 14}} {
		g := convGeom{N: 1, C: c.c, H: c.h, W: c.h, O: c.o, KH: 3, KW: 3, OH: c.h, OW: c.h, G: 1, Cg: c.c, Og: c.o,
			Kc: c.c * 9, P: c.h * c.h}
		r := rand.New(rand.NewSource(1))
		x, col := randF32(r, g.C*g.H*g.W), randF32(r, g.Kc*g.P)
		for _, goLoops := range []bool{false, true} {
			name := c.name + "/c"
			if goLoops {
				name = c.name + "/go"
			}
			b.Run(name+"/im2col", func(b *testing.B) {
				convNoC = goLoops
				defer func() { convNoC = false }()
				for i := 0; i < b.N; i++ {
					im2colSample(col, x, g, p, 0)
				}
			})
			b.Run(name+"/col2im", func(b *testing.B) {
				convNoC = goLoops
				defer func() { convNoC = false }()
				for i := 0; i < b.N; i++ {
					col2imSample(x, col, g, p, 0)
				}
			})
		}
	}
}
