package kernels

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Grain is the smallest amount of element work worth a worker of its own.
const Grain = 32 * 1024

// KernelPanic carries a panic from a worker back to the caller's goroutine, where the C
// ABI turns it into an error; a panic must never kill the host process.
type KernelPanic struct{ Value any }

func (p KernelPanic) Error() string { return fmt.Sprintf("kernel panic: %v", p.Value) }

// Workers is how many workers (the caller plus pool helpers) a large kernel uses: one a
// core, or fewer when GOMAXPROCS or the thread setting (SetThreads) is lower. Lazy mode
// runs one Go processor more than the cores (bridge.lazyRuntime) for its host and worker
// threads, not for more kernel workers.
func Workers() int {
	w := min(runtime.GOMAXPROCS(0), runtime.NumCPU())
	if t := int(threadLimit.Load()); t > 0 {
		w = min(w, t)
	}
	return w
}

// threadLimit caps Workers when positive: the glue sets it to torch's intra-op thread
// count (torch.set_num_threads, OMP_NUM_THREADS), which on Gaudi sizes the host's CPU
// work, so a user who asks torch for one thread gets one kernel worker.
var threadLimit atomic.Int32

// SetThreads caps the kernel workers at n (n <= 0: one a core) and returns the previous
// setting. Parts already split keep their split; the next kernel uses the new count.
func SetThreads(n int) int {
	if n < 0 {
		n = 0
	}
	return int(threadLimit.Swap(int32(min(n, 1<<20))))
}

// ParallelFor runs fn over [0,n) split in contiguous chunks, one per worker, when the
// total work (n*cost elements) is large enough; otherwise inline. The chunk bounds depend
// only on n and the worker count, never on timing, so results are reproducible. A panic
// in any chunk is re-raised in the caller once every chunk has stopped.
func ParallelFor(n int64, cost int64, fn func(lo, hi int64)) {
	if n <= 0 {
		return
	}
	w := int64(Workers())
	if cost < 1 {
		cost = 1
	}
	if w <= 1 || n*cost < 2*Grain || n < 2 {
		fn(0, n)
		return
	}
	// One part per worker (finer parts cost locality: column-block kernels would share
	// cache lines), claimed dynamically, so a helper that is late leaves its part to
	// the caller.
	if w > n {
		w = n
	}
	chunk := (n + w - 1) / w
	RunParts(int((n+chunk-1)/chunk), func(i int) {
		lo := int64(i) * chunk
		fn(lo, min(lo+chunk, n))
	})
}

// RunParts calls fn(0) … fn(parts-1), the calling goroutine and the pool's helpers
// claiming parts in order as they get to them. A caller that finds the pool busy (a
// nested or concurrent call) runs every part itself. A panic in any part is re-raised
// in the caller, as a KernelPanic, once every part has stopped.
func RunParts(parts int, fn func(i int)) {
	if parts <= 0 {
		return
	}
	// (claim counts parts in 32 bits.)
	if parts == 1 || parts > 1<<31 || Workers() < 2 || soloNow() || !workPool.busy.CompareAndSwap(false, true) {
		for i := 0; i < parts; i++ {
			fn(i)
		}
		return
	}
	j := &poolJob{fn: fn, parts: int64(parts), done: make(chan struct{})}
	j.pending.Store(int64(parts))
	workPool.publish(j)
	j.work(false)
	// The helpers are finishing their last parts: spin while they normally would (a
	// blocked caller pays a thread wake-up when they are done), then block.
	start := time.Now()
	for spins := 1; j.pending.Load() > 0; spins++ {
		if spins&1023 == 0 && time.Since(start) >= spinWait() {
			<-j.done
			break
		}
	}
	workPool.busy.Store(false)
	if p := j.panicked.Load(); p != nil {
		panic(KernelPanic{*p})
	}
}

// soloHook, when set, reports whether kernels should keep to their calling thread for
// now. Lazy mode sets it: while the host thread records (Python, a core's worth of work),
// the worker and a helper would be three busy threads on two cores, and a helper that the
// OS deschedules mid-part holds up the whole kernel. The parts are the same either way
// (they depend only on the worker count), so results do not change.
var soloHook atomic.Pointer[func() bool]

// SetSolo installs the hook (nil removes it).
func SetSolo(f func() bool) {
	if f == nil {
		soloHook.Store(nil)
		return
	}
	soloHook.Store(&f)
}

func soloNow() bool {
	if soloScoped() {
		return true
	}
	f := soloHook.Load()
	return f != nil && (*f)()
}

// poolJob is one RunParts call: parts are claimed through taken; the worker that
// finishes the last one closes done.
type poolJob struct {
	fn       func(i int)
	parts    int64
	taken    atomic.Uint64 // parts claimed from the front (high 32 bits) and from the back (low)
	pending  atomic.Int64
	panicked atomic.Pointer[any]
	done     chan struct{}
}

// claim takes the next part: the caller from the front, the helpers from the back. So
// with two workers each runs the same parts in every call of a kernel (the caller
// 0, 1, …, the helper …, n-2, n-1) whenever both are on time, and the data a part
// writes (a GEMM's output columns and packed panels, an elementwise chunk) is in the
// cache of the core that touches it next time, instead of in the other core's; a
// worker that is late still leaves its parts to the other. Returns -1 when none is left.
func (j *poolJob) claim(back bool) int64 {
	for {
		t := j.taken.Load()
		front, fromBack := int64(t>>32), int64(t&0xffffffff)
		if front+fromBack >= j.parts {
			return -1
		}
		next, i := t+1<<32, front
		if back {
			next, i = t+1, j.parts-1-fromBack
		}
		if j.taken.CompareAndSwap(t, next) {
			return i
		}
	}
}

// work runs parts until none is left; back: claim from the back (the pool's helpers).
func (j *poolJob) work(back bool) {
	for {
		i := j.claim(back)
		if i < 0 {
			return
		}
		j.runPart(int(i))
		if j.pending.Add(-1) == 0 {
			close(j.done)
		}
	}
}

func (j *poolJob) runPart(i int) {
	defer func() {
		if r := recover(); r != nil {
			j.panicked.CompareAndSwap(nil, &r)
		}
	}()
	j.fn(i)
}

// pool is a set of helper goroutines that wait for work by spinning for a short while
// after each job before they park. On this class of machine (virtual CPUs) waking a
// parked thread costs tens of microseconds, as much as a whole medium kernel, and a new
// goroutine is often not stolen by the idle processor before the caller has finished its
// own half; a helper that is still spinning from the previous op starts within a
// microsecond. This is the spin-then-sleep policy of OpenMP runtimes, which torch's CPU
// kernels get from libgomp, made adaptive: a helper spins about twice the idle gap it
// has lately seen between jobs, and parks at once when jobs come further apart than the
// spin limit, so between a training step's bursts of parallel kernels it leaves the core
// to Python, autograd and torch's own threads instead of burning it. The spin yields the
// Go processor now and then (Gosched), so other goroutines are held up by it for tens of
// microseconds at most.
type pool struct {
	busy    atomic.Bool // a RunParts call owns the helpers
	hush    atomic.Bool // park now: OpenBLAS's threads need the cores (blasGemmThreaded)
	away    atomic.Bool // park now: a C team job has the cores (runTeam); the next job clears it
	seq     atomic.Uint64
	job     atomic.Pointer[poolJob]
	at      atomic.Int64 // when the last job was published (monoNow)
	mu      sync.Mutex   // guards helpers
	helpers []*poolHelper
}

type poolHelper struct {
	parked atomic.Bool
	wake   chan struct{}
	gap    time.Duration // moving average of the idle gaps between jobs (helper-owned)
}

var workPool pool

// spinWaitNs is the longest an idle helper spins before it parks: HPUSIM_SPIN_US
// microseconds (default 100; 0 parks at once). Atomic so tests may change it.
var spinWaitNs = func() *atomic.Int64 {
	v := new(atomic.Int64)
	v.Store(int64(100 * time.Microsecond))
	if us, err := strconv.Atoi(os.Getenv("HPUSIM_SPIN_US")); err == nil && us >= 0 {
		v.Store(int64(time.Duration(us) * time.Microsecond))
	}
	return v
}()

func spinWait() time.Duration { return time.Duration(spinWaitNs.Load()) }

// spinBudget is how long h spins for the next job: twice its recent gap (a job usually
// comes within that when jobs are close together), or nothing when the gaps have been
// longer than the limit (spinning would not reach the job and only take the core).
func (h *poolHelper) spinBudget() time.Duration {
	limit := spinWait()
	if h.gap >= limit {
		return 0
	}
	return min(limit, 2*h.gap+minSpin)
}

// minSpin keeps a helper whose jobs come back to back from parking between them.
const minSpin = 2 * time.Microsecond

// observe folds the idle gap from idle (monoNow) to the next job's publication into h's
// average (weight 1/4: a few long gaps, the optimizer step or the Python between steps,
// turn spinning off; a few short ones turn it back on). The gap ends when the job was
// published, not when a parked helper got to run, so a slow wake-up does not count.
func (h *poolHelper) observe(p *pool, idle int64) {
	gap := time.Duration(max(p.at.Load()-idle, 0))
	h.gap += (gap - h.gap) / 4
}

// monoBase anchors monoNow, the monotonic clock in nanoseconds.
var monoBase = time.Now()

func monoNow() int64 { return int64(time.Since(monoBase)) }

func (p *pool) publish(j *poolJob) {
	want := Workers() - 1
	p.mu.Lock()
	for len(p.helpers) < want {
		h := &poolHelper{wake: make(chan struct{}, 1)}
		p.helpers = append(p.helpers, h)
		go p.serve(h, p.seq.Load())
	}
	p.mu.Unlock()
	p.away.Store(false)
	hushTeam()
	p.job.Store(j)
	p.at.Store(monoNow())
	p.seq.Add(1)
	for _, h := range p.helpers {
		if h.parked.Load() {
			select {
			case h.wake <- struct{}{}:
			default:
			}
		}
	}
}

// serve is a helper's loop: wait for a new job (seq moves past seen), work on it.
func (p *pool) serve(h *poolHelper, seen uint64) {
	for {
		seen = p.await(h, seen)
		if j := p.job.Load(); j != nil {
			j.work(true)
		}
	}
}

func (p *pool) await(h *poolHelper, seen uint64) uint64 {
	start := time.Now()
	idle := monoNow()
	budget := h.spinBudget()
	for i := 0; ; i++ {
		if s := p.seq.Load(); s != seen {
			h.observe(p, idle)
			return s
		}
		if i&255 != 255 && budget > 0 {
			continue
		}
		if time.Since(start) >= budget || p.hush.Load() || p.away.Load() {
			// Park. publish stores seq before it looks at parked, and we set parked
			// before we look at seq again, so one of us sees the other: no lost wake-up.
			h.parked.Store(true)
			if s := p.seq.Load(); s != seen {
				h.parked.Store(false)
				h.observe(p, idle)
				return s
			}
			<-h.wake
			h.parked.Store(false)
			if s := p.seq.Load(); s != seen {
				h.observe(p, idle)
				return s
			}
			// A stale wake-up (sent as an earlier wait ended): park again.
			i = 0
			continue
		}
		// Now and then give the processor to any goroutine waiting for one; yielding on
		// every turn would keep the run queue non-empty, and the scheduler then takes
		// the processors of threads that are inside C kernels, stalling them on return.
		if i&yieldMask == yieldMask {
			runtime.Gosched()
		}
	}
}

// yieldMask sets how often (in spin turns, roughly every 10-30 µs) a spinning helper yields.
const yieldMask = 1<<15 - 1
