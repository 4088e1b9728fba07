package bridge

import (
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"hpusim/kernels"
)

// waitStreamed waits until the worker has taken every node recorded so far in the current
// graph (streaming), or stopped streaming it at a failed node, and gone idle; it fails the
// test if that does not happen. The worker may have streamed a prefix while the test was
// still recording and gone idle with fewer than streamMin nodes left, which would wake it
// only at launch: then it is kicked, as record kicks it. (A failing node it streams stops
// streaming; the rest run at launch.)
func waitStreamed(t *testing.T) {
	t.Helper()
	e := eng
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		taken, n, failed := e.cur.taken, len(e.cur.nodes), e.cur.streamErr != nil
		e.mu.Unlock()
		if (taken == n || failed) && e.idle.Load() {
			return
		}
		if taken < n && !failed && e.idle.CompareAndSwap(true, false) {
			select {
			case e.kick <- struct{}{}:
			default: // a kick is pending already
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the idle worker did not stream the recorded prefix")
}

// The worker runs a graph's prefix while it is still being recorded; a fused group the
// prefix cuts runs its remaining nodes one by one; results are bitwise the eager ones.
func TestStreamedPrefixMatchesEager(t *testing.T) {
	if eng.streamMin == 0 {
		t.Skip("streaming disabled by HPUSIM_LAZY_STREAM=0")
	}
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(2))
	const n, chain = 5003, 12
	a, b := randBuf(t, n, r), randBuf(t, n, r)
	names := []string{"ew.mul", "ew.add", "ew.gelu", "ew.neg"}
	run := func(rec func(string, kernels.Tensor, []kernels.Tensor, ...float64), mid func()) (buf, []buf) {
		tmp := make([]buf, chain)
		for i := range tmp {
			tmp[i] = newBuf(t, n)
		}
		prev := a
		for i := 0; i < chain; i++ {
			if i == eng.streamMin {
				mid()
			}
			name := names[i%len(names)]
			ins := []kernels.Tensor{prev.all(), b.all()}
			if name == "ew.gelu" || name == "ew.neg" {
				ins = ins[:1]
			}
			rec(name, tmp[i].all(), ins, 0.5)
			prev = tmp[i]
		}
		return prev, tmp
	}
	before := eng.streamed.Load()
	want, wtmp := run(func(name string, out kernels.Tensor, ins []kernels.Tensor, p ...float64) {
		eagerEW(t, name, out, ins, p...)
	}, func() {})
	got, gtmp := run(func(name string, out kernels.Tensor, ins []kernels.Tensor, p ...float64) {
		ew(t, name, out, ins, p...)
	}, func() { waitStreamed(t) })
	streamed := eng.streamed.Load() - before
	for _, x := range gtmp[:chain-1] { // intermediates die: the rest of the chain fuses
		if err := Free(x.p); err != nil {
			t.Fatal(err)
		}
	}
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	if streamed < int64(eng.streamMin) {
		t.Fatalf("%d nodes streamed, want at least %d", streamed, eng.streamMin)
	}
	if p := lastPlan(t); p.fused == 0 {
		t.Fatal("the chain's tail was not fused: the cut-group path is not exercised")
	}
	for i, v := range got.f32() {
		if math.Float32bits(v) != math.Float32bits(want.f32()[i]) {
			t.Fatalf("element %d: streamed %v, eager %v", i, v, want.f32()[i])
		}
	}
	for _, x := range append(wtmp, gtmp[chain-1]) {
		Free(x.p)
	}
}

// A streamed node that fails stops streaming; the failure is raised at the next trigger
// naming the op, and what the rest of the graph would have written is poisoned.
func TestStreamedFailureRaisesAtTrigger(t *testing.T) {
	if eng.streamMin == 0 {
		t.Skip("streaming disabled by HPUSIM_LAZY_STREAM=0")
	}
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	a, out, later := newBuf(t, 10), newBuf(t, 10), newBuf(t, 10)
	for i := 0; i < eng.streamMin; i++ {
		dt := int64(kernels.Float32)
		if i == 2 {
			dt = 99 // an invalid compute dtype: the kernel fails
		}
		c := &Call{T: []kernels.Tensor{out.all(), a.all(), a.all()}, I: []int64{dt}}
		if err := Execute(opID(t, "ew.add"), c); err != nil {
			t.Fatalf("recording should not fail: %v", err)
		}
	}
	waitStreamed(t)
	ew(t, "ew.abs", later.all(), []kernels.Tensor{a.all()})
	err := Step(true, "test")
	if err == nil || !strings.Contains(err.Error(), "ew.add") {
		t.Fatalf("trigger error %v does not name the op", err)
	}
	use := &Call{T: []kernels.Tensor{a.all(), later.all()}, I: []int64{int64(kernels.Float32)}}
	if err := Execute(opID(t, "ew.neg"), use); err == nil || !strings.Contains(err.Error(), "no valid data") {
		t.Fatalf("use of a tensor the failed graph should have written: %v", err)
	}
	Free(out.p)
	Free(later.p)
}

// A streamed node that fails but is dead code (the plan removes it) raises nothing, as
// without streaming; the graph's live results are still produced.
func TestStreamedFailureOfDeadNodeIsNoFailure(t *testing.T) {
	if eng.streamMin == 0 {
		t.Skip("streaming disabled by HPUSIM_LAZY_STREAM=0")
	}
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	a, dead, live := newBuf(t, 10), newBuf(t, 10), newBuf(t, 10)
	for i := range a.f32() {
		a.f32()[i] = float32(i) - 4.5
	}
	bad := &Call{T: []kernels.Tensor{dead.all(), a.all(), a.all()}, I: []int64{99}} // fails if run
	if err := Execute(opID(t, "ew.add"), bad); err != nil {
		t.Fatalf("recording should not fail: %v", err)
	}
	for i := 1; i < eng.streamMin; i++ {
		ew(t, "ew.abs", live.all(), []kernels.Tensor{a.all()})
	}
	waitStreamed(t)
	ew(t, "ew.neg", live.all(), []kernels.Tensor{live.all()})
	if err := Free(dead.p); err != nil {
		t.Fatal(err)
	}
	if err := Step(true, "test"); err != nil {
		t.Fatalf("a dead node's failure was raised: %v", err)
	}
	for i, v := range live.f32() {
		if want := -float32(math.Abs(float64(i) - 4.5)); v != want {
			t.Fatalf("element %d: %v, want %v", i, v, want)
		}
	}
	Free(a.p)
	Free(live.p)
}
