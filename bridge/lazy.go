package bridge

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"hpusim/device"
	"hpusim/kernels"
)

// Lazy mode: Execute records each op into the current graph instead of running it. A
// trigger (mark_step, a host read, synchronize, a CPU fallback, the op-count cap, exit)
// launches the graph: its recipe is looked up in the cache or compiled, and a worker
// goroutine runs launched graphs in order while the host records the next one.

// storage is a device allocation referenced by lazy graphs.
type storage struct {
	ptr  unsafe.Pointer
	base uintptr
	size int64
	refs int // graphs, pending or in flight, that use it
	// The newest launched graphs (by seq) that may write it and that use it at all: a
	// host access waits for these only, not for every graph in flight.
	lastWrite, lastUse uint64
	// lastWriteNode is the index, in graph lastWrite, of the last node that writes it: a
	// host read waits only until the worker has run that far into the graph.
	lastWriteNode int
	freed         bool  // released by the program: really freed once refs reaches 0
	poison        error // set when a failed graph should have written it
}

type launch struct {
	g    *graph
	p    *plan
	err  error        // compilation failed: the worker fails the graph instead of running it
	done func(*graph) // takes the graph back after its release (a recipe's bound graph)
}

type engine struct {
	mu   sync.Mutex // guards cur, stos, err
	cur  *graph
	stos map[uintptr]*storage
	err  error // first failure of a launched graph, raised at the next trigger

	launchMu sync.Mutex // serialises launches so graphs run in launch order
	seq      uint64
	queue    chan launch

	// closing counts graphs taken off cur but not yet queued (guarded by mu): while any
	// is, the worker must not stream the newer current graph ahead of them.
	closing int
	// Streaming the current graph's prefix while the host records the rest.
	streamMin int           // pending nodes that wake an idle worker (0: streaming off)
	idle      atomic.Bool   // the worker is blocked waiting for work
	kick      chan struct{} // wakes an idle worker (capacity 1)
	streamed  atomic.Int64  // nodes run by streaming
	// reusedBytes: bytes of graph storages bound into another's buffer (in-place reuse),
	// never touched and released at launch.
	reusedBytes atomic.Int64

	qmu      sync.Mutex
	qcond    *sync.Cond
	inflight int
	doneSeq  uint64 // seq of the last graph the worker finished (graphs run in seq order)
	// Progress inside the graph being run: nodes [0, runPos) of graph runSeq are done
	// (run, or removed as dead). A waiter for node wantNode of graph wantSeq is woken
	// when the run passes it, not only at the graph's end.
	runSeq            uint64
	runPos            int
	wantSeq           uint64
	wantNode, waiters int

	maxOps int
	// maxOpsSync (PT_HPU_MAX_COMPOUND_OP_SYNC): a launch at the maxOps cap also waits for
	// the graph to finish, so the host never runs more than one capped graph ahead.
	maxOpsSync bool
	recorded   atomic.Int64 // ops recorded since start
	// recordNs is a ring of recent per-op recording costs (the host cost of lazy mode).
	recordNs  [4096]atomic.Int64
	recordPos atomic.Int64
	breaks    atomic.Int64 // graph breaks before CPU fallbacks
	busyNs    atomic.Int64 // worker time running graphs (utilisation = busy / wall)
	waitNs    atomic.Int64 // host time blocked on the worker (sync, full queue)
	hostCalls atomic.Int64 // calls that touched host memory (host reads: .cpu(), .item(), ...)
	// The host thread's activity, for kernels.SetSolo: lastRecord is when it last
	// recorded an op (ns since engineEpoch), hostWaiting counts host threads blocked on
	// the worker.
	lastRecord  atomic.Int64
	hostWaiting atomic.Int32
}

// engineEpoch is the origin of engine.lastRecord (monotonic).
var engineEpoch = time.Now()

// hostActiveWindow is how long after its last recorded op the host counts as busy: the
// Python between two ops of a training step takes a few microseconds to tens of them.
const hostActiveWindow = 200 * time.Microsecond

// hostBusy reports whether the host thread is running (recording a graph) rather than
// blocked on the worker or gone quiet: then kernels run on the worker's thread alone and
// the host keeps the other core (kernels.SetSolo).
func (e *engine) hostBusy() bool {
	return e.hostWaiting.Load() == 0 && time.Since(engineEpoch)-time.Duration(e.lastRecord.Load()) < hostActiveWindow
}

var (
	lazyOn atomic.Bool
	eng    *engine
	engMu  sync.Mutex
)

// EnableLazy switches the executor to recording (once, at import, as PT_HPU_LAZY_MODE is
// read once) and starts the worker.
func EnableLazy() {
	engMu.Lock()
	defer engMu.Unlock()
	if eng != nil {
		return
	}
	e := &engine{cur: newGraph(), stos: map[uintptr]*storage{}, queue: make(chan launch, 64),
		maxOps: envInt("PT_HPU_MAX_COMPOUND_OP_SIZE", 0), kick: make(chan struct{}, 1),
		streamMin: envInt("HPUSIM_LAZY_STREAM", 8), maxOpsSync: envTrue("PT_HPU_MAX_COMPOUND_OP_SYNC")}
	if strings.TrimSpace(os.Getenv("HPUSIM_LAZY_STREAM")) == "0" {
		e.streamMin = 0
	}
	e.qcond = sync.NewCond(&e.qmu)
	kernels.SerialBLAS() // the host records while the worker runs: no extra BLAS threads
	if !envFalse("HPUSIM_LAZY_SOLO") {
		kernels.SetSolo(e.hostBusy)
	}
	lazyRuntime()
	go e.worker()
	device.SetReclaimer(e.reclaim)
	startLazyProfile()
	eng = e
	lazyOn.Store(true)
	logf(levelInfo, "lazy mode enabled (max compound op size %d)", e.maxOps)
}

// lazyRuntime tunes the Go runtime for lazy mode, where the library is busy on every core.
//
// Processors: one more than the machine has cores (unless GOMAXPROCS is set). Lazy mode
// runs three busy threads: the host recording, the worker and the kernel pool's helper.
// With a processor per core, the host's every call into the library, the worker's every
// return from a C kernel and the helper's wake-ups queue for a processor (the reference
// CNN's scheduler trace showed 0.8 s of such waits per second of training); with one
// more, the OS shares the cores among them instead. Kernels still split their work over
// one worker per core (kernels.Workers).
//
// Garbage collection: at GOGC 400 (unless GOGC is set). The library's heap is small (a
// few MB of graph records and host-copy snapshots) but turned over fast (about 70 MB/s
// while the CNN trains), so the default of 100 collected every 15 ms.
func lazyRuntime() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) == runtime.NumCPU() {
		runtime.GOMAXPROCS(runtime.NumCPU() + 1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// noteRecord keeps the cost of one record call for RecordCostMedian.
func (e *engine) noteRecord(ns int64) {
	e.lastRecord.Store(int64(time.Since(engineEpoch)))
	i := e.recordPos.Add(1) - 1
	e.recordNs[i%int64(len(e.recordNs))].Store(ns)
}

// RecordCostMedian is the median host cost in nanoseconds of recording one op, over the
// most recent calls (0 before any).
func RecordCostMedian() int64 {
	e := eng
	if e == nil {
		return 0
	}
	n := min(e.recordPos.Load(), int64(len(e.recordNs)))
	v := make([]int64, n)
	for i := range v {
		v[i] = e.recordNs[i].Load()
	}
	sort.Slice(v, func(a, b int) bool { return v[a] < v[b] })
	if n == 0 {
		return 0
	}
	return v[n/2]
}

// Lazy reports whether ops are recorded.
func Lazy() bool { return lazyOn.Load() }

func envInt(name string, def int) int {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil || n <= 0 || n > 1<<31 {
		return def
	}
	return int(n)
}

// record appends op to the current graph, or, when the call touches host memory other than
// an H2D copy source, flushes, waits and runs it eagerly (a host read is a trigger).
func (e *engine) record(op *Op, c *Call) error {
	eff := effectsOf(op, len(c.T))
	n := node{op: op, eff: eff, args: make([]operand, len(c.T)), label: c.Label}
	// Copy every descriptor: the caller may reuse its buffers after we return.
	words := 0
	for _, t := range c.T {
		words += 2 * len(t.Sizes)
	}
	buf := make([]int64, 0, words+len(c.I))
	e.mu.Lock()
	g := e.cur
	// First resolve every operand to a storage without touching the graph: a call that
	// touches host memory is not recorded at all.
	stos := make([]*storage, len(c.T))
	host := false
	for i, t := range c.T {
		sz := len(t.Sizes)
		buf = append(buf, t.Sizes...)
		buf = append(buf, t.Strides...)
		t.Sizes = buf[len(buf)-2*sz : len(buf)-sz : len(buf)-sz]
		t.Strides = buf[len(buf)-sz : len(buf) : len(buf)]
		n.args[i] = operand{t: t, sto: noStorage}
		if t.Numel() == 0 {
			continue
		}
		p := uintptr(t.Ptr)
		st := e.stos[p]
		if st == nil {
			base, size, ok := device.Find(p)
			if !ok {
				// Host memory the op only reads (an H2D copy source, a wrapped scalar) is
				// captured now; host memory it writes is a host read of device data.
				if eff.writesOp(i) {
					host = true
				} else {
					n.args[i].sto = hostSnap
				}
				continue
			}
			if st = e.stos[uintptr(base)]; st == nil {
				st = &storage{ptr: base, base: uintptr(base), size: size}
				e.stos[uintptr(base)] = st
			}
		}
		if st.poison != nil {
			err := e.reportPoison(st)
			e.mu.Unlock()
			return err
		}
		stos[i] = st
		n.args[i].off = int64(p - st.base)
	}
	if host {
		e.mu.Unlock()
		return e.runHostCall(op, c, eff)
	}
	for i, st := range stos {
		if st == nil {
			continue
		}
		ord, ok := g.ord[st.base]
		if !ok {
			ord = int32(len(g.stos))
			g.ord[st.base] = ord
			g.stos = append(g.stos, st)
			st.refs++
		}
		n.args[i].sto = ord
	}
	if len(c.I) > 0 {
		n.ints = append(buf[len(buf):len(buf)], c.I...)
	}
	if len(c.F) > 0 {
		n.fl = append([]float64(nil), c.F...)
	}
	n.snapHostOperands()
	g.nodes = append(g.nodes, n)
	full := e.maxOps > 0 && len(g.nodes) >= e.maxOps
	wake := e.streamMin > 0 && len(g.nodes)-g.taken >= e.streamMin
	e.mu.Unlock()
	e.recorded.Add(1)
	if wake && e.idle.Load() && e.idle.CompareAndSwap(true, false) {
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
	if full {
		if e.maxOpsSync {
			return e.sync("max compound op size")
		}
		return e.launchCurrent("max compound op size")
	}
	return nil
}

// snapHostOperands snapshots the node's host-memory operands (hostSnap) and points them
// at the copies.
func (n *node) snapHostOperands() {
	for i, a := range n.args {
		if a.sto == hostSnap {
			b, ptr := snapshot(a.t)
			n.snap = append(n.snap, b)
			n.args[i].t.Ptr = ptr
		}
	}
}

// snapshot copies the host bytes a strided view can touch, so the program may reuse its
// host buffer before the graph runs; it returns the copy and the view's new data pointer.
func snapshot(t kernels.Tensor) ([]byte, unsafe.Pointer) {
	a := operand{t: t}
	lo, hi := a.extent()
	b := make([]byte, hi-lo)
	copy(b, unsafe.Slice((*byte)(unsafe.Add(t.Ptr, lo)), hi-lo))
	return b, unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), -lo)
}

// runHostCall runs a call touching host memory. A host read is a trigger: the pending
// graph is launched. The call then waits only for the graphs that may write what it reads
// (or use what it writes), so a later graph in flight, such as an optimizer step after the
// loss was computed, keeps running while the host reads and records on; its failure is
// raised at the next trigger. The call must not read what a failed graph poisoned.
func (e *engine) runHostCall(op *Op, c *Call, eff effect) error {
	e.hostCalls.Add(1)
	e.mu.Lock()
	before := e.seq
	e.mu.Unlock()
	if err := e.launchCurrent("host read (" + op.Name + ")"); err != nil {
		return err
	}
	e.mu.Lock()
	launched := e.seq // > before: this read launched graph `launched`, its trigger
	e.mu.Unlock()
	// A read waits for the node that last writes what it reads in a graph launched
	// earlier (the loss of a step is ready long before the step's backward has run; a
	// later failure in that graph is raised at the next trigger, as one of a later graph
	// in flight is), and for the whole graph this read launched, which it triggers. A
	// write waits for every graph that uses the storage.
	var need uint64
	needNode := 0
	e.mu.Lock()
	for i, t := range c.T {
		if t.Numel() == 0 {
			continue
		}
		if base, _, ok := device.Find(uintptr(t.Ptr)); ok {
			if st := e.stos[uintptr(base)]; st != nil {
				seq, node := st.lastWrite, st.lastWriteNode
				if eff.writesOp(i) {
					seq, node = st.lastUse, math.MaxInt
				}
				if seq > before && seq <= launched {
					node = math.MaxInt
				}
				if seq > need || (seq == need && node > needNode) {
					need, needNode = seq, node
				}
			}
		}
	}
	e.mu.Unlock()
	e.waitNode(need, needNode)
	if err := e.takeErr(); err != nil {
		return err
	}
	e.mu.Lock()
	for _, t := range c.T {
		if t.Numel() == 0 {
			continue
		}
		if base, _, ok := device.Find(uintptr(t.Ptr)); ok {
			if st := e.stos[uintptr(base)]; st != nil && st.poison != nil {
				err := e.reportPoison(st)
				e.mu.Unlock()
				return err
			}
		}
	}
	e.mu.Unlock()
	return runKernel(op, c)
}

func poisonError(st *storage) error {
	return fmt.Errorf("this hpu tensor holds no valid data: %w", st.poison)
}

// reportPoison is the error of a use of a poisoned tensor, for a caller about to raise it
// (engine.mu held). When the graph's failure has not been raised yet, this use raises it
// as it is (the failed op's own error) and it is not raised again at the next trigger, as
// an unrelated op's error; later uses say the tensor holds no valid data.
func (e *engine) reportPoison(st *storage) error {
	if e.err != nil && e.err == st.poison {
		e.err = nil
		return st.poison
	}
	return poisonError(st)
}

// launchCurrent closes the current graph and queues it; compilation (or a cache hit)
// happens here on the host, execution on the worker.
func (e *engine) launchCurrent(reason string) error {
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	e.mu.Lock()
	g := e.cur
	if len(g.nodes) == 0 {
		e.mu.Unlock()
		return nil
	}
	e.cur = newGraph()
	e.closing++
	g.dead = make([]bool, len(g.stos))
	for i, s := range g.stos {
		g.dead[i] = s.freed
	}
	e.seq++
	g.seq = e.seq
	g.launched.Store(g.seq)
	g.reason = reason
	taken := g.taken // final: the worker streams only the current graph
	markLaunched(g)
	e.mu.Unlock()
	// The worker may still be streaming g's prefix: a failed compilation is reported (and
	// g released) by the worker too, after that.
	p, err := cache.get(g)
	if err == nil && len(p.elided) > 0 {
		e.releaseElided(g, p, taken)
	}
	e.qmu.Lock()
	e.inflight++
	e.qmu.Unlock()
	e.queue <- launch{g: g, p: p, err: err}
	e.mu.Lock()
	e.closing--
	e.mu.Unlock()
	return nil
}

// markLaunched records graph g (numbered) as the newest to use each of its storages and
// to write those its nodes write (with engine.mu held), for host reads' waits.
func markLaunched(g *graph) {
	for _, st := range g.stos {
		st.lastUse = g.seq
	}
	for k := range g.nodes {
		n := &g.nodes[k]
		for _, w := range n.eff.writes {
			if w < len(n.args) && n.args[w].sto >= 0 {
				st := g.stos[n.args[w].sto]
				st.lastWrite, st.lastWriteNode = g.seq, k
			}
		}
	}
}

// sync launches pending work, waits for the worker, and returns (and clears) the first
// error of a failed graph.
func (e *engine) sync(reason string) error {
	if err := e.launchCurrent(reason); err != nil {
		return err
	}
	e.wait()
	if opTimes != nil && reason == "process exit" {
		opTimes.flush()
	}
	return e.takeErr()
}

// wait blocks until the worker has run every launched graph.
func (e *engine) wait() {
	t0 := time.Now()
	e.hostWaiting.Add(1)
	defer e.hostWaiting.Add(-1)
	e.qmu.Lock()
	for e.inflight > 0 {
		e.waiters++
		e.qcond.Wait()
		e.waiters--
	}
	e.qmu.Unlock()
	e.waitNs.Add(int64(time.Since(t0)))
}

// waitNode blocks until the worker has run every graph before launch number seq and
// graph seq up to and including node (math.MaxInt: all of it; a failed graph counts as
// run).
func (e *engine) waitNode(seq uint64, node int) {
	t0 := time.Now()
	e.hostWaiting.Add(1)
	defer e.hostWaiting.Add(-1)
	e.qmu.Lock()
	for e.doneSeq < seq && (e.runSeq != seq || e.runPos <= node) {
		// One target is kept: with several waiting host threads, one may be woken only
		// when the graph ends, never later.
		e.wantSeq, e.wantNode = seq, node
		e.waiters++
		e.qcond.Wait()
		e.waiters--
	}
	e.qmu.Unlock()
	e.waitNs.Add(int64(time.Since(t0)))
}

// progress records that nodes [0, pos) of graph seq are done.
func (e *engine) progress(seq uint64, pos int) {
	e.qmu.Lock()
	e.runSeq, e.runPos = seq, pos
	woke := e.waiters > 0 && e.wantSeq == seq && pos > e.wantNode
	if woke {
		e.qcond.Broadcast()
	}
	e.qmu.Unlock()
	if woke {
		// The woken host goroutine waits in this processor's run queue (locked to the
		// host's thread) while the worker runs on in C kernels, which the scheduler does
		// not preempt: it could wait for the graph's end. Yield so the host goes on now.
		runtime.Gosched()
	}
}

func (e *engine) takeErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.err
	e.err = nil
	return err
}

// worker runs launched graphs in launch order; with nothing launched, it runs the
// recorded prefix of the current graph so that execution overlaps recording.
func (e *engine) worker() {
	for {
		select {
		case l := <-e.queue:
			e.runLaunch(l)
			continue
		default:
		}
		if e.streamMin > 0 && e.streamSome() {
			continue
		}
		e.idle.Store(true)
		// The host kicks only a worker it sees idle: nodes it recorded after streamSome
		// looked but before idle was set would wait for the next launch. Look again (the
		// host appends, then loads idle; we store idle, then look: one of us sees the other).
		if e.streamMin > 0 && e.streamDue() && e.idle.CompareAndSwap(true, false) {
			continue
		}
		select {
		case l := <-e.queue:
			e.idle.Store(false)
			e.runLaunch(l)
		case <-e.kick:
		}
	}
}

func (e *engine) runLaunch(l launch) {
	t0 := time.Now()
	if l.err != nil {
		e.fail(l.g, 0, l.err)
	} else {
		e.execute(l.g, l.p)
	}
	if traceOn.Load() {
		traceLaunch(l.g, t0)
	}
	e.release(l.g)
	e.busyNs.Add(int64(time.Since(t0)))
	e.qmu.Lock()
	e.inflight--
	e.doneSeq = l.g.seq
	e.qcond.Broadcast()
	waiters := e.waiters
	e.qmu.Unlock()
	if l.done != nil {
		l.done(l.g) // after its last use here: a reuse renumbers the graph
	}
	if waiters > 0 {
		runtime.Gosched() // let a woken host go on now (see progress)
	}
}

// streamDue reports whether the current graph has enough unrun recorded nodes to wake an
// idle worker (record's condition).
func (e *engine) streamDue() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closing == 0 && e.cur.streamErr == nil && len(e.cur.nodes)-e.cur.taken >= e.streamMin
}

// streamSome runs the current graph's recorded but not yet run nodes, one by one, when
// every launched graph has run (program order). Running a node early is what eager mode
// does: its result is the same whether the compiled plan later fuses it or removes it as
// dead. A failure stops streaming; it is raised, with the usual poisoning, when the graph
// is launched. It reports whether it ran anything.
func (e *engine) streamSome() bool {
	e.mu.Lock()
	g := e.cur
	if e.closing > 0 || len(e.queue) > 0 || g.streamErr != nil || g.taken >= len(g.nodes) {
		e.mu.Unlock()
		return false
	}
	from, nodes := g.taken, g.nodes[g.taken:]
	g.taken = len(g.nodes)
	var poisoned map[int32]error
	for i, s := range g.stos {
		if s.poison != nil {
			if poisoned == nil {
				poisoned = map[int32]error{}
			}
			poisoned[int32(i)] = s.poison
		}
	}
	e.mu.Unlock()
	t0 := time.Now()
	for k := range nodes {
		n := &nodes[k]
		var err error
		for _, a := range n.args {
			if a.sto >= 0 && poisoned[a.sto] != nil {
				err = fmt.Errorf("op %s uses a tensor that holds no valid data: %w", n.op.Name, poisoned[a.sto])
				break
			}
		}
		if err == nil {
			t1 := time.Now()
			if err = runNode(n); err != nil {
				err = &streamFailure{err}
			}
			if opTimes != nil {
				opTimes.add(n.op.Name+" (streamed)", time.Since(t1))
			}
			if traceOn.Load() {
				traceSpan(n.op.Name, "Kernel", "graph worker", t1, int64(g.seq), 1)
			}
		}
		if err != nil {
			g.streamErr, g.streamAt = err, from+k
			break
		}
		g.done = from + k + 1
		if seq := g.launched.Load(); seq != 0 {
			e.progress(seq, g.done) // a host read may be waiting for this prefix
		}
	}
	e.streamed.Add(int64(g.done - from))
	e.busyNs.Add(int64(time.Since(t0)))
	return true
}

// fail records a graph failure at node index `from` (program order): the error names the
// op, and every storage the unexecuted rest of the graph would have written is poisoned.
func (e *engine) fail(g *graph, from int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
	for _, n := range g.nodes[from:] {
		for _, w := range n.eff.writes {
			if w < len(n.args) && n.args[w].sto >= 0 {
				if st := g.stos[n.args[w].sto]; st.poison == nil {
					st.poison = err
				}
			}
		}
	}
	logf(levelError, "%v", err)
}

// releaseElided switches g to its plan's buffer reuse for the storages first written
// after its streamed prefix (nodes before `from` ran at their own addresses), and
// releases those at once: the graph never touches them, and they are dead (the program
// freed them before the launch).
func (e *engine) releaseElided(g *graph, p *plan, from int) {
	var free []unsafe.Pointer
	var bytes int64
	e.mu.Lock()
	g.reuse, g.reuseFrom = true, from
	g.early = make([]bool, len(g.stos))
	for _, x := range p.elided {
		if p.firstUse[x] < from {
			continue
		}
		bytes += g.stos[x].size
		g.early[x] = true
		s := g.stos[x]
		s.refs--
		if s.refs == 0 && s.freed {
			free = append(free, s.ptr)
			if e.stos[s.base] == s {
				delete(e.stos, s.base)
			}
		}
	}
	e.mu.Unlock()
	e.reusedBytes.Add(bytes)
	for _, ptr := range free {
		device.Free(ptr)
	}
}

// release drops the graph's references; storages the program freed meanwhile are freed now.
func (e *engine) release(g *graph) {
	var free []unsafe.Pointer
	e.mu.Lock()
	for i, s := range g.stos {
		if g.early != nil && g.early[i] {
			continue
		}
		s.refs--
		if s.refs > 0 {
			continue
		}
		if s.freed {
			free = append(free, s.ptr)
			delete(e.stos, s.base)
		} else if s.poison == nil {
			delete(e.stos, s.base)
		}
	}
	e.mu.Unlock()
	for _, p := range free {
		device.Free(p)
	}
}

// Free releases device memory, deferring it while a pending or running graph uses it.
func Free(p unsafe.Pointer) error {
	if p != nil && ((capActive.Load() && captureFree(p)) || (anyPinned.Load() > 0 && pinnedFree(p))) {
		return nil // a capture or a recipe still runs over it (capture.go)
	}
	if devStream.deferFree(p) {
		return nil // a launched graph may still use it (stream.go)
	}
	return freeNow(p)
}

// freeNow is Free once no launched eager-mode graph can use p.
func freeNow(p unsafe.Pointer) error {
	if e := eng; e != nil && p != nil {
		e.mu.Lock()
		if st := e.stos[uintptr(p)]; st != nil {
			if st.refs > 0 {
				st.freed = true
				e.mu.Unlock()
				return nil
			}
			delete(e.stos, uintptr(p))
		}
		e.mu.Unlock()
	}
	return device.Free(p)
}

// Step is mark_step: launch the pending graph; with wait, also wait for it to finish.
// It reports the first failure of an earlier graph.
func Step(wait bool, reason string) error {
	if capActive.Load() {
		splitCapture() // inside an HPU-graph capture, a step marker ends a segment
	}
	e := eng
	if e == nil {
		return nil
	}
	if wait {
		return e.sync(reason)
	}
	if err := e.launchCurrent(reason); err != nil {
		return err
	}
	return e.takeErr()
}

// GraphBreak launches the pending graph before a CPU fallback and counts the break.
func GraphBreak() error {
	e := eng
	if e == nil {
		return nil
	}
	e.mu.Lock()
	pending := len(e.cur.nodes) > 0
	e.mu.Unlock()
	if pending {
		e.breaks.Add(1)
	}
	return e.launchCurrent("cpu fallback")
}

// PendingOps is the number of ops recorded into the current graph.
func PendingOps() int {
	e := eng
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.cur.nodes)
}

// reclaim is the device allocator's defragmentation step before it reports out of memory:
// frees deferred by graphs still in flight are released once they ran; if that is not
// enough (more reports whether to go on), the pending graph is launched and run too, as it
// holds the deferred frees of everything recorded since the last trigger. A failure stays
// for the next trigger.
func (e *engine) reclaim(more func() bool) {
	e.wait()
	if more() {
		e.launchCurrent("memory defragmentation")
		e.wait()
	}
}

// Quiesce launches pending work and waits for it without consuming a failure (that stays
// for the next trigger): for host code that touches device bytes directly (the glue's
// resize_ copying old contents into a larger allocation).
func Quiesce() {
	if err := Drain(); err != nil {
		logf(levelWarning, "a launched graph failed (reported at the next op): %v", err)
		devStream.keep(err)
	}
	if capActive.Load() {
		PoisonCapture("host access to device memory during capture")
	}
	if e := eng; e != nil {
		e.launchCurrent("host access")
		e.wait()
	}
}
