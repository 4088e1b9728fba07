package bridge

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"hpusim/kernels"
)

// The eager-mode device stream. A compiled graph's recipe launched with LaunchAsync runs
// on the stream's own thread while the host goes on, as a Gaudi card runs a launched
// graph while the host prepares the next one (the host's Python between compiled graphs
// is most of a small model's step, and the machine's other core is otherwise idle).
//
// Ordering: every host entry that touches device bytes (an op, a copy, a host read, a
// synchronous recipe run, a capture, synchronize, memory statistics) first waits for the
// stream to drain (Drain), so the host never sees a half-run graph and never writes
// memory a queued run still reads. Memory freed while runs are pending is released when
// the stream drains. A failure is kept and raised by the next Drain, naming the recipe and
// the op, as the card reports a failed launch at the next synchronizing call.
//
// Lazy mode has its own worker (lazy.go); HPUSIM_ASYNC_LAUNCH=0 runs every launch at once.

type streamRun struct {
	r     *Recipe
	gs    []*graph     // one bound graph per segment, taken for this run
	spans [][2]uintptr // the device bytes the run's inputs and outputs cover: [lo, hi)
}

// takeRun returns a streamRun of r for a new launch: a finished one (its lists keep their
// capacity) or a new one.
func (r *Recipe) takeRun() *streamRun {
	r.runPoolMu.Lock()
	defer r.runPoolMu.Unlock()
	if n := len(r.runPool); n > 0 {
		run := r.runPool[n-1]
		r.runPool[n-1] = nil
		r.runPool = r.runPool[:n-1]
		return run
	}
	return &streamRun{r: r}
}

// putRun hands a finished run back to its recipe (the worker no longer refers to it).
func (r *Recipe) putRun(run *streamRun) {
	clear(run.gs) // the graphs went back to their segments' pools
	run.gs, run.spans = run.gs[:0], run.spans[:0]
	r.runPoolMu.Lock()
	r.runPool = append(r.runPool, run)
	r.runPoolMu.Unlock()
}

type deviceStream struct {
	mu      sync.Mutex
	cond    sync.Cond
	queue   []*streamRun
	pending atomic.Int32 // runs queued or running
	failed  atomic.Bool  // err is set
	err     error
	frees   []unsafe.Pointer
	running *streamRun // the run the worker executes, for Touches
	started bool
	runs    atomic.Int64 // runs completed (tests)
}

var devStream = newDeviceStream()

func newDeviceStream() *deviceStream {
	s := &deviceStream{}
	s.cond.L = &s.mu
	return s
}

// asyncLaunch is HPUSIM_ASYNC_LAUNCH (on unless "0").
var asyncLaunch = !envFalse("HPUSIM_ASYNC_LAUNCH")

// AsyncLaunchEnabled reports whether LaunchAsync queues runs in eager mode.
func AsyncLaunchEnabled() bool { return asyncLaunch }

// StreamPending reports whether launched runs have not finished.
func StreamPending() bool { return devStream.pending.Load() > 0 }

// StreamRuns is how many asynchronous runs the stream has completed.
func StreamRuns() int64 { return devStream.runs.Load() }

// Drain waits until the stream has run everything launched, then reports (once) the
// first failure among those runs.
func Drain() error {
	s := devStream
	if s.pending.Load() == 0 && !s.failed.Load() {
		return nil
	}
	s.mu.Lock()
	for s.pending.Load() > 0 {
		s.cond.Wait()
	}
	err := s.err
	s.err = nil
	s.failed.Store(false)
	s.mu.Unlock()
	return err
}

// LaunchAsync queues a run of the recipe on the eager-mode stream and returns at once:
// in holds the inputs' data pointers, out the outputs' fresh storages (the caller's, which
// it must not read but through an op), rnd the random ops' (seed, offset) pairs. The
// checks of RunRecipe happen here, at the call; only a failure of a kernel is deferred.
// In lazy mode, inside a capture, or with HPUSIM_ASYNC_LAUNCH=0 it is LaunchRecipe.
func LaunchAsync(r *Recipe, in, out []unsafe.Pointer, rnd []int64) error {
	if eng != nil || !asyncLaunch || capActive.Load() {
		return LaunchRecipe(r, in, out, rnd)
	}
	if devStream.failed.Load() {
		if err := Drain(); err != nil {
			return err
		}
	}
	switch r.asyncWorth.Load() {
	case asyncNo:
		return RunRecipe(r, in, out, rnd)
	case asyncUndecided:
		return r.timedRun(in, out, rnd)
	}
	if err := r.lockForLaunch(in, out, rnd); err != nil {
		return err
	}
	run := r.takeRun()
	for _, s := range r.segs {
		g := s.takeAsync()
		s.bindInto(g, r.inputs, in, out, rnd)
		run.gs = append(run.gs, g)
		run.spans = s.boundSpans(g, run.spans)
	}
	r.mu.Unlock()
	devStream.push(run)
	return nil
}

const (
	asyncUndecided = 0
	asyncYes       = 1
	asyncNo        = 2
	// asyncTimedRuns synchronous runs are timed first; a recipe whose shortest took less
	// than asyncMinRun runs at the call from then on: queuing a run and waking the
	// stream's thread costs the host more than a tiny graph takes (a cached launch of
	// `x * 2 + 1`: 18.8 us at the call, 29 us of host CPU launched).
	asyncTimedRuns = 3
)

// asyncMinRun is HPUSIM_ASYNC_MIN_US (default 30 us; SetAsyncMinRun for tests).
var asyncMinRun atomic.Int64

func init() {
	asyncMinRun.Store(int64(time.Duration(envInt("HPUSIM_ASYNC_MIN_US", 30)) * time.Microsecond))
}

// SetAsyncMinRun sets the shortest timed run that makes a recipe launched (recipes decided
// afterwards) and returns the previous value.
func SetAsyncMinRun(d time.Duration) time.Duration { return time.Duration(asyncMinRun.Swap(int64(d))) }

// timedRun runs the recipe at the call, timing it (after the stream drained) until
// LaunchAsync can decide whether launching it pays.
func (r *Recipe) timedRun(in, out []unsafe.Pointer, rnd []int64) error {
	if err := Drain(); err != nil {
		return err
	}
	t0 := time.Now()
	if err := RunRecipe(r, in, out, rnd); err != nil {
		return err
	}
	ns := int64(time.Since(t0))
	for {
		old := r.asyncMinNs.Load()
		if old != 0 && old <= ns || r.asyncMinNs.CompareAndSwap(old, ns) {
			break
		}
	}
	if r.asyncTimed.Add(1) >= asyncTimedRuns {
		worth := int32(asyncNo)
		if r.asyncMinNs.Load() >= asyncMinRun.Load() {
			worth = asyncYes
		}
		r.asyncWorth.CompareAndSwap(asyncUndecided, worth)
	}
	return nil
}

// takeAsync returns a bound graph for an asynchronous run: a recycled one or a new one.
// Its temporaries are the recipe's own, as the synchronous run's are: runs of a recipe
// never overlap (the stream runs in order, and a synchronous run drains it first).
func (s *segment) takeAsync() *graph {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if n := len(s.asyncPool); n > 0 {
		g := s.asyncPool[n-1]
		s.asyncPool = s.asyncPool[:n-1]
		return g
	}
	return s.newBound()
}

// boundSpans appends the byte ranges of g's bound inputs and outputs (the memory a run
// shares with the host; its temporaries are the recipe's own).
func (s *segment) boundSpans(g *graph, spans [][2]uintptr) [][2]uintptr {
	add := func(ord int) {
		if ord >= 0 {
			st := g.stos[ord]
			if st.size > 0 {
				spans = append(spans, [2]uintptr{st.base, st.base + uintptr(st.size)})
			}
		}
	}
	for _, ord := range s.inputs {
		add(int(ord))
	}
	for _, ord := range s.outputs {
		add(int(ord))
	}
	return spans
}

// Touches reports whether an op over ts must wait for the stream: a pending run reads
// or writes bytes one of ts covers, or an earlier run failed (the op reports it).
func (s *deviceStream) Touches(ts []kernels.Tensor) bool {
	if s.pending.Load() == 0 {
		return s.failed.Load()
	}
	if s.failed.Load() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range ts {
		lo, hi, ok := extent(t)
		if !ok {
			continue
		}
		if s.running != nil && spansOverlap(s.running.spans, lo, hi) {
			return true
		}
		for i := range s.queue {
			if spansOverlap(s.queue[i].spans, lo, hi) {
				return true
			}
		}
	}
	return false
}

func spansOverlap(spans [][2]uintptr, lo, hi uintptr) bool {
	for _, sp := range spans {
		if lo < sp[1] && sp[0] < hi {
			return true
		}
	}
	return false
}

// extent is the byte range [lo, hi) a strided tensor can touch; ok is false when it
// touches none (no elements, or no data pointer).
func extent(t kernels.Tensor) (lo, hi uintptr, ok bool) {
	if t.Ptr == nil {
		return 0, 0, false
	}
	var neg, pos int64
	for i, n := range t.Sizes {
		if n <= 0 {
			return 0, 0, false
		}
		if st := t.Strides[i] * (n - 1); st < 0 {
			neg += st
		} else {
			pos += st
		}
	}
	es := int64(t.DType.Size())
	if es <= 0 {
		es = 8
	}
	p := int64(uintptr(t.Ptr))
	return uintptr(p + neg*es), uintptr(p + pos*es + es), true
}

func (s *segment) putAsync(g *graph) {
	s.poolMu.Lock()
	s.asyncPool = append(s.asyncPool, g)
	s.poolMu.Unlock()
}

func (s *deviceStream) push(run *streamRun) {
	s.mu.Lock()
	s.pending.Add(1)
	s.queue = append(s.queue, run)
	if !s.started {
		s.started = true
		go s.worker()
	}
	s.mu.Unlock()
	s.cond.Broadcast()
}

// deferFree keeps p until the stream drains when runs are pending; it reports whether it
// did (a run may still read or write p: its tensor was dropped after the launch).
func (s *deviceStream) deferFree(p unsafe.Pointer) bool {
	if p == nil || s.pending.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending.Load() == 0 {
		return false
	}
	s.frees = append(s.frees, p)
	return true
}

func (s *deviceStream) worker() {
	runtime.LockOSThread() // a thread of its own, as the card is a device of its own
	for {
		s.mu.Lock()
		for len(s.queue) == 0 {
			s.cond.Wait()
		}
		run := s.queue[0]
		// Shifted down, not resliced: the queue keeps its array (a launch appends to it
		// without allocating).
		n := copy(s.queue, s.queue[1:])
		s.queue[n] = nil
		s.queue = s.queue[:n]
		s.running = run
		s.mu.Unlock()

		err := run.exec()
		for i, g := range run.gs {
			run.r.segs[i].putAsync(g)
		}
		s.mu.Lock()
		s.running = nil // its spans stay covered until pending drops: frees are deferred till then
		run.r.putRun(run)
		if err != nil && s.err == nil {
			s.err = err
			s.failed.Store(true)
		}
		var frees []unsafe.Pointer
		if s.pending.Load() == 1 { // the last pending run: release what waited for it
			frees, s.frees = s.frees, nil
		}
		s.mu.Unlock()
		for _, p := range frees {
			if ferr := freeNow(p); ferr != nil {
				logf(levelWarning, "stream: deferred free of %p: %v", p, ferr)
			}
		}
		s.runs.Add(1)
		s.mu.Lock()
		if s.pending.Add(-1) == 0 {
			s.cond.Broadcast()
		}
		s.mu.Unlock()
	}
}

// exec runs the bound graphs; a kernel panic becomes the run's error (it must never take
// the process down: nothing above this goroutine would recover it).
func (run *streamRun) exec() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("recipe %s: kernel panic: %v", run.r.id, v)
		}
	}()
	// A short run (a small model's graph) keeps its kernels on this thread: the host
	// thread is busy with Python on the other core, and a helper woken there would only
	// slow it. A long one (a CNN's backward, where the host mostly waits) splits them over
	// the worker pool as a synchronous run does. Decided by the recipe's first run.
	mode := run.r.streamPool.Load()
	if mode != streamModePool {
		kernels.EnterSolo()
		defer kernels.ExitSolo()
	}
	t0 := time.Now()
	for i, s := range run.r.segs {
		if err := runPlan(run.gs[i], s.p, run.r.id); err != nil {
			return err
		}
	}
	if mode == streamModeUndecided {
		m := int32(streamModeSolo)
		if time.Since(t0) > streamSoloMax {
			m = streamModePool
		}
		run.r.streamPool.Store(m)
	}
	return nil
}

const (
	streamModeUndecided = 0
	streamModeSolo      = 1
	streamModePool      = 2
	// streamSoloMax: a run longer than this on the stream's thread alone splits its
	// kernels from then on (the bench MLP's graphs take 40-110 us, the CNN's ms).
	streamSoloMax = 400 * time.Microsecond
)

// keep puts back a failure a caller that cannot raise it took from Drain: the next op
// reports it.
func (s *deviceStream) keep(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		s.failed.Store(true)
	}
	s.mu.Unlock()
}

// DrainKeep waits for the stream as Drain does, for a caller that cannot raise a run's
// failure (an allocation retried after the stream's deferred frees): the next op raises it.
func DrainKeep() {
	if err := Drain(); err != nil {
		devStream.keep(err)
	}
}

// StreamBusy reports whether runs are pending or a failure waits to be raised.
func StreamBusy() bool { return devStream.pending.Load() > 0 || devStream.failed.Load() }

// StreamTouches reports whether an access to t must wait for the stream (Touches).
func StreamTouches(t kernels.Tensor) bool { return devStream.Touches([]kernels.Tensor{t}) }
