package bridge

import (
	"math/rand"
	"testing"
	"unsafe"
)

// In eager mode a bound recipe's run at the call (RunRecipe, a cached compiled graph's
// launch under HPUSIM_ASYNC_MIN_US) and its asynchronous launch on the device stream
// (LaunchAsync, with the stream drained between launches) allocate nothing on the host
// once the recipe's bound graphs exist: a compiled step's per-recipe host cost has no
// garbage in it.
func TestEagerRecipeRunAndLaunchAllocateNothing(t *testing.T) {
	eagerMode(t)
	r := rand.New(rand.NewSource(12))
	x, y, out := randBuf(t, 1000, r), randBuf(t, 1000, r), newBuf(t, 1000)
	rec, info := captureChain(t, x, y, out, false)
	defer rec.Release()
	if info.Fused != 2 || info.Steps != 1 {
		t.Fatalf("unexpected capture info %+v", info)
	}
	x2, y2, out2 := randBuf(t, 1000, r), randBuf(t, 1000, r), newBuf(t, 1000)
	in, o := []unsafe.Pointer{x2.p, y2.p}, []unsafe.Pointer{out2.p}
	check := func(what string) {
		for i := range out2.f32() {
			if want := (x2.f32()[i] + y2.f32()[i]) * x2.f32()[i]; out2.f32()[i] != want {
				t.Fatalf("%s result %d: %v != %v", what, i, out2.f32()[i], want)
			}
		}
		clear(out2.f32())
	}
	run := func() {
		if err := RunRecipe(rec, in, o, nil); err != nil {
			t.Fatal(err)
		}
	}
	run()
	check("run")
	if n := testing.AllocsPerRun(50, run); n != 0 {
		t.Errorf("a run at the call allocated %v times", n)
	}
	check("run")
	rec.asyncWorth.Store(asyncYes)
	launch := func() {
		if err := LaunchAsync(rec, in, o, nil); err != nil {
			t.Fatal(err)
		}
		if err := Drain(); err != nil {
			t.Fatal(err)
		}
	}
	launch()
	check("launch")
	if n := testing.AllocsPerRun(50, launch); n != 0 {
		t.Errorf("an asynchronous launch allocated %v times", n)
	}
	check("launch")
}
