package main

/*
#include <stdint.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"hpusim/bridge"
	"hpusim/device"
	"hpusim/kernels"
)

// Recipes (bridge/capture.go): capture a function's ops, then run them again with one call.
// A recipe is an opaque integer handle.

var (
	recipesMu  sync.Mutex
	recipes    = map[int64]*bridge.Recipe{}
	nextRecipe int64
)

// hpusim_capture_begin starts a capture; dry_run != 0 records without running, host_reads
// != 0 lets host reads run unrecorded (HPU graphs) instead of making the capture unusable.
//
//export hpusim_capture_begin
func hpusim_capture_begin(dryRun, hostReads C.int) (rc C.int) {
	defer guard(&rc)
	if err := bridge.BeginCapture(dryRun != 0, hostReads != 0); err != nil {
		return setErr(err)
	}
	return statusOK
}

// hpusim_capture_abort stops the capture and drops it.
//
//export hpusim_capture_abort
func hpusim_capture_abort() (rc C.int) {
	defer guard(&rc)
	bridge.AbortCapture()
	return statusOK
}

// hpusim_capture_poison marks the capture as not capturable (a CPU fallback, say).
//
//export hpusim_capture_poison
func hpusim_capture_poison(reason *C.char) (rc C.int) {
	defer guard(&rc)
	why := "not capturable"
	if reason != nil {
		why = C.GoString(reason)
	}
	bridge.PoisonCapture(why)
	return statusOK
}

// hpusim_capture_active reports what is recording ops: 0 nothing, 1 an HPU-graph capture
// (host reads split it), 2 a recipe capture (torch.compile's partitions).
//
//export hpusim_capture_active
func hpusim_capture_active() C.int {
	switch bridge.CaptureKind() {
	case bridge.CaptureHPUGraph:
		return 1
	case bridge.CaptureRecipe:
		return 2
	}
	return 0
}

func uintptrs(p *C.int64_t, n C.int) []uintptr {
	if n <= 0 || p == nil {
		return nil
	}
	src := unsafe.Slice((*int64)(unsafe.Pointer(p)), int(n))
	out := make([]uintptr, len(src))
	for i, v := range src {
		out[i] = uintptr(v)
	}
	return out
}

// hpusim_capture_end stops the capture and compiles it. Inputs: per input tensor its
// storage base, data pointer and the byte range [lo, hi) its view spans; per distinct
// output storage its base. Outputs: the recipe handle; info = [nodes, steps, fused,
// removed, virtuals, reused, random, segments]; confined[i] bit 0 is set when every access to input
// i's storage stays inside its view, bit 1 when the graph touches it at all; bound[k] = 1 when output storage k is pre-existing
// memory the recipe writes in place; id receives the recipe id.
//
//export hpusim_capture_end
func hpusim_capture_end(nin C.int, inBase, inPtr, inLo, inHi *C.int64_t, nout C.int, outBase *C.int64_t,
	handle *C.int64_t, info *C.int64_t, confined, bound *C.int64_t, id *C.char, nid C.int) (rc C.int) {
	defer guard(&rc)
	if handle == nil || info == nil || (nin > 0 && confined == nil) || (nout > 0 && bound == nil) {
		return setErr(fmt.Errorf("hpusim_capture_end: null output pointer"))
	}
	r, ri, err := bridge.EndCapture(uintptrs(inBase, nin), uintptrs(inPtr, nin), uintptrs(inLo, nin),
		uintptrs(inHi, nin), uintptrs(outBase, nout))
	if err != nil {
		return setErr(err)
	}
	recipesMu.Lock()
	nextRecipe++
	h := nextRecipe
	recipes[h] = r
	recipesMu.Unlock()
	*handle = C.int64_t(h)
	copy(unsafe.Slice((*int64)(unsafe.Pointer(info)), 8), []int64{int64(ri.Nodes), int64(ri.Steps),
		int64(ri.Fused), int64(ri.Removed), int64(ri.Virtuals), int64(ri.Reused), int64(ri.Random),
		int64(ri.Segments)})
	flags := func(dst *C.int64_t, v []bool) {
		d := unsafe.Slice((*int64)(unsafe.Pointer(dst)), len(v))
		for i, b := range v {
			d[i] = 0
			if b {
				d[i] = 1
			}
		}
	}
	if nin > 0 {
		flags(confined, ri.Confined)
		d := unsafe.Slice((*int64)(unsafe.Pointer(confined)), int(nin))
		for i, used := range ri.Used {
			if used {
				d[i] |= 2
			}
		}
	}
	if nout > 0 {
		flags(bound, ri.Bound)
	}
	if id != nil && nid > 0 {
		dst := unsafe.Slice((*byte)(unsafe.Pointer(id)), int(nid))
		k := copy(dst[:nid-1], ri.ID)
		dst[k] = 0
	}
	return statusOK
}

func pointers(p *unsafe.Pointer, n C.int) []unsafe.Pointer {
	if n <= 0 || p == nil {
		return nil
	}
	return unsafe.Slice(p, int(n))
}

// hpusim_recipe_run runs a recipe over new input data pointers and output storages, with
// a (seed, offset) pair per random op: one crossing for the whole graph.
//
//export hpusim_recipe_run
func hpusim_recipe_run(h C.int64_t, in *unsafe.Pointer, nin C.int, out *unsafe.Pointer, nout C.int,
	rnd *C.int64_t, nrnd C.int) (rc C.int) {
	defer guard(&rc)
	return recipeCall(bridge.RunRecipe, h, in, nin, out, nout, rnd, nrnd)
}

// hpusim_recipe_launch queues a run of a recipe on the lazy worker and returns at once
// (HPU-graph replay); without lazy mode it runs it at once.
//
//export hpusim_recipe_launch
func hpusim_recipe_launch(h C.int64_t, in *unsafe.Pointer, nin C.int, out *unsafe.Pointer, nout C.int,
	rnd *C.int64_t, nrnd C.int) (rc C.int) {
	defer guard(&rc)
	return recipeCall(bridge.LaunchRecipe, h, in, nin, out, nout, rnd, nrnd)
}

// hpusim_recipe_run_alloc is hpusim_recipe_run (launch == 0), hpusim_recipe_launch
// (launch == 1) or, with launch == 2, an asynchronous launch on the eager-mode device
// stream (bridge.LaunchAsync; lazy mode: hpusim_recipe_launch) that first allocates the output slots' fresh storages on device dev, in
// the same crossing: slot k with out[k] == NULL and nbytes[k] > 0 gets a new allocation of
// nbytes[k] bytes, written to out[k], as hpusim_alloc makes it. The caller owns every
// pointer written to out, whether the run succeeded or not (it frees them with hpusim_free
// through the tensors it wraps them in): a compiled graph's outputs cost no crossing each.
//
//export hpusim_recipe_run_alloc
func hpusim_recipe_run_alloc(h C.int64_t, launch, dev C.int, in *unsafe.Pointer, nin C.int, out *unsafe.Pointer,
	nbytes *C.int64_t, nout C.int, rnd *C.int64_t, nrnd C.int) (rc C.int) {
	defer guard(&rc)
	if err := allocSlots(int(dev), pointers(out, nout), nbytes); err != nil {
		return setErr(err)
	}
	run := bridge.RunRecipe
	switch launch {
	case 0:
	case 2:
		run = bridge.LaunchAsync // eager mode: queued on the device stream
	default:
		run = bridge.LaunchRecipe
	}
	return recipeCall(run, h, in, nin, out, nout, rnd, nrnd)
}

// allocSlots allocates out[k] (nbytes[k] bytes) for every slot that is NULL and not empty.
func allocSlots(dev int, out []unsafe.Pointer, nbytes *C.int64_t) error {
	if len(out) == 0 {
		return nil
	}
	if nbytes == nil {
		return fmt.Errorf("hpusim_recipe_run_alloc: null size array")
	}
	sizes := unsafe.Slice((*int64)(unsafe.Pointer(nbytes)), len(out))
	var d *device.Device
	for k, n := range sizes {
		if out[k] != nil || n <= 0 {
			continue
		}
		if d == nil {
			var err error
			if d, err = device.Get(dev); err != nil {
				return err
			}
		}
		p, err := d.Alloc(n)
		if err != nil && bridge.StreamPending() {
			bridge.DrainKeep() // memory freed while launched graphs ran is released when they end
			p, err = d.Alloc(n)
		}
		if err != nil {
			return err
		}
		bridge.NoteAlloc(p)
		out[k] = p
	}
	return nil
}

// recipeCall looks the handle up and hands the run's arguments to run (RunRecipe or
// LaunchRecipe).
func recipeCall(run func(*bridge.Recipe, []unsafe.Pointer, []unsafe.Pointer, []int64) error, h C.int64_t,
	in *unsafe.Pointer, nin C.int, out *unsafe.Pointer, nout C.int, rnd *C.int64_t, nrnd C.int) C.int {
	recipesMu.Lock()
	r := recipes[int64(h)]
	recipesMu.Unlock()
	if r == nil {
		return setErr(fmt.Errorf("unknown recipe handle %d", int64(h)))
	}
	var draws []int64
	if nrnd > 0 && rnd != nil {
		draws = unsafe.Slice((*int64)(unsafe.Pointer(rnd)), int(nrnd))
	}
	if err := run(r, pointers(in, nin), pointers(out, nout), draws); err != nil {
		return setErr(err)
	}
	return statusOK
}

//export hpusim_recipe_free
func hpusim_recipe_free(h C.int64_t) (rc C.int) {
	defer guard(&rc)
	recipesMu.Lock()
	r := recipes[int64(h)]
	delete(recipes, int64(h))
	recipesMu.Unlock()
	if r != nil {
		r.Release()
	}
	return statusOK
}

// hpusim_recipe_set_solo makes runs of the recipe keep its kernels on the calling
// thread (on != 0) or lets them use the worker pool (on == 0).
//
//export hpusim_recipe_set_solo
func hpusim_recipe_set_solo(h C.int64_t, on C.int) (rc C.int) {
	defer guard(&rc)
	recipesMu.Lock()
	r := recipes[int64(h)]
	recipesMu.Unlock()
	if r == nil {
		return setErr(fmt.Errorf("unknown recipe handle %d", int64(h)))
	}
	r.SetSolo(on != 0)
	return statusOK
}

// hpusim_recipe_set_copy_in declares the static tensors hpusim_recipe_launch_copy fills
// before each launch (an HPU graph's static inputs): desc is a call frame as hpusim_run's,
// one tensor per static input.
//
//export hpusim_recipe_set_copy_in
func hpusim_recipe_set_copy_in(h C.int64_t, desc *C.int64_t, ndesc C.int) (rc C.int) {
	defer guard(&rc)
	recipesMu.Lock()
	r := recipes[int64(h)]
	recipesMu.Unlock()
	if r == nil {
		return setErr(fmt.Errorf("unknown recipe handle %d", int64(h)))
	}
	c, err := decodeCall(desc, ndesc, nil, 0)
	if err != nil {
		return setErr(err)
	}
	if err := r.SetCopyIn(c.T); err != nil {
		return setErr(err)
	}
	return statusOK
}

// hpusim_recipe_launch_copy copies src[k] (device data pointers, laid out as the static
// tensors) into the static tensors and launches the recipe as hpusim_recipe_launch does:
// an HPU-graph replay with the tensor cache, in one crossing. It returns 2, having run
// nothing of the recipe, when a source shares a storage with another or with the recipe's
// memory.
//
//export hpusim_recipe_launch_copy
func hpusim_recipe_launch_copy(h C.int64_t, src *unsafe.Pointer, nsrc C.int, in *unsafe.Pointer, nin C.int,
	out *unsafe.Pointer, nout C.int, rnd *C.int64_t, nrnd C.int) (rc C.int) {
	defer guard(&rc)
	recipesMu.Lock()
	r := recipes[int64(h)]
	recipesMu.Unlock()
	if r == nil {
		return setErr(fmt.Errorf("unknown recipe handle %d", int64(h)))
	}
	var draws []int64
	if nrnd > 0 && rnd != nil {
		draws = unsafe.Slice((*int64)(unsafe.Pointer(rnd)), int(nrnd))
	}
	if err := bridge.LaunchRecipeCopy(r, pointers(src, nsrc), pointers(in, nin), pointers(out, nout), draws); err != nil {
		if errors.Is(err, bridge.ErrSourceAliases) {
			return 2 // nothing ran: the caller copies op by op and launches
		}
		return setErr(err)
	}
	return statusOK
}

// hpusim_stream_pending reports whether asynchronously launched recipe runs have not
// finished (1) or none is pending (0).
//
//export hpusim_stream_pending
func hpusim_stream_pending() C.int {
	if bridge.StreamPending() {
		return 1
	}
	return 0
}

// hpusim_stream_runs is how many asynchronous runs the eager-mode stream completed.
//
//export hpusim_stream_runs
func hpusim_stream_runs() C.int64_t { return C.int64_t(bridge.StreamRuns()) }

// hpusim_stream_drain waits for the asynchronously launched recipe runs (before a fork:
// the child has no stream thread); a run's failure stays for the next op to raise.
//
//export hpusim_stream_drain
func hpusim_stream_drain() (rc C.int) {
	defer guard(&rc)
	bridge.DrainKeep()
	return statusOK
}

// hpusim_stream_touches reports (1) whether an asynchronously launched run still reads or
// writes bytes of [p, p+nbytes), or an earlier run failed; 0 otherwise.
//
//export hpusim_stream_touches
func hpusim_stream_touches(p unsafe.Pointer, nbytes C.int64_t) C.int {
	if nbytes <= 0 || !bridge.StreamBusy() {
		return 0
	}
	if bridge.StreamTouches(kernels.Tensor{Ptr: p, DType: kernels.Uint8, Sizes: []int64{int64(nbytes)}, Strides: []int64{1}}) {
		return 1
	}
	return 0
}

// hpusim_async_min_us sets the shortest timed run (us) that makes a recipe launched on the
// device stream (bridge.SetAsyncMinRun; tests) and returns the previous value.
//
//export hpusim_async_min_us
func hpusim_async_min_us(us C.int64_t) C.int64_t {
	return C.int64_t(bridge.SetAsyncMinRun(time.Duration(us)*time.Microsecond) / time.Microsecond)
}
