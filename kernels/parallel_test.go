package kernels

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// withWorkers runs f with GOMAXPROCS set to w (the pool follows it).
func withWorkers(t *testing.T, w int, f func()) {
	t.Helper()
	prev := runtime.GOMAXPROCS(w)
	defer runtime.GOMAXPROCS(prev)
	f()
}

// countParts runs RunParts(parts) and returns how often each part ran.
func countParts(parts int) []int32 {
	seen := make([]int32, parts)
	RunParts(parts, func(i int) { atomic.AddInt32(&seen[i], 1) })
	return seen
}

func TestRunPartsEachPartOnce(t *testing.T) {
	withWorkers(t, 4, func() {
		for _, parts := range []int{1, 2, 3, 8, 64} {
			for rep := 0; rep < 50; rep++ {
				for i, n := range countParts(parts) {
					if n != 1 {
						t.Fatalf("parts=%d: part %d ran %d times", parts, i, n)
					}
				}
			}
		}
	})
}

func TestRunPartsAfterHelpersPark(t *testing.T) {
	// Sleep past the spin window between calls so every job finds the helpers parked:
	// the wake-up path must not lose a job.
	withWorkers(t, 3, func() {
		for rep := 0; rep < 5; rep++ {
			time.Sleep(spinWait() + 2*time.Millisecond)
			for i, n := range countParts(6) {
				if n != 1 {
					t.Fatalf("rep %d: part %d ran %d times", rep, i, n)
				}
			}
		}
	})
}

func TestRunPartsNestedAndConcurrent(t *testing.T) {
	withWorkers(t, 4, func() {
		// Nested: a part's own RunParts finds the pool busy and runs inline.
		var inner atomic.Int32
		RunParts(4, func(int) {
			RunParts(5, func(int) { inner.Add(1) })
		})
		if got := inner.Load(); got != 20 {
			t.Fatalf("nested: %d inner parts ran, want 20", got)
		}
		// Concurrent callers: whoever loses the pool runs its parts itself.
		var total atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for rep := 0; rep < 100; rep++ {
					ParallelFor(1<<20, 1, func(lo, hi int64) { total.Add(hi - lo) })
				}
			}()
		}
		wg.Wait()
		if got, want := total.Load(), int64(8*100<<20); got != want {
			t.Fatalf("concurrent: covered %d elements, want %d", got, want)
		}
	})
}

func TestParallelForChunksDependOnlyOnSize(t *testing.T) {
	// Reductions combine per-chunk partials, so chunk bounds must not depend on timing.
	bounds := func() [][2]int64 {
		var mu sync.Mutex
		var b [][2]int64
		ParallelFor(1000003, 7, func(lo, hi int64) {
			mu.Lock()
			b = append(b, [2]int64{lo, hi})
			mu.Unlock()
		})
		return b
	}
	withWorkers(t, 2, func() {
		first := map[[2]int64]bool{}
		for _, c := range bounds() {
			first[c] = true
		}
		for rep := 0; rep < 20; rep++ {
			b := bounds()
			if len(b) != len(first) {
				t.Fatalf("chunk count changed: %d vs %d", len(b), len(first))
			}
			for _, c := range b {
				if !first[c] {
					t.Fatalf("chunk %v not in the first run's chunks", c)
				}
			}
		}
	})
}

func TestRunPartsPanicAfterAllParts(t *testing.T) {
	withWorkers(t, 2, func() {
		var ran atomic.Int32
		func() {
			defer func() {
				r := recover()
				if _, ok := r.(KernelPanic); !ok {
					t.Fatalf("expected KernelPanic, got %v", r)
				}
			}()
			RunParts(6, func(i int) {
				ran.Add(1)
				if i == 1 {
					panic("boom")
				}
			})
		}()
		if ran.Load() != 6 {
			t.Fatalf("%d parts ran before the panic was re-raised, want all 6", ran.Load())
		}
		// The pool is usable afterwards.
		for i, n := range countParts(4) {
			if n != 1 {
				t.Fatalf("after panic: part %d ran %d times", i, n)
			}
		}
	})
}

// TestHushParksSpinningHelpers: while hush is set (OpenBLAS's threads run), idle helpers
// park at once instead of spinning out their window, and the next job still wakes them.
func TestHushParksSpinningHelpers(t *testing.T) {
	if Workers() < 2 {
		t.Skip("needs 2 workers")
	}
	old := spinWaitNs.Load()
	spinWaitNs.Store(int64(time.Hour)) // without hush they would spin all test long
	defer spinWaitNs.Store(old)
	RunParts(4, func(int) {}) // helpers exist and are spinning now
	workPool.hush.Store(true)
	parked := func() bool {
		workPool.mu.Lock()
		defer workPool.mu.Unlock()
		for _, h := range workPool.helpers {
			if !h.parked.Load() {
				return false
			}
		}
		return len(workPool.helpers) > 0
	}
	deadline := time.Now().Add(2 * time.Second)
	for !parked() {
		if time.Now().After(deadline) {
			workPool.hush.Store(false)
			t.Fatal("helpers still spinning 2 s after hush")
		}
		time.Sleep(time.Millisecond)
	}
	workPool.hush.Store(false)
	var ran [8]atomic.Bool
	RunParts(len(ran), func(i int) { ran[i].Store(true) })
	for i := range ran {
		if !ran[i].Load() {
			t.Fatalf("part %d did not run after the helpers parked", i)
		}
	}
}

// With the solo hook reporting true, RunParts runs every part on the caller, one after
// another in order; ParallelFor's chunks stay those of the worker count, so results that
// combine per-chunk partials do not change.
func TestSoloRunsPartsOnCaller(t *testing.T) {
	chunks := func() map[[2]int64]bool {
		var mu sync.Mutex
		b := map[[2]int64]bool{}
		ParallelFor(1000003, 7, func(lo, hi int64) {
			mu.Lock()
			b[[2]int64{lo, hi}] = true
			mu.Unlock()
		})
		return b
	}
	withWorkers(t, 2, func() {
		want := chunks()
		SetSolo(func() bool { return true })
		defer SetSolo(nil)
		for rep := 0; rep < 20; rep++ {
			var running, most atomic.Int32
			var order []int
			RunParts(8, func(i int) {
				if n := running.Add(1); n > most.Load() {
					most.Store(n)
				}
				order = append(order, i) // only ever one part at a time
				time.Sleep(10 * time.Microsecond)
				running.Add(-1)
			})
			if most.Load() != 1 || len(order) != 8 {
				t.Fatalf("rep %d: %d parts at once, %d parts ran", rep, most.Load(), len(order))
			}
			for i, p := range order {
				if p != i {
					t.Fatalf("rep %d: parts ran in order %v", rep, order)
				}
			}
		}
		got := chunks()
		if len(got) != len(want) || len(want) < 2 {
			t.Fatalf("solo chunks %v, pooled %v", got, want)
		}
		for c := range want {
			if !got[c] {
				t.Fatalf("solo chunks %v, pooled %v", got, want)
			}
		}
	})
}

// TestParallelSetThreadsOne: with the thread setting at 1 (torch.set_num_threads(1)) every
// part runs on the caller, one at a time, and ParallelFor does not split; back at 0 the
// pool splits again.
func TestParallelSetThreadsOne(t *testing.T) {
	withWorkers(t, 2, func() {
		prev := SetThreads(1)
		defer SetThreads(prev)
		if Workers() != 1 {
			t.Fatalf("Workers() = %d with SetThreads(1)", Workers())
		}
		var running, most atomic.Int32
		RunParts(8, func(int) {
			if n := running.Add(1); n > most.Load() {
				most.Store(n)
			}
			time.Sleep(20 * time.Microsecond)
			running.Add(-1)
		})
		if most.Load() != 1 {
			t.Fatalf("%d parts ran at once with one thread", most.Load())
		}
		calls := 0
		ParallelFor(1<<20, 8, func(lo, hi int64) {
			calls++
			if lo != 0 || hi != 1<<20 {
				t.Fatalf("one thread split [0,%d) into [%d,%d)", 1<<20, lo, hi)
			}
		})
		if calls != 1 {
			t.Fatalf("ParallelFor made %d calls with one thread", calls)
		}
		SetThreads(0)
		if Workers() != 2 {
			t.Fatalf("Workers() = %d after SetThreads(0) with GOMAXPROCS 2", Workers())
		}
	})
}

// TestParallelSpinBudgetAdapts: a helper spins about twice the idle gap it has lately seen
// between jobs; gaps longer than the limit turn spinning off, and short gaps after them
// turn it back on (the gap runs to the job's publication, so a parked helper's slow wake-up
// does not keep it parked).
func TestParallelSpinBudgetAdapts(t *testing.T) {
	old := spinWaitNs.Load()
	spinWaitNs.Store(int64(100 * time.Microsecond))
	defer spinWaitNs.Store(old)
	var p pool
	h := &poolHelper{}
	feed := func(gap time.Duration, n int) {
		for i := 0; i < n; i++ {
			p.at.Store(int64(10*time.Second) + int64(gap))
			h.observe(&p, int64(10*time.Second))
		}
	}
	feed(10*time.Microsecond, 20)
	if b := h.spinBudget(); b < 15*time.Microsecond || b > 30*time.Microsecond {
		t.Fatalf("gaps of 10 µs: spin budget %v, want about 20 µs", b)
	}
	feed(5*time.Millisecond, 3)
	if b := h.spinBudget(); b != 0 {
		t.Fatalf("after 5 ms gaps: spin budget %v, want 0 (park at once)", b)
	}
	feed(10*time.Microsecond, 20)
	if b := h.spinBudget(); b == 0 || b > 50*time.Microsecond {
		t.Fatalf("back to 10 µs gaps: spin budget %v, want 20-50 µs", b)
	}
	feed(80*time.Microsecond, 20)
	if b := h.spinBudget(); b != 100*time.Microsecond {
		t.Fatalf("gaps of 80 µs: spin budget %v, want the 100 µs limit", b)
	}
	// A job published before the helper went idle (it was still busy) is a zero gap.
	p.at.Store(int64(time.Second))
	for i := 0; i < 20; i++ {
		h.observe(&p, int64(2*time.Second))
	}
	if b := h.spinBudget(); b < minSpin || b > minSpin+time.Microsecond {
		t.Fatalf("zero gaps: spin budget %v, want about %v", b, minSpin)
	}
}

func busyFor(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// BenchmarkParallelPool times RunParts(2) jobs of a given size with a given gap of caller
// work between them, reporting wall time per job and the process's CPU time per job beyond
// the caller's gap work (the parts plus what the helpers' spinning takes from other threads).
func BenchmarkParallelPool(b *testing.B) {
	for _, c := range []struct {
		name      string
		part, gap time.Duration
	}{{"small_gap5us", 5 * time.Microsecond, 5 * time.Microsecond},
		{"small_gap50us", 5 * time.Microsecond, 50 * time.Microsecond},
		{"small_gap1ms", 5 * time.Microsecond, time.Millisecond},
		{"large_gap50us", 500 * time.Microsecond, 50 * time.Microsecond}} {
		b.Run(c.name, func(b *testing.B) {
			cpu0 := processCPU()
			var job time.Duration
			for i := 0; i < b.N; i++ {
				busyFor(c.gap) // the caller's own work between kernels (Python, small ops)
				t0 := time.Now()
				RunParts(2, func(int) { busyFor(c.part) })
				job += time.Since(t0)
			}
			b.ReportMetric(float64(job.Nanoseconds())/float64(b.N), "job-ns")
			// CPU time beyond the caller's gap work: the job's parts plus the helpers' spinning.
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N)-float64(c.gap.Nanoseconds()),
				"extra-cpu-ns/op")
		})
	}
}

// TestPoolJobClaim: the caller claims parts from the front and the helpers from the back,
// so two workers that are on time run the same parts in every call; every part is
// claimed exactly once however the claims interleave.
func TestPoolJobClaim(t *testing.T) {
	j := &poolJob{parts: 5}
	var got []int64
	for _, back := range []bool{false, true, false, true, false, true, false} {
		got = append(got, j.claim(back))
	}
	if want := []int64{0, 4, 1, 3, 2, -1, -1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
	for _, parts := range []int64{1, 2, 7, 1000} {
		j := &poolJob{parts: parts}
		seen := make([]atomic.Int32, parts)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(back bool) {
				defer wg.Done()
				for i := j.claim(back); i >= 0; i = j.claim(back) {
					seen[i].Add(1)
				}
			}(g%2 == 1)
		}
		wg.Wait()
		for i := range seen {
			if n := seen[i].Load(); n != 1 {
				t.Fatalf("parts %d: part %d claimed %d times", parts, i, n)
			}
		}
	}
}
