//go:build cgo && amd64

package kernels

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// teamJob runs the C check job (cteam_cgo.go) of parts parts through runTeam: each part
// counts its runs and notes its thread; part fail returns code 7.
func teamJob(split bool, parts, fail int, spin time.Duration) (runs, tids []int32, threads int, err error) {
	runs, tids = make([]int32, parts), make([]int32, parts)
	err = runTeam(split, func(n int) int {
		threads = n
		return teamCheck(n, runs, tids, fail, int64(spin), spinWaitNs.Load())
	})
	return runs, tids, threads, err
}

func onceEach(t *testing.T, runs []int32) {
	t.Helper()
	for i, r := range runs {
		if r != 1 {
			t.Fatalf("part %d ran %d times", i, r)
		}
	}
}

// Every part runs exactly once, on more than one thread when two workers are free, and
// small jobs, odd part counts and one-part jobs complete.
func TestTeamRunsEveryPartOnce(t *testing.T) {
	if Workers() < 2 {
		t.Skip("needs 2 workers")
	}
	for _, parts := range []int{1, 2, 3, 7, 64, 1000} {
		runs, _, threads, err := teamJob(true, parts, -1, 0)
		if err != nil || threads != Workers() {
			t.Fatalf("%d parts: err %v, threads %d", parts, err, threads)
		}
		onceEach(t, runs)
	}
	// Parts long enough (200 us) that the helper takes some: within a few tries, at least
	// one job has parts on two threads.
	for try := 0; ; try++ {
		_, tids, _, err := teamJob(true, 8, -1, 200*time.Microsecond)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int32]bool{}
		for _, id := range tids {
			seen[id] = true
		}
		if len(seen) >= 2 {
			break
		}
		if try == 50 {
			t.Fatal("no helper ever ran a part")
		}
	}
	if teamStarted() < 1 {
		t.Fatal("no helper started")
	}
}

// A part's error code comes back as a TeamError; the other parts still ran once.
func TestTeamReportsPartError(t *testing.T) {
	for _, split := range []bool{true, false} {
		runs, _, _, err := teamJob(split, 16, 5, 0)
		var te TeamError
		if !errors.As(err, &te) || te.Code != 7 {
			t.Fatalf("split %v: err %v, want code 7", split, err)
		}
		onceEach(t, runs)
		if _, _, _, err := teamJob(split, 16, -1, 0); err != nil {
			t.Fatalf("split %v: next job reports %v", split, err)
		}
	}
}

// Goroutines calling at once: one gets the team, the others run their parts on their
// own threads; every part of every job runs once.
func TestTeamConcurrentCallers(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				runs, _, _, err := teamJob(true, 2+i%9, -1, time.Duration(i%3)*time.Microsecond)
				if err != nil {
					errs <- err
					return
				}
				for p, r := range runs {
					if r != 1 {
						errs <- fmt.Errorf("part %d of %d ran %d times", p, len(runs), r)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Inside a RunParts part the team job runs on the part's thread (the pool owns the
// cores): no deadlock, no helper.
func TestTeamNestedInPoolPart(t *testing.T) {
	if Workers() < 2 {
		t.Skip("needs 2 workers")
	}
	var mu sync.Mutex
	RunParts(4, func(int) {
		runs, tids, threads, err := teamJob(true, 6, -1, 0)
		me := threadID()
		mu.Lock()
		defer mu.Unlock()
		if err != nil || threads != 1 {
			t.Errorf("nested: err %v, threads %d", err, threads)
		}
		for i, r := range runs {
			if r != 1 || tids[i] != me {
				t.Errorf("nested part %d: %d runs, thread %d (caller %d)", i, r, tids[i], me)
			}
		}
	})
}

// SetThreads(1), a solo scope and split false each run every part on the caller, in order.
func TestTeamSerialCases(t *testing.T) {
	check := func(name string, split bool) {
		t.Helper()
		me := threadID()
		runs, tids, threads, err := teamJob(split, 9, -1, 0)
		if err != nil || threads != 1 {
			t.Fatalf("%s: err %v, threads %d", name, err, threads)
		}
		onceEach(t, runs)
		for i, id := range tids {
			if id != me {
				t.Fatalf("%s: part %d ran on thread %d, not the caller's %d", name, i, id, me)
			}
		}
	}
	// The caller's thread is the goroutine's only while it is locked to it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev := SetThreads(1)
	check("SetThreads(1)", true)
	SetThreads(prev)
	EnterSolo()
	check("solo scope", true)
	ExitSolo()
	check("split false", false)
}

// Hushed, idle helpers sleep at once instead of spinning out their window: the team's
// when the Go pool publishes a job, the pool's when a team job starts. Jobs 50 ms apart
// first stretch the helpers' adaptive windows to about 100 ms; each must then be asleep
// within 30 ms of the other side's job. Both sides still run their next jobs.
func TestTeamAndPoolHushEachOther(t *testing.T) {
	if Workers() < 2 {
		t.Skip("needs 2 workers")
	}
	old := spinWaitNs.Load()
	spinWaitNs.Store(int64(time.Hour))
	defer spinWaitNs.Store(old)
	within := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(d); !ok(); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still spinning %v after the other side's job", what, d)
			}
		}
	}
	poolParked := func() bool {
		workPool.mu.Lock()
		defer workPool.mu.Unlock()
		for _, h := range workPool.helpers {
			if !h.parked.Load() {
				return false
			}
		}
		return true
	}
	for i := 0; i < 8; i++ {
		time.Sleep(50 * time.Millisecond)
		RunParts(4, func(int) {})
	}
	runs, _, _, err := teamJob(true, 8, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	onceEach(t, runs)
	within("pool helpers", 30*time.Millisecond, poolParked)
	for i := 0; i < 8; i++ {
		time.Sleep(50 * time.Millisecond)
		if _, _, _, err := teamJob(true, 8, -1, 0); err != nil {
			t.Fatal(err)
		}
	}
	var ran [8]bool
	RunParts(len(ran), func(i int) { ran[i] = true })
	for i, r := range ran {
		if !r {
			t.Fatalf("pool part %d did not run after the team job", i)
		}
	}
	within("team helpers", 30*time.Millisecond, func() bool { return teamSleeping() == teamStarted() })
}
