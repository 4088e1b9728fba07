package kernels

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// Inside a solo scope every part runs on the calling goroutine, one after the other in
// order; outside it the same parts run (each exactly once).
func TestSoloScopeKeepsPartsOnCaller(t *testing.T) {
	if Workers() < 2 {
		t.Skip("one worker: every kernel is solo")
	}
	const parts = 64
	run := func() (order []int, maxActive int32) {
		var active atomic.Int32
		var peak atomic.Int32
		seen := make([]atomic.Int32, parts)
		done := make(chan int, parts)
		RunParts(parts, func(i int) {
			a := active.Add(1)
			for p := peak.Load(); a > p && !peak.CompareAndSwap(p, a); p = peak.Load() {
			}
			runtime.Gosched() // give a helper the chance to take a part meanwhile
			seen[i].Add(1)
			done <- i
			active.Add(-1)
		})
		close(done)
		for i := range done {
			order = append(order, i)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("part %d ran %d times", i, seen[i].Load())
			}
		}
		return order, peak.Load()
	}
	run() // the pool as usual
	EnterSolo()
	order, peak := run()
	ExitSolo()
	if peak != 1 {
		t.Fatalf("solo scope: %d parts ran at once", peak)
	}
	for i, p := range order {
		if p != i {
			t.Fatalf("solo scope: parts ran in order %v", order)
		}
	}
	if soloScoped() {
		t.Fatal("scope still open after ExitSolo")
	}
}
