package kernels

import (
	"fmt"
	"math/rand"
	"testing"
)

// attRun times fn b.N times and reports the CPU milliseconds per call too.
func attRun(b *testing.B, fn func() error) {
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-c0)/1e6/float64(b.N), "cpu-ms/op") // ew_model_bench_test.go
}

// attBenchOperands builds random [1,4,S,64] operands, the output and row statistics.
func attBenchOperands(S int64) (q, k, v, out, mx, linv, dout, dq, dk, dv Tensor) {
	r := rand.New(rand.NewSource(7))
	sz := []int64{1, 4, S, 64}
	st := []int64{4 * S * 64, S * 64, 64, 1}
	mk := func() Tensor { return f32Tensor(randF32(r, int(4*S*64)), sz, st) }
	q, k, v, out, dout, dq, dk, dv = mk(), mk(), mk(), mk(), mk(), mk(), mk(), mk()
	mx = f32Tensor(make([]float32, 4*S), []int64{1, 4, S}, []int64{4 * S, S, 1})
	linv = f32Tensor(make([]float32, 4*S), []int64{1, 4, S}, []int64{4 * S, S, 1})
	return
}

func BenchmarkAttention(b *testing.B) {
	for _, S := range []int64{1024, 4096} {
		q, k, v, out, mx, linv, dout, dq, dk, dv := attBenchOperands(S)
		prm := AttnParams{Scale: 0.125, Causal: true}
		b.Run(fmt.Sprintf("fwd/S%d", S), func(b *testing.B) {
			attRun(b, func() error { return AttentionForward(out, mx, linv, q, k, v, nil, prm) })
		})
		if err := AttentionForward(out, mx, linv, q, k, v, nil, prm); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("bwd/S%d", S), func(b *testing.B) {
			attRun(b, func() error { return AttentionBackward(dq, dk, dv, dout, q, k, v, out, mx, linv, nil, prm) })
		})
	}
}

// The tile products alone: GFLOP/s of the shapes the forward runs (S = Q K^T, O += P V).
func BenchmarkAttentionGemm(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	a, bm, c := randF32(r, 96*96+attSlack), randF32(r, 96*96), randF32(r, 96*96)
	for _, s := range []struct {
		name              string
		m, n, k, ars, acs int64
	}{{"qk", 96, 96, 64, 64, 1}, {"pv", 96, 64, 96, 96, 1}, {"qkT", 96, 96, 64, 1, 96}, {"pvT", 96, 64, 96, 1, 96}} {
		b.Run(s.name, func(b *testing.B) {
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				attGemm(s.m, s.n, s.k, f32p(a), s.ars, s.acs, f32p(bm), 96, f32p(c), 96, 1, i&1 == 1, nil, attNoCausal, 0)
			}
			b.ReportMetric(float64(2*s.m*s.n*s.k)*float64(b.N)/float64(cpuTime()-c0), "cpu-GFLOP/s")
		})
	}
}
