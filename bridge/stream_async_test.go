package bridge

import (
	"math/rand"
	"testing"
	"time"
	"unsafe"

	"hpusim/kernels"
)

// eagerMode runs the rest of the test as eager mode does (the package's tests run in
// lazy mode, lazy_test.go), with the device stream on.
func eagerMode(t *testing.T) {
	if err := Synchronize(0); err != nil {
		t.Fatal(err)
	}
	e, on, async := eng, lazyOn.Load(), asyncLaunch
	eng, asyncLaunch = nil, true
	lazyOn.Store(false)
	t.Cleanup(func() {
		if err := Drain(); err != nil {
			t.Error(err)
		}
		eng, asyncLaunch = e, async
		lazyOn.Store(on)
	})
}

// Launched runs complete in order, their results are what RunRecipe gives, an op over a
// launched output waits for it, and a free of a launched run's memory waits for the stream.
func TestLaunchAsyncRunsInOrderAndOpsWait(t *testing.T) {
	eagerMode(t)
	r := rand.New(rand.NewSource(5))
	x, y, out := randBuf(t, 4096, r), randBuf(t, 4096, r), newBuf(t, 4096)
	rec, _ := captureChain(t, x, y, out, false)
	defer rec.Release()
	rec.asyncWorth.Store(asyncYes) // a tiny recipe: launched all the same here
	before := StreamRuns()
	outs := make([]buf, 8)
	for k := range outs {
		outs[k] = newBuf(t, 4096)
		if err := LaunchAsync(rec, []unsafe.Pointer{x.p, y.p}, []unsafe.Pointer{outs[k].p}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// An op reading the last output waits for the stream (Execute: Touches, Drain).
	host := make([]float32, 4096)
	dst := kernels.Tensor{Ptr: unsafe.Pointer(&host[0]), DType: kernels.Float32, Sizes: []int64{4096}, Strides: []int64{1}}
	if err := Execute(opID(t, "copy"), &Call{T: []kernels.Tensor{dst, outs[7].all()}}); err != nil {
		t.Fatal(err)
	}
	for i, v := range host {
		if want := (x.f32()[i] + y.f32()[i]) * x.f32()[i]; v != want {
			t.Fatalf("element %d: %v != %v", i, v, want)
		}
	}
	if err := Drain(); err != nil {
		t.Fatal(err)
	}
	if got := StreamRuns() - before; got != 8 {
		t.Fatalf("%d runs completed, want 8", got)
	}
	if StreamPending() {
		t.Fatal("stream still pending after Drain")
	}
	for k := range outs {
		for i, v := range outs[k].f32() {
			if want := (x.f32()[i] + y.f32()[i]) * x.f32()[i]; v != want {
				t.Fatalf("run %d element %d: %v != %v", k, i, v, want)
			}
		}
	}
}

func TestLaunchAsyncChecksAtTheCall(t *testing.T) {
	eagerMode(t)
	r := rand.New(rand.NewSource(6))
	x, y, out := randBuf(t, 64, r), randBuf(t, 64, r), newBuf(t, 64)
	rec, _ := captureChain(t, x, y, out, false)
	if err := LaunchAsync(rec, []unsafe.Pointer{x.p}, []unsafe.Pointer{out.p}, nil); err == nil {
		t.Fatal("a launch with a missing input was queued")
	}
	rec.Release()
	if err := LaunchAsync(rec, []unsafe.Pointer{x.p, y.p}, []unsafe.Pointer{out.p}, nil); err == nil {
		t.Fatal("a launch of a released recipe was queued")
	}
}

func TestExtentAndOverlap(t *testing.T) {
	var b [64]float32
	p := unsafe.Pointer(&b[8])
	base := uintptr(p)
	cases := []struct {
		t      kernels.Tensor
		lo, hi uintptr
		ok     bool
	}{
		{kernels.Tensor{Ptr: p, DType: kernels.Float32, Sizes: []int64{4, 3}, Strides: []int64{3, 1}}, base, base + 48, true},
		{kernels.Tensor{Ptr: p, DType: kernels.Float32, Sizes: []int64{4, 3}, Strides: []int64{1, 4}}, base, base + 48, true},
		{kernels.Tensor{Ptr: p, DType: kernels.Float32, Sizes: []int64{3}, Strides: []int64{-2}}, base - 16, base + 4, true},
		{kernels.Tensor{Ptr: p, DType: kernels.Float32, Sizes: []int64{5, 2}, Strides: []int64{0, 1}}, base, base + 8, true},
		{kernels.Tensor{Ptr: p, DType: kernels.Float32, Sizes: []int64{0, 3}, Strides: []int64{3, 1}}, 0, 0, false},
		{kernels.Tensor{Ptr: p, DType: kernels.Float32, Sizes: []int64{}, Strides: []int64{}}, base, base + 4, true},
	}
	for i, c := range cases {
		lo, hi, ok := extent(c.t)
		if ok != c.ok || (ok && (lo != c.lo || hi != c.hi)) {
			t.Fatalf("case %d: extent %x..%x %v, want %x..%x %v", i, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
	spans := [][2]uintptr{{100, 200}, {300, 400}}
	for _, c := range []struct {
		lo, hi uintptr
		want   bool
	}{{0, 100, false}, {0, 101, true}, {199, 300, true}, {200, 300, false}, {350, 351, true}, {400, 500, false}} {
		if got := spansOverlap(spans, c.lo, c.hi); got != c.want {
			t.Fatalf("[%d,%d): overlap %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

// A recipe whose timed runs are shorter than asyncMinRun keeps running at the call.
func TestTinyRecipeStaysSynchronous(t *testing.T) {
	eagerMode(t)
	prev := SetAsyncMinRun(time.Hour)
	defer SetAsyncMinRun(prev)
	r := rand.New(rand.NewSource(7))
	x, y, out := randBuf(t, 64, r), randBuf(t, 64, r), newBuf(t, 64)
	rec, _ := captureChain(t, x, y, out, false)
	defer rec.Release()
	before := StreamRuns()
	for k := 0; k < 6; k++ {
		if err := LaunchAsync(rec, []unsafe.Pointer{x.p, y.p}, []unsafe.Pointer{out.p}, nil); err != nil {
			t.Fatal(err)
		}
		if StreamPending() {
			t.Fatal("a tiny recipe was queued")
		}
	}
	if StreamRuns() != before || rec.asyncWorth.Load() != asyncNo {
		t.Fatalf("runs %d, decision %d", StreamRuns()-before, rec.asyncWorth.Load())
	}
	SetAsyncMinRun(0)
	rec2, _ := captureChain(t, x, y, out, false)
	defer rec2.Release()
	for k := 0; k < 6; k++ {
		if err := LaunchAsync(rec2, []unsafe.Pointer{x.p, y.p}, []unsafe.Pointer{out.p}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := Drain(); err != nil {
		t.Fatal(err)
	}
	if got := StreamRuns() - before; got != 6-asyncTimedRuns {
		t.Fatalf("%d launched runs, want %d", got, 6-asyncTimedRuns)
	}
}
