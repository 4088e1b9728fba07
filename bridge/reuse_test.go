package bridge

import (
	"math"
	"math/rand"
	"testing"

	"hpusim/device"
	"hpusim/kernels"
)

func sameBits(t *testing.T, got, want buf) {
	t.Helper()
	for i := range want.f32() {
		if math.Float32bits(want.f32()[i]) != math.Float32bits(got.f32()[i]) {
			t.Fatalf("element %d: lazy %v, eager %v", i, got.f32()[i], want.f32()[i])
		}
	}
}

// Unfused, a chain's intermediates run in place in the first one's buffer: the plan binds
// them there, their own allocations are released at launch (before the graph runs), and
// the result is bitwise the eager one.
func TestReuseRunsIntermediatesInPlace(t *testing.T) {
	fusionOff = true
	defer func() { fusionOff = false }()
	r := rand.New(rand.NewSource(2))
	const n = 50001
	a, b, c := randBuf(t, n, r), randBuf(t, n, r), randBuf(t, n, r)
	want := newBuf(t, n)
	e1, e2, e3 := newBuf(t, n), newBuf(t, n), newBuf(t, n)
	eagerEW(t, "ew.mul", e1.all(), []kernels.Tensor{a.all(), b.all()})
	eagerEW(t, "ew.add", e2.all(), []kernels.Tensor{e1.all(), c.all()}, 0.37)
	eagerEW(t, "ew.gelu", e3.all(), []kernels.Tensor{e2.all()})
	eagerEW(t, "ew.addcdiv", want.all(), []kernels.Tensor{e3.all(), a.all(), c.all()}, -0.5)

	d, _ := device.Get(0)
	got := newBuf(t, n)
	t1, t2, t3 := newBuf(t, n), newBuf(t, n), newBuf(t, n)
	ew(t, "ew.mul", t1.all(), []kernels.Tensor{a.all(), b.all()})
	ew(t, "ew.add", t2.all(), []kernels.Tensor{t1.all(), c.all()}, 0.37)
	ew(t, "ew.gelu", t3.all(), []kernels.Tensor{t2.all()})
	ew(t, "ew.addcdiv", got.all(), []kernels.Tensor{t3.all(), a.all(), c.all()}, -0.5)
	for _, x := range []buf{t1, t2, t3} {
		if err := Free(x.p); err != nil {
			t.Fatal(err)
		}
	}
	before := d.Stats().InUse
	if err := Step(false, "test"); err != nil {
		t.Fatal(err)
	}
	// Released by the launch itself, whether or not the worker ran the graph yet.
	if freed := before - d.Stats().InUse; freed < 2*4*n {
		t.Fatalf("launch released %d bytes, want at least %d", freed, 2*4*n)
	}
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	p := lastPlan(t)
	if len(p.elided) != 2 || p.reusedBytes != 2*4*n {
		t.Fatalf("reuse: elided %v (%d B)", p.elided, p.reusedBytes)
	}
	for _, x := range p.elided {
		if p.remap[x] != p.remap[p.elided[0]] {
			t.Fatalf("intermediates not in one buffer: %v", p.remap)
		}
	}
	sameBits(t, got, want)
}

// An input that dies at an op but is read through a different view of the same memory
// (reversed) must not take the op's output in place: chunk k would overwrite elements a
// later chunk still reads.
func TestReuseRefusesOverlappingDifferentViews(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	const n = 70001
	a, c := randBuf(t, n, r), randBuf(t, n, r)
	rev := func(x buf) kernels.Tensor { return x.view(n-1, n, -1) }
	want, e1, e2 := newBuf(t, n), newBuf(t, n), newBuf(t, n)
	eagerEW(t, "ew.mul", e1.all(), []kernels.Tensor{a.all(), a.all()})
	eagerEW(t, "ew.add", e2.all(), []kernels.Tensor{rev(e1), c.all()}, 1)
	eagerEW(t, "ew.mul", want.all(), []kernels.Tensor{e2.all(), rev(e2)})

	got, y, x := newBuf(t, n), newBuf(t, n), newBuf(t, n)
	ew(t, "ew.mul", y.all(), []kernels.Tensor{a.all(), a.all()})
	ew(t, "ew.add", x.all(), []kernels.Tensor{rev(y), c.all()}, 1)
	ew(t, "ew.mul", got.all(), []kernels.Tensor{x.all(), rev(x)})
	for _, b := range []buf{y, x} {
		if err := Free(b.p); err != nil {
			t.Fatal(err)
		}
	}
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	if p := lastPlan(t); len(p.elided) != 0 {
		t.Fatalf("reused a buffer read through another view: remap %v", p.remap)
	}
	sameBits(t, got, want)
}

// With HPUSIM_LAZY_REUSE=0 semantics (reuseOff) the same chain keeps every storage.
func TestReuseOffKeepsStorages(t *testing.T) {
	fusionOff, reuseOff = true, true
	defer func() { fusionOff, reuseOff = false, false }()
	a := newBuf(t, 1000)
	t1, t2, out := newBuf(t, 1000), newBuf(t, 1000), newBuf(t, 1000)
	ew(t, "ew.neg", t1.all(), []kernels.Tensor{a.all()})
	ew(t, "ew.abs", t2.all(), []kernels.Tensor{t1.all()})
	ew(t, "ew.exp", out.all(), []kernels.Tensor{t2.all()})
	Free(t1.p)
	Free(t2.p)
	if err := Step(true, "test"); err != nil {
		t.Fatal(err)
	}
	if p := lastPlan(t); len(p.elided) != 0 {
		t.Fatalf("reuse off but elided %v", p.elided)
	}
}
