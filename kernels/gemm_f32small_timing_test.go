//go:build cgo && !noblas

package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// TestF32SmallTimings (HPUSIM_GEMM_TIMINGS=1, or =transformer for the bench transformer's shapes) times the MLP's eight products and the
// transformer's mid-sized ones on OpenBLAS (one call, one thread; split over the workers;
// OpenBLAS's own two threads) and on the small kernel (1 and 2 workers), the variants
// interleaved round by round; it prints each one's median in µs.
func TestF32SmallTimings(t *testing.T) {
	if os.Getenv("HPUSIM_GEMM_TIMINGS") == "" || !f32SmallCPU {
		t.Skip("HPUSIM_GEMM_TIMINGS=1 times the GEMM paths")
	}
	type shape struct {
		name    string
		ta, tb  bool
		m, n, k int
		beta    float32
	}
	shapes := []shape{
		{"fc1 addmm", false, true, 64, 128, 64, 1}, {"fc2 addmm", false, true, 64, 64, 128, 1},
		{"fc3 addmm", false, true, 64, 10, 64, 1}, {"fc3 dX", false, false, 64, 64, 10, 0},
		{"fc3 dW", true, false, 10, 64, 64, 0}, {"fc2 dX", false, false, 64, 128, 64, 0},
		{"fc2 dW", true, false, 64, 128, 64, 0}, {"fc1 dW", true, false, 128, 64, 64, 0},
		{"256x256x64", false, true, 256, 256, 64, 0}, {"256x64x256", false, false, 256, 64, 256, 0},
		{"64x64x1024 tA", true, false, 64, 64, 1024, 0}, {"128x128x256", false, false, 128, 128, 256, 0},
		{"512x64x64 tB", false, true, 512, 64, 64, 1}, {"256x192x64 tB", false, true, 256, 192, 64, 1},
	}
	if os.Getenv("HPUSIM_GEMM_TIMINGS") == "transformer" { // the bench transformer's linear layers
		shapes = []shape{
			{"ff1 fwd", false, true, 1024, 256, 64, 1}, {"ff2 fwd", false, true, 1024, 64, 256, 1},
			{"qkv fwd", false, true, 1024, 192, 64, 1}, {"proj fwd", false, true, 1024, 64, 64, 1},
			{"ff2 dX", false, false, 1024, 256, 64, 0}, {"ff1 dX", false, false, 1024, 64, 256, 0},
			{"ff2 dW", true, false, 64, 256, 1024, 0}, {"ff1 dW", true, false, 256, 64, 1024, 0},
		}
	}
	if s := os.Getenv("HPUSIM_GEMM_SHAPE"); s != "" {
		var m, n, k int
		fmt.Sscanf(s, "%dx%dx%d", &m, &n, &k)
		shapes = []shape{{s, false, false, m, n, k, 0}}
	}
	defer setF32Dot(false)()
	r := rand.New(rand.NewSource(1))
	prevMin := blasThreadedMin
	defer func() { blasThreadedMin = prevMin }()
	for _, sh := range shapes {
		m, n, k := sh.m, sh.n, sh.k
		lda, ldb := k, n
		if sh.ta {
			lda = m
		}
		if sh.tb {
			ldb = k
		}
		a, b, c := randF32(r, m*k), randF32(r, k*n), randF32(r, m*n)
		ap, bp, cp := unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), unsafe.Pointer(&c[0])
		variants := []struct {
			name string
			fn   func()
		}{
			{"blas1", func() { blasGemmSerial(sh.ta, sh.tb, m, n, k, float32(1), ap, lda, bp, ldb, sh.beta, cp, n) }},
			{"blasSplit", func() {
				blasThreadedMin = math.Inf(1)
				blasGemm(sh.ta, sh.tb, m, n, k, float32(1), ap, lda, bp, ldb, sh.beta, cp, n)
			}},
			{"blasThr2", func() {
				blasThreadedMin = 0
				blasGemm(sh.ta, sh.tb, m, n, k, float32(1), ap, lda, bp, ldb, sh.beta, cp, n)
				blasThreadedMin = prevMin
			}},
			{"small1", func() {
				p := SetThreads(1)
				f32SmallGemm(sh.ta, sh.tb, m, n, k, 1, ap, lda, bp, ldb, sh.beta, cp, n, nil)
				SetThreads(p)
			}},
			{"small2", func() { f32SmallGemm(sh.ta, sh.tb, m, n, k, 1, ap, lda, bp, ldb, sh.beta, cp, n, nil) }},
		}
		const rounds, reps = 60, 20
		times := make([][]float64, len(variants))
		for rd := 0; rd < rounds; rd++ {
			for vi, v := range variants {
				v.fn()
				st := time.Now()
				for i := 0; i < reps; i++ {
					v.fn()
				}
				times[vi] = append(times[vi], float64(time.Since(st).Nanoseconds())/reps/1e3)
			}
		}
		line := fmt.Sprintf("%-15s %dx%dx%d ta=%v tb=%v:", sh.name, m, n, k, sh.ta, sh.tb)
		for vi, v := range variants {
			slices.Sort(times[vi])
			line += fmt.Sprintf(" %s %.1f", v.name, times[vi][rounds/2])
		}
		t.Log(line)
	}
}
