package bridge

import (
	"math"
	"math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"hpusim/device"
	"hpusim/kernels"
)

func init() { EnableLazy() }

// buf is a device allocation viewed as a contiguous float32 tensor of n elements.
type buf struct {
	p unsafe.Pointer
	n int64
}

func newBuf(t *testing.T, n int64) buf {
	d, err := device.Get(0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	return buf{p, n}
}

func (b buf) f32() []float32 { return unsafe.Slice((*float32)(b.p), b.n) }

func (b buf) view(off, n, stride int64) kernels.Tensor {
	return kernels.Tensor{Ptr: unsafe.Add(b.p, 4*off), DType: kernels.Float32, Sizes: []int64{n}, Strides: []int64{stride}}
}

func (b buf) all() kernels.Tensor { return b.view(0, b.n, 1) }

func opID(t *testing.T, name string) int {
	id, ok := Lookup(name)
	if !ok {
		t.Fatalf("no op %s", name)
	}
	return id
}

// ew records (lazy) an elementwise op computing in float32.
func ew(t *testing.T, name string, out kernels.Tensor, ins []kernels.Tensor, p ...float64) {
	t.Helper()
	c := &Call{T: append([]kernels.Tensor{out}, ins...), I: []int64{int64(kernels.Float32)}, F: p}
	if err := Execute(opID(t, name), c); err != nil {
		t.Fatal(err)
	}
}

// eagerEW runs the same op at once, bypassing the recorder.
func eagerEW(t *testing.T, name string, out kernels.Tensor, ins []kernels.Tensor, p ...float64) {
	t.Helper()
	c := &Call{T: append([]kernels.Tensor{out}, ins...), I: []int64{int64(kernels.Float32)}, F: p}
	if err := runKernel(ops[opID(t, name)], c); err != nil {
		t.Fatal(err)
	}
}

func randBuf(t *testing.T, n int64, r *rand.Rand) buf {
	b := newBuf(t, n)
	for i := range b.f32() {
		b.f32()[i] = float32(r.NormFloat64())
	}
	return b
}

func lastPlan(t *testing.T) *plan {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	for _, rs := range cache.byHash {
		for _, r := range rs {
			if r.id == cache.lastID {
				return r.plan
			}
		}
	}
	t.Fatal("no recipe")
	return nil
}

// A chain of elementwise ops whose intermediates die is fused into one loop with no
// intermediate buffers, and the result is bitwise the eager one.
func TestFusionMatchesEagerBitwise(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	const n = 100003 // several chunks and workers, with a ragged tail
	a, b, c := randBuf(t, n, r), randBuf(t, n, r), randBuf(t, n, r)
	want := newBuf(t, n)
	e1, e2, e3 := newBuf(t, n), newBuf(t, n), newBuf(t, n)
	eagerEW(t, "ew.mul", e1.all(), []kernels.Tensor{a.all(), b.all()})
	eagerEW(t, "ew.add", e2.all(), []kernels.Tensor{e1.all(), c.all()}, 0.37)
	eagerEW(t, "ew.gelu", e3.all(), []kernels.Tensor{e2.all()})
	eagerEW(t, "ew.addcdiv", want.all(), []kernels.Tensor{e3.all(), a.all(), c.all()}, -0.5)

	got := newBuf(t, n)
	t1, t2, t3 := newBuf(t, n), newBuf(t, n), newBuf(t, n)
	ew(t, "ew.mul", t1.all(), []kernels.Tensor{a.all(), b.all()})
	ew(t, "ew.add", t2.all(), []kernels.Tensor{t1.all(), c.all()}, 0.37)
	ew(t, "ew.gelu", t3.all(), []kernels.Tensor{t2.all()})
	ew(t, "ew.addcdiv", got.all(), []kernels.Tensor{t3.all(), a.all(), c.all()}, -0.5)
	for _, x := range []buf{t1, t2, t3} { // the program drops the intermediates
		if err := Free(x.p); err != nil {
			t.Fatal(err)
		}
	}
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	p := lastPlan(t)
	if p.fused != 4 || len(p.steps) != 1 || p.virtuals != 3 {
		t.Fatalf("plan: fused %d steps %d virtual %d", p.fused, len(p.steps), p.virtuals)
	}
	for i := range want.f32() {
		if math.Float32bits(want.f32()[i]) != math.Float32bits(got.f32()[i]) {
			t.Fatalf("element %d: fused %v, eager %v", i, got.f32()[i], want.f32()[i])
		}
	}
}

// Overlapping views with a write (x[1:] = x[:-1] + 1, then y = x*2) are a hazard: the
// ops must not be fused and the result is the sequential one.
func TestHazardOnOverlappingViewsPreventsFusion(t *testing.T) {
	const n = 5000
	x, xe := newBuf(t, n), newBuf(t, n)
	for i := range x.f32() {
		x.f32()[i], xe.f32()[i] = float32(i), float32(i)
	}
	y, ye := newBuf(t, n), newBuf(t, n)
	one := []float32{1}
	scalar := kernels.Tensor{Ptr: unsafe.Pointer(&one[0]), DType: kernels.Float32, Sizes: []int64{n - 1}, Strides: []int64{0}}
	ew(t, "ew.add", x.view(1, n-1, 1), []kernels.Tensor{x.view(0, n-1, 1), scalar}, 1)
	ew(t, "ew.mul", y.all(), []kernels.Tensor{x.all(), x.all()})
	one[0] = 100 // the host scalar was captured at record time
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	one[0] = 1
	eagerEW(t, "ew.add", xe.view(1, n-1, 1), []kernels.Tensor{xe.view(0, n-1, 1), scalar}, 1)
	eagerEW(t, "ew.mul", ye.all(), []kernels.Tensor{xe.all(), xe.all()})
	if p := lastPlan(t); p.fused != 0 {
		t.Fatalf("hazardous ops were fused (%d)", p.fused)
	}
	for i := range ye.f32() {
		if y.f32()[i] != ye.f32()[i] || x.f32()[i] != xe.f32()[i] {
			t.Fatalf("element %d: lazy %v %v, eager %v %v", i, x.f32()[i], y.f32()[i], xe.f32()[i], ye.f32()[i])
		}
	}
}

func hits() (int64, int64, int64) {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	return cache.compiles, cache.totalHit, cache.totalMiss
}

var cacheTestRuns atomic.Int64

// The same structure at new addresses, with new float scalars, hits the cache; a new
// shape or integer attribute compiles anew.
func TestRecipeCacheKeysOnStructureOnly(t *testing.T) {
	step := func(n int64, alpha float64, cdt kernels.DType) {
		a, b, o := newBuf(t, n), newBuf(t, n), newBuf(t, n)
		c := &Call{T: []kernels.Tensor{o.all(), a.all(), b.all()}, I: []int64{int64(cdt)}, F: []float64{alpha}}
		if err := Execute(opID(t, "ew.add"), c); err != nil {
			t.Fatal(err)
		}
		if err := Step(true, "test"); err != nil {
			t.Fatal(err)
		}
	}
	n := 77 + 2*cacheTestRuns.Add(1) // shapes no earlier run (go test -count) compiled
	c0, h0, m0 := hits()
	step(n, 1, kernels.Float32)
	step(n, 2.5, kernels.Float32)
	step(n, -1, kernels.Float32)
	c1, h1, m1 := hits()
	if c1-c0 != 1 || h1-h0 != 2 || m1-m0 != 1 {
		t.Fatalf("same structure: compiles %d hits %d misses %d", c1-c0, h1-h0, m1-m0)
	}
	step(n+1, 1, kernels.Float32)
	step(n+1, 1, kernels.Float64)
	if c2, _, _ := hits(); c2-c1 != 2 {
		t.Fatalf("new shape / attribute compiled %d times, want 2", c2-c1)
	}
}

func TestDeadNodesRemovedAndFreesDeferred(t *testing.T) {
	d, _ := device.Get(0)
	a, dead, live := newBuf(t, 1000), newBuf(t, 1000), newBuf(t, 1000)
	ew(t, "ew.neg", dead.all(), []kernels.Tensor{a.all()})
	ew(t, "ew.abs", live.all(), []kernels.Tensor{a.all()})
	before := d.Stats().InUse
	if err := Free(dead.p); err != nil { // still used by the pending graph: deferred
		t.Fatal(err)
	}
	if d.Stats().InUse != before {
		t.Fatal("memory of a pending graph was freed before the graph ran")
	}
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	if d.Stats().InUse != before-4000 {
		t.Fatalf("deferred free not done after the graph: InUse %d, want %d", d.Stats().InUse, before-4000)
	}
	if p := lastPlan(t); len(p.removed) != 1 || len(p.steps) != 1 {
		t.Fatalf("dead node not removed: removed %v, steps %d", p.removed, len(p.steps))
	}
}

// A graph failing at run time raises at the next trigger naming the op; what it should
// have written raises on use instead of holding garbage.
func TestFailedGraphRaisesAtTriggerAndPoisons(t *testing.T) {
	a, out := newBuf(t, 10), newBuf(t, 10)
	c := &Call{T: []kernels.Tensor{out.all(), a.all(), a.all()}, I: []int64{99}} // invalid compute dtype
	if err := Execute(opID(t, "ew.add"), c); err != nil {
		t.Fatalf("recording should not fail: %v", err)
	}
	err := Step(true, "test")
	if err == nil || !strings.Contains(err.Error(), "ew.add") {
		t.Fatalf("trigger error %v does not name the op", err)
	}
	if err := Step(true, "test"); err != nil {
		t.Fatalf("error raised twice: %v", err)
	}
	use := &Call{T: []kernels.Tensor{a.all(), out.all()}, I: []int64{int64(kernels.Float32)}}
	if err := Execute(opID(t, "ew.neg"), use); err == nil || !strings.Contains(err.Error(), "no valid data") {
		t.Fatalf("use of a poisoned tensor: %v", err)
	}
	host := make([]float32, 10)
	rd := &Call{T: []kernels.Tensor{{Ptr: unsafe.Pointer(&host[0]), DType: kernels.Float32, Sizes: []int64{10}, Strides: []int64{1}}, out.all()}}
	if err := Execute(opID(t, "copy"), rd); err == nil || !strings.Contains(err.Error(), "no valid data") {
		t.Fatalf("host read of a poisoned tensor: %v", err)
	}
	Free(out.p)
}

func TestRecipeCacheIsBounded(t *testing.T) {
	c := newRecipeCache()
	c.limit = 2
	for n := int64(1); n <= 3; n++ {
		g := newGraph()
		g.nodes = []node{{op: ops[opID(t, "fill")], args: []operand{{t: kernels.Tensor{DType: kernels.Float32, Sizes: []int64{n}, Strides: []int64{1}}, sto: noStorage}}}}
		g.dead = nil
		if _, err := c.get(g); err != nil {
			t.Fatal(err)
		}
	}
	if c.lru.Len() != 2 || c.evictions != 1 {
		t.Fatalf("cache holds %d recipes after %d evictions", c.lru.Len(), c.evictions)
	}
}

func TestCanonicalFormIgnoresAddressesAndData(t *testing.T) {
	mk := func() []int64 {
		a, b := newBuf(t, 64), newBuf(t, 64)
		for i := range a.f32() {
			a.f32()[i] = rand.Float32()
		}
		g := newGraph()
		st := []*storage{{ptr: a.p, base: uintptr(a.p), size: 256}, {ptr: b.p, base: uintptr(b.p), size: 256}}
		g.stos, g.dead = st, []bool{false, true}
		g.nodes = []node{{op: ops[opID(t, "ew.relu")], args: []operand{{t: b.all(), sto: 1}, {t: a.view(0, 64, 1), sto: 0}}, ints: []int64{6}}}
		return g.canonical()
	}
	w1, w2 := mk(), mk()
	if !equalWords(w1, w2) || hashWords(w1) != hashWords(w2) {
		t.Fatal("canonical form depends on addresses or data")
	}
}

// The solo hint (kernels.SetSolo) follows the host: busy right after it records, not
// while it waits on the worker, nor once it has been quiet for the window.
func TestHostBusyFollowsRecording(t *testing.T) {
	a, b := newBuf(t, 64), newBuf(t, 64)
	ew(t, "ew.add", b.all(), []kernels.Tensor{a.all(), a.all()}, 1)
	if !eng.hostBusy() {
		t.Fatal("host not busy right after recording")
	}
	eng.hostWaiting.Add(1)
	busy := eng.hostBusy()
	eng.hostWaiting.Add(-1)
	if busy {
		t.Fatal("host busy while waiting on the worker")
	}
	time.Sleep(2 * hostActiveWindow)
	if eng.hostBusy() {
		t.Fatal("host busy after a quiet window")
	}
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
}

// Lazy mode gives the runtime a processor more than the cores (kernels keep one worker a
// core) and collects garbage less often, unless the environment says otherwise.
func TestLazyRuntime(t *testing.T) {
	if os.Getenv("GOMAXPROCS") == "" {
		if got, want := runtime.GOMAXPROCS(0), runtime.NumCPU()+1; got != want {
			t.Fatalf("GOMAXPROCS %d, want %d", got, want)
		}
	}
	if got := kernels.Workers(); got != min(runtime.GOMAXPROCS(0), runtime.NumCPU()) {
		t.Fatalf("kernel workers %d with GOMAXPROCS %d and %d cores", got, runtime.GOMAXPROCS(0), runtime.NumCPU())
	}
	if os.Getenv("GOGC") == "" {
		prev := debug.SetGCPercent(400)
		if prev != 400 {
			t.Fatalf("GOGC %d, want 400", prev)
		}
	}
}
