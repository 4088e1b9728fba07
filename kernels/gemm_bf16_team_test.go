//go:build cgo && amd64 && gbprobe

package kernels

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Two-worker diagnostics of the bfloat16 blocked GEMM (go test -tags gbprobe ./kernels
// -run GemmBF16Team -v; GBPROBE_SIZE sets the square size, default 512, GBPROBE_ROUNDS
// the rounds). On a 2-core machine shared with other work only the distributions'
// low ends (min, p10) and the CPU-time figures mean anything.

func gbProbeEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// threadRunNs is every thread's run time so far (ns, /proc/self/task/*/schedstat).
func threadRunNs() map[string]int64 {
	m := map[string]int64{}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, tk := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + tk.Name() + "/schedstat")
		if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
			m[tk.Name()], _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	return m
}

// runPerCall formats the CPU time per call of the threads that ran between two snapshots,
// total and per thread, largest first.
func runPerCall(before, after map[string]int64, calls int) string {
	var per []int64
	total := int64(0)
	for id, v := range after {
		if d := v - before[id]; d > 0 {
			per = append(per, d)
			total += d
		}
	}
	slices.Sort(per)
	slices.Reverse(per)
	s := fmt.Sprintf("CPU/call %.0f us, by thread:", float64(total)/1e3/float64(calls))
	for _, d := range per {
		s += fmt.Sprintf(" %.0f", float64(d)/1e3/float64(calls))
	}
	return s
}

func quantiles(ts []time.Duration) string {
	ts = slices.Clone(ts)
	slices.Sort(ts)
	return fmt.Sprintf("min %v p10 %v p25 %v median %v", ts[0], ts[len(ts)/10], ts[len(ts)/4], ts[len(ts)/2])
}

// TestGemmBF16Team times BatchedGemm's square product (C team, one cgo call) and reports
// each thread's CPU time per call, to see how many threads a call keeps busy.
func TestGemmBF16Team(t *testing.T) {
	size, rounds := gbProbeEnv("GBPROBE_SIZE", 512), gbProbeEnv("GBPROBE_ROUNDS", 10)
	calls := max(4, 20_000_000/(size*size))
	r := rand.New(rand.NewSource(1))
	s := int64(size)
	a, b := bf16View(r, 1, s, s, bf16Layout{}), bf16View(r, 1, s, s, bf16Layout{})
	out := bf16View(r, 1, s, s, bf16Layout{})
	prev := SetThreads(2)
	defer SetThreads(prev)
	var ts []time.Duration
	var cpu string
	for round := 0; round < rounds; round++ {
		s0 := threadRunNs()
		for i := 0; i < calls; i++ {
			t0 := time.Now()
			if err := BatchedGemm(out, a, b, nil, 1, 0); err != nil {
				t.Fatal(err)
			}
			ts = append(ts, time.Since(t0))
		}
		cpu = runPerCall(s0, threadRunNs(), calls)
	}
	t.Logf("%d^3, GOMAXPROCS %d, %d calls", size, runtime.GOMAXPROCS(0), len(ts))
	t.Logf("BatchedGemm: %s; last round %s", quantiles(ts), cpu)
}
