package bridge

import (
	"math/rand"
	"testing"
	"unsafe"

	"hpusim/kernels"
)

// captureChain records out = (x + y*1) * x; x + y as an intermediate the program frees,
// with a step marker between the two ops when split.
func captureChain(t *testing.T, x, y, out buf, split bool) (*Recipe, RecipeInfo) {
	if err := BeginCapture(false, split); err != nil {
		t.Fatal(err)
	}
	tmp := newBuf(t, x.n)
	NoteAlloc(tmp.p)
	NoteAlloc(out.p)
	ew(t, "ew.add", tmp.all(), []kernels.Tensor{x.all(), y.all()}, 1)
	if split {
		if err := Step(false, "mark_step"); err != nil {
			t.Fatal(err)
		}
	}
	ew(t, "ew.mul", out.all(), []kernels.Tensor{tmp.all(), x.all()})
	if err := Free(tmp.p); err != nil {
		t.Fatal(err)
	}
	base := func(b buf) uintptr { return uintptr(b.p) }
	span := func(b buf) uintptr { return uintptr(b.p) + uintptr(4*b.n) }
	r, info, err := EndCapture([]uintptr{base(x), base(y)}, []uintptr{base(x), base(y)},
		[]uintptr{base(x), base(y)}, []uintptr{span(x), span(y)}, []uintptr{base(out)})
	if err != nil {
		t.Fatal(err)
	}
	return r, info
}

func TestCaptureRunsOverNewStorages(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	x, y, out := randBuf(t, 1000, r), randBuf(t, 1000, r), newBuf(t, 1000)
	rec, info := captureChain(t, x, y, out, false)
	defer rec.Release()
	if info.Nodes != 2 || info.Fused != 2 || info.Segments != 1 || !info.Confined[0] || info.Bound[0] {
		t.Fatalf("unexpected capture info %+v", info)
	}
	for i := range out.f32() {
		if want := (x.f32()[i] + y.f32()[i]) * x.f32()[i]; out.f32()[i] != want {
			t.Fatalf("capture result %d: %v != %v", i, out.f32()[i], want)
		}
	}
	x2, y2, out2 := randBuf(t, 1000, r), randBuf(t, 1000, r), newBuf(t, 1000)
	before := append([]float32(nil), out.f32()...)
	if err := RunRecipe(rec, []unsafe.Pointer{x2.p, y2.p}, []unsafe.Pointer{out2.p}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range out2.f32() {
		if want := (x2.f32()[i] + y2.f32()[i]) * x2.f32()[i]; out2.f32()[i] != want {
			t.Fatalf("run result %d: %v != %v", i, out2.f32()[i], want)
		}
		if out.f32()[i] != before[i] {
			t.Fatal("a run wrote the captured output")
		}
	}
	if err := RunRecipe(rec, []unsafe.Pointer{x2.p}, []unsafe.Pointer{out2.p}, nil); err == nil {
		t.Fatal("a run with a missing input succeeded")
	}
}

// A step marker inside a capture ends a segment: each is compiled on its own and a run
// runs them in order, with an intermediate the program freed kept between them.
func TestCaptureSegmentsRunInOrder(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	x, y, out := randBuf(t, 500, r), randBuf(t, 500, r), newBuf(t, 500)
	rec, info := captureChain(t, x, y, out, true)
	defer rec.Release()
	if info.Segments != 2 || info.Nodes != 2 || info.Fused != 0 {
		t.Fatalf("unexpected capture info %+v", info)
	}
	for run := 0; run < 2; run++ {
		x2, y2, out2 := randBuf(t, 500, r), randBuf(t, 500, r), newBuf(t, 500)
		if err := RunRecipe(rec, []unsafe.Pointer{x2.p, y2.p}, []unsafe.Pointer{out2.p}, nil); err != nil {
			t.Fatal(err)
		}
		for i := range out2.f32() {
			if want := (x2.f32()[i] + y2.f32()[i]) * x2.f32()[i]; out2.f32()[i] != want {
				t.Fatalf("run %d result %d: %v != %v", run, i, out2.f32()[i], want)
			}
		}
	}
}

func TestCaptureHostReadPoisons(t *testing.T) {
	x := newBuf(t, 4)
	if err := BeginCapture(false, false); err != nil {
		t.Fatal(err)
	}
	host := make([]float32, 4)
	dst := kernels.Tensor{Ptr: unsafe.Pointer(&host[0]), DType: kernels.Float32, Sizes: []int64{4}, Strides: []int64{1}}
	if err := Execute(opID(t, "copy"), &Call{T: []kernels.Tensor{dst, x.all()}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := EndCapture(nil, nil, nil, nil, nil); err == nil {
		t.Fatal("a capture with a host read compiled")
	}
	if Capturing() {
		t.Fatal("capture still active")
	}
}

func BenchmarkRecipeRunSmall(b *testing.B) {
	t := &testing.T{}
	r := rand.New(rand.NewSource(3))
	x, y, out := randBuf(t, 64, r), randBuf(t, 64, r), newBuf(t, 64)
	rec, _ := captureChain(t, x, y, out, false)
	defer rec.Release()
	in, o := []unsafe.Pointer{x.p, y.p}, []unsafe.Pointer{out.p}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := RunRecipe(rec, in, o, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecipeLaunchSmall(b *testing.B) {
	t := &testing.T{}
	r := rand.New(rand.NewSource(3))
	x, y, out := randBuf(t, 64, r), randBuf(t, 64, r), newBuf(t, 64)
	rec, _ := captureChain(t, x, y, out, false)
	defer rec.Release()
	in, o := []unsafe.Pointer{x.p, y.p}, []unsafe.Pointer{out.p}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := LaunchRecipe(rec, in, o, nil); err != nil {
			b.Fatal(err)
		}
		if i%64 == 63 {
			eng.wait()
		}
	}
	eng.wait()
}

// A replay (LaunchRecipe) reuses its bound graphs once the worker is done with them: a
// launch allocates nothing beyond what its kernels do (host and worker), and the results
// stay right launch after launch.
func TestRecipeLaunchReusesBoundGraphs(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	x, out := randBuf(t, 256, r), newBuf(t, 256)
	copyOp := opID(t, "copy")
	if err := BeginCapture(false, true); err != nil {
		t.Fatal(err)
	}
	tmp := newBuf(t, 256)
	NoteAlloc(tmp.p)
	NoteAlloc(out.p)
	run := func(dst, src kernels.Tensor) {
		if err := Execute(copyOp, &Call{T: []kernels.Tensor{dst, src}}); err != nil {
			t.Fatal(err)
		}
	}
	run(tmp.all(), x.all())
	if err := Step(false, "mark_step"); err != nil {
		t.Fatal(err)
	}
	run(out.all(), tmp.all())
	if err := Free(tmp.p); err != nil {
		t.Fatal(err)
	}
	span := uintptr(4 * 256)
	rec, info, err := EndCapture([]uintptr{uintptr(x.p)}, []uintptr{uintptr(x.p)}, []uintptr{uintptr(x.p)},
		[]uintptr{uintptr(x.p) + span}, []uintptr{uintptr(out.p)})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if info.Segments != 2 {
		t.Fatalf("unexpected capture info %+v", info)
	}
	in, o := []unsafe.Pointer{x.p}, []unsafe.Pointer{out.p}
	launch := func() {
		if err := LaunchRecipe(rec, in, o, nil); err != nil {
			t.Fatal(err)
		}
		eng.wait() // the worker is done: the next launch takes the graphs back
	}
	launch()
	mu.RLock()
	op := byName["copy"]
	mu.RUnlock()
	tmp2 := newBuf(t, 256)
	calls := []*Call{{T: []kernels.Tensor{tmp2.all(), x.all()}}, {T: []kernels.Tensor{out.all(), tmp2.all()}}}
	kernelsOnly := testing.AllocsPerRun(50, func() { // the two copies, run directly
		for _, c := range calls {
			if err := runKernel(op, c); err != nil {
				t.Fatal(err)
			}
		}
	})
	n := testing.AllocsPerRun(50, launch)
	t.Logf("allocations per launch %v, by its kernels run directly %v", n, kernelsOnly)
	if n > kernelsOnly {
		t.Fatalf("a launch allocated %v times, its kernels %v", n, kernelsOnly)
	}
	for k := 0; k < 3; k++ {
		x2, out2 := randBuf(t, 256, r), newBuf(t, 256)
		if err := LaunchRecipe(rec, []unsafe.Pointer{x2.p}, []unsafe.Pointer{out2.p}, nil); err != nil {
			t.Fatal(err)
		}
		eng.wait()
		for i := range out2.f32() {
			if out2.f32()[i] != x2.f32()[i] {
				t.Fatalf("launch %d result %d: %v != %v", k, i, out2.f32()[i], x2.f32()[i])
			}
		}
	}
}

// An HPU-graph replay with the tensor cache (LaunchRecipeCopy) copies the new sources into
// the static inputs and runs the recipe over them in one call: the static tensors hold the
// sources afterwards, the outputs the recipe's results, and a launch allocates nothing
// beyond what its kernels do.
func TestRecipeLaunchCopiesIntoStatics(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	x, out := randBuf(t, 256, r), newBuf(t, 256)
	if err := BeginCapture(false, true); err != nil {
		t.Fatal(err)
	}
	NoteAlloc(out.p)
	ew(t, "ew.mul", out.all(), []kernels.Tensor{x.all(), x.all()})
	rec, _, err := EndCapture(nil, nil, nil, nil, []uintptr{uintptr(out.p)})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if err := LaunchRecipeCopy(rec, []unsafe.Pointer{x.p}, nil, []unsafe.Pointer{out.p}, nil); err == nil {
		t.Fatal("a copy launch without SetCopyIn succeeded")
	}
	if err := rec.SetCopyIn([]kernels.Tensor{x.all()}); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 3; k++ {
		src, out2 := randBuf(t, 256, r), newBuf(t, 256)
		if err := LaunchRecipeCopy(rec, []unsafe.Pointer{src.p}, nil, []unsafe.Pointer{out2.p}, nil); err != nil {
			t.Fatal(err)
		}
		eng.wait()
		if err := eng.takeErr(); err != nil {
			t.Fatal(err)
		}
		for i := range out2.f32() {
			v := src.f32()[i]
			if x.f32()[i] != v || out2.f32()[i] != v*v {
				t.Fatalf("launch %d element %d: static %v out %v, source %v", k, i, x.f32()[i], out2.f32()[i], v)
			}
		}
	}
	if err := LaunchRecipeCopy(rec, []unsafe.Pointer{x.p}, nil, []unsafe.Pointer{out.p}, nil); err == nil {
		t.Fatal("a copy from the static input itself was accepted")
	}
	src, out2 := randBuf(t, 256, r), newBuf(t, 256)
	launch := func() {
		if err := LaunchRecipeCopy(rec, []unsafe.Pointer{src.p}, nil, []unsafe.Pointer{out2.p}, nil); err != nil {
			t.Fatal(err)
		}
		eng.wait()
	}
	launch()
	mu.RLock()
	cp, mul := byName["copy"], byName["ew.mul"]
	mu.RUnlock()
	calls := []struct {
		op *Op
		c  *Call
	}{{cp, &Call{T: []kernels.Tensor{x.all(), src.all()}}}, {mul, &Call{T: []kernels.Tensor{out2.all(), x.all(), x.all()}, I: []int64{int64(kernels.Float32)}}}}
	kernelsOnly := testing.AllocsPerRun(50, func() {
		for _, c := range calls {
			if err := runKernel(c.op, c.c); err != nil {
				t.Fatal(err)
			}
		}
	})
	n := testing.AllocsPerRun(50, launch)
	t.Logf("allocations per copy launch %v, by its kernels run directly %v", n, kernelsOnly)
	if n > kernelsOnly {
		t.Fatalf("a copy launch allocated %v times, its kernels %v", n, kernelsOnly)
	}
}

// A replay of a recipe whose ops run as one fused loop allocates nothing at all, on the
// host or on the worker, once its bound graph was made.
func TestRecipeLaunchOfFusedLoopAllocatesNothing(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	x, y, out := randBuf(t, 1000, r), randBuf(t, 1000, r), newBuf(t, 1000)
	rec, info := captureChain(t, x, y, out, false)
	defer rec.Release()
	if info.Fused != 2 || info.Steps != 1 {
		t.Fatalf("unexpected capture info %+v", info)
	}
	x2, y2, out2 := randBuf(t, 1000, r), randBuf(t, 1000, r), newBuf(t, 1000)
	in, o := []unsafe.Pointer{x2.p, y2.p}, []unsafe.Pointer{out2.p}
	launch := func() {
		if err := LaunchRecipe(rec, in, o, nil); err != nil {
			t.Fatal(err)
		}
		eng.wait()
	}
	launch()
	if n := testing.AllocsPerRun(50, launch); n != 0 {
		t.Fatalf("a replay allocated %v times", n)
	}
	if err := eng.takeErr(); err != nil {
		t.Fatal(err)
	}
	for i := range out2.f32() {
		if want := (x2.f32()[i] + y2.f32()[i]) * x2.f32()[i]; out2.f32()[i] != want {
			t.Fatalf("replay result %d: %v != %v", i, out2.f32()[i], want)
		}
	}
}

// With several segments, the copies run with the first and the later segments read the
// static inputs they filled.
func TestRecipeLaunchCopiesIntoStaticsAcrossSegments(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	x, out := randBuf(t, 300, r), newBuf(t, 300)
	if err := BeginCapture(false, true); err != nil {
		t.Fatal(err)
	}
	tmp := newBuf(t, 300)
	NoteAlloc(tmp.p)
	NoteAlloc(out.p)
	ew(t, "ew.mul", tmp.all(), []kernels.Tensor{x.all(), x.all()})
	if err := Step(false, "mark_step"); err != nil {
		t.Fatal(err)
	}
	ew(t, "ew.add", out.all(), []kernels.Tensor{tmp.all(), x.all()}, 1)
	if err := Free(tmp.p); err != nil {
		t.Fatal(err)
	}
	rec, info, err := EndCapture(nil, nil, nil, nil, []uintptr{uintptr(out.p)})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if info.Segments != 2 {
		t.Fatalf("unexpected capture info %+v", info)
	}
	if err := rec.SetCopyIn([]kernels.Tensor{x.all()}); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 3; k++ {
		src, out2 := randBuf(t, 300, r), newBuf(t, 300)
		if err := LaunchRecipeCopy(rec, []unsafe.Pointer{src.p}, nil, []unsafe.Pointer{out2.p}, nil); err != nil {
			t.Fatal(err)
		}
		eng.wait()
		if err := eng.takeErr(); err != nil {
			t.Fatal(err)
		}
		for i := range out2.f32() {
			v := src.f32()[i]
			if x.f32()[i] != v || out2.f32()[i] != v*v+v {
				t.Fatalf("launch %d element %d: static %v out %v, source %v", k, i, x.f32()[i], out2.f32()[i], v)
			}
		}
	}
}
