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
	"unsafe"
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

// TestGemmBF16Team times the product on two workers as BatchedGemm runs it (Go pool, one
// cgo call per part) against the same parts on a C pthread team started from one cgo
// call, alternating rounds, and checks the two results are bit-identical.
func TestGemmBF16Team(t *testing.T) {
	size, rounds := gbProbeEnv("GBPROBE_SIZE", 512), gbProbeEnv("GBPROBE_ROUNDS", 10)
	calls := max(4, 20_000_000/(size*size))
	r := rand.New(rand.NewSource(1))
	s := int64(size)
	a, b := bf16View(r, 1, s, s, bf16Layout{}), bf16View(r, 1, s, s, bf16Layout{})
	outGo, outTeam := bf16View(r, 1, s, s, bf16Layout{}), bf16View(r, 1, s, s, bf16Layout{})
	np := (size + gbNR - 1) / gbNR
	pb := make([]uint16, np*gbNR*((size+1)/2)*2)
	teamStart(1)
	prev := SetThreads(2)
	defer SetThreads(prev)
	var tGo, tTeam []time.Duration
	var cpuGo, cpuTeam string
	for round := 0; round < rounds; round++ {
		s0 := threadRunNs()
		for i := 0; i < calls; i++ {
			t0 := time.Now()
			if err := BatchedGemm(outGo, a, b, nil, 1, 0); err != nil {
				t.Fatal(err)
			}
			tGo = append(tGo, time.Since(t0))
		}
		s1 := threadRunNs()
		for i := 0; i < calls; i++ {
			t0 := time.Now()
			teamGemm(a.Ptr, b.Ptr, outTeam.Ptr, pb, size, min(np, 2*Workers()))
			tTeam = append(tTeam, time.Since(t0))
		}
		s2 := threadRunNs()
		cpuGo, cpuTeam = runPerCall(s0, s1, calls), runPerCall(s1, s2, calls)
	}
	n := size * size
	got, want := unsafe.Slice((*uint16)(outTeam.Ptr), n), unsafe.Slice((*uint16)(outGo.Ptr), n)
	if !slices.Equal(got, want) {
		t.Fatal("the C team's product differs from BatchedGemm's")
	}
	t.Logf("%d^3, GOMAXPROCS %d, %d calls each", size, runtime.GOMAXPROCS(0), len(tGo))
	t.Logf("Go pool: %s; last round %s", quantiles(tGo), cpuGo)
	t.Logf("C team:  %s; last round %s", quantiles(tTeam), cpuTeam)
}

// TestGemmBF16StageCPU runs the same column parts on one worker and on two (alternating)
// and sums each part's thread CPU time for packing and for the tiles, measured inside C:
// if running both cores at once slowed a core down (shared cache or memory bandwidth),
// the two-worker sums would be the larger. Thread CPU time does not count the time a
// thread is descheduled, so this holds on a busy machine.
func TestGemmBF16StageCPU(t *testing.T) {
	size, rounds := gbProbeEnv("GBPROBE_SIZE", 512), gbProbeEnv("GBPROBE_ROUNDS", 40)
	r := rand.New(rand.NewSource(1))
	s := int64(size)
	a, b, out := bf16View(r, 1, s, s, bf16Layout{}), bf16View(r, 1, s, s, bf16Layout{}), bf16View(r, 1, s, s, bf16Layout{})
	np := (size + gbNR - 1) / gbNR
	pb := make([]uint16, np*gbNR*((size+1)/2)*2)
	parts := gbProbeEnv("GBPROBE_PARTS", min(np, 4))
	per := (np + parts - 1) / parts
	parts = (np + per - 1) / per
	pack, tiles := map[int][]float64{}, map[int][]float64{}
	for round := 0; round < rounds; round++ {
		for _, w := range []int{1, 2} {
			prev := SetThreads(w)
			ts := make([][6]int64, parts)
			RunParts(parts, func(pi int) {
				ts[pi] = teamTimedPart(a.Ptr, b.Ptr, out.Ptr, pb, size, pi*per, min((pi+1)*per, np))
			})
			SetThreads(prev)
			var p, tl float64
			for _, x := range ts {
				p += float64(x[2]-x[0]) / 1e3
				tl += float64(x[4]-x[2]) / 1e3
			}
			pack[w], tiles[w] = append(pack[w], p), append(tiles[w], tl)
		}
	}
	q := func(xs []float64) string {
		slices.Sort(xs)
		return fmt.Sprintf("min %.0f p25 %.0f median %.0f", xs[0], xs[len(xs)/4], xs[len(xs)/2])
	}
	for _, w := range []int{1, 2} {
		t.Logf("%d^3, %d parts, %d worker(s): thread CPU us summed over parts: packing %s; tiles %s", size, parts, w,
			q(pack[w]), q(tiles[w]))
	}
}
