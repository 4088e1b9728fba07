package kernels

import (
	"fmt"
	"math/rand"
	"testing"
)

// BenchmarkGemmBF16 times the bfloat16 products of bench/bench_gemm.py (mm at 256^3,
// 512^3, 1024^3; the linear layer 64x1024 @ W^T with W 1024x1024 stored n x k) on one
// worker and on all (GOMAXPROCS), reporting GFLOP/s.
func BenchmarkGemmBF16(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	for _, s := range []struct {
		name    string
		m, k, n int64
		linear  bool
	}{{"256", 256, 256, 256, false}, {"512", 512, 512, 512, false}, {"1024", 1024, 1024, 1024, false},
		{"linear", 64, 1024, 1024, true}} {
		a := bf16View(r, 1, s.m, s.k, bf16Layout{})
		w := bf16View(r, 1, s.k, s.n, bf16Layout{trans: s.linear})
		out := bf16View(r, 1, s.m, s.n, bf16Layout{})
		for _, workers := range []int{1, Workers()} {
			b.Run(fmt.Sprintf("%s/w%d", s.name, workers), func(b *testing.B) {
				prev := SetThreads(workers)
				defer SetThreads(prev)
				for i := 0; i < b.N; i++ {
					if err := BatchedGemm(out, a, w, nil, 1, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(s.m*s.k*s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
