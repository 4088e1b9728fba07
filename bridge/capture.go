package bridge

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"hpusim/device"
)

// Capture: a function's ops recorded into a graph (while they also run, so the capture
// produces real results) and compiled into a recipe with the lazy engine's passes and
// recipe cache. A recipe runs again over new input and output storages with one call
// (RunRecipe): the runtime under _recipe.capture/Recipe.run, hpu_backend's compiled FX
// graphs and HPU-graph replays.
//
// Storage classes at the end of a capture, by what the caller says and what the capture
// saw:
//   - input: the storage of an input tensor; rebound to the new input at every run;
//   - output: allocated during the capture and alive as the storage of an output;
//     rebound to a fresh allocation at every run;
//   - internal: released by the program during the capture; the recipe keeps the memory
//     as its scratch, reused by every run (the plan's in-place reuse may fold it into
//     another's buffer, then it is released);
//   - bound: anything else still alive (a constant made outside the function, a module
//     parameter it closes over): every run uses the captured memory, which the recipe
//     keeps from being freed until it is released.

type storageClass uint8

const (
	classBound storageClass = iota
	classInput
	classOutput
	classInternal
)

// randomOps are the ops whose (seed, offset) attributes a run draws afresh.
var randomOps = map[string]bool{"uniform": true, "normal": true, "bernoulli": true, "random_int": true, "dropout": true}

type capture struct {
	// dryRun records without running (HPU graphs' capture_begin(dry_run=True));
	// hostReads lets host reads run unrecorded (an HPU graph splits at them as the bridge
	// does at a mark_step) instead of making the capture unusable.
	dryRun, hostReads bool
	g                 *graph
	allocated         map[uintptr]bool           // storage bases allocated while capturing
	freed             map[uintptr]unsafe.Pointer // storages of the graph released while capturing (deferred)
	err               error                      // why the function cannot be a recipe
}

var (
	captureMu sync.Mutex // guards cap and every capture's state
	capActive atomic.Bool
	capCur    *capture
	// pinned counts, per storage base, the recipes that run over it as bound memory: a
	// release of it by the program is deferred until the last such recipe is released.
	pinned      = map[uintptr]int{}
	pinnedFreed = map[uintptr]unsafe.Pointer{}
	anyPinned   atomic.Int64
)

// BeginCapture starts recording. In lazy mode, the pending graph is run first (the
// capture's ops run at once, on the captured storages' current contents). dryRun records
// without running; hostReads lets host reads run unrecorded.
func BeginCapture(dryRun, hostReads bool) error {
	if e := eng; e != nil {
		if err := e.sync("recipe capture"); err != nil {
			return err
		}
	}
	captureMu.Lock()
	defer captureMu.Unlock()
	if capCur != nil {
		return fmt.Errorf("a capture is already in progress")
	}
	capCur = &capture{dryRun: dryRun, hostReads: hostReads, g: newGraph(), allocated: map[uintptr]bool{},
		freed: map[uintptr]unsafe.Pointer{}}
	capCur.g.reason = "capture"
	capActive.Store(true)
	return nil
}

// Capturing reports whether ops are being captured.
func Capturing() bool { return capActive.Load() }

// PoisonCapture marks the capture as not capturable, for a reason the caller found (a
// CPU fallback, a host access): the first reason is kept.
func PoisonCapture(reason string) {
	captureMu.Lock()
	defer captureMu.Unlock()
	if capCur != nil && capCur.err == nil {
		capCur.err = fmt.Errorf("%s", reason)
	}
}

// noteAlloc records an allocation made while capturing.
func noteAlloc(p unsafe.Pointer) {
	if !capActive.Load() || p == nil {
		return
	}
	captureMu.Lock()
	if capCur != nil {
		capCur.allocated[uintptr(p)] = true
		delete(capCur.freed, uintptr(p))
	}
	captureMu.Unlock()
}

// NoteAlloc is called by the allocator for each new device allocation.
func NoteAlloc(p unsafe.Pointer) { noteAlloc(p) }

// captureFree defers the release of a storage the capture recorded (its address must stay
// unique within the graph, and it becomes the recipe's scratch). It reports whether it did.
func captureFree(p unsafe.Pointer) bool {
	captureMu.Lock()
	defer captureMu.Unlock()
	if capCur == nil {
		return false
	}
	if _, ok := capCur.g.ord[uintptr(p)]; !ok {
		delete(capCur.allocated, uintptr(p))
		return false
	}
	capCur.freed[uintptr(p)] = p
	return true
}

// pinnedFree defers the release of memory a recipe runs over as bound storage.
func pinnedFree(p unsafe.Pointer) bool {
	captureMu.Lock()
	defer captureMu.Unlock()
	if pinned[uintptr(p)] > 0 {
		pinnedFreed[uintptr(p)] = p
		return true
	}
	return false
}

// record captures one call and runs it at once.
func (cp *capture) record(op *Op, c *Call) error {
	eff := effectsOf(op, len(c.T))
	n := node{op: op, eff: eff, args: make([]operand, len(c.T)), ints: c.I, fl: c.F}
	captureMu.Lock()
	if cp.err != nil {
		captureMu.Unlock()
		return runKernel(op, c)
	}
	g := cp.g
	for i, t := range c.T {
		n.args[i] = operand{t: t, sto: noStorage}
		if t.Numel() == 0 {
			continue
		}
		base, size, ok := device.Find(uintptr(t.Ptr))
		if !ok {
			if eff.writesOp(i) {
				if !cp.hostReads {
					cp.err = fmt.Errorf("host read (%s) during capture", op.Name)
				}
				captureMu.Unlock()
				return runKernel(op, c)
			}
			n.args[i].sto = hostSnap
			continue
		}
		ord, seen := g.ord[uintptr(base)]
		if !seen {
			ord = int32(len(g.stos))
			g.ord[uintptr(base)] = ord
			g.stos = append(g.stos, &storage{ptr: base, base: uintptr(base), size: size})
		}
		n.args[i].sto = ord
		n.args[i].off = int64(uintptr(t.Ptr) - uintptr(base))
	}
	for i, a := range n.args {
		if a.sto == hostSnap {
			b, ptr := snapshot(a.t)
			n.snap = append(n.snap, b)
			n.args[i].t.Ptr = ptr
		}
	}
	g.nodes = append(g.nodes, n)
	dry := cp.dryRun
	captureMu.Unlock()
	if dry {
		return nil
	}
	if err := runKernel(op, c); err != nil {
		PoisonCapture(err.Error())
		return err
	}
	return nil
}

// AbortCapture stops recording and drops the capture (fn raised).
func AbortCapture() {
	captureMu.Lock()
	cp := capCur
	capCur = nil
	capActive.Store(false)
	captureMu.Unlock()
	if cp != nil {
		for _, p := range cp.freed {
			Free(p)
		}
	}
}

// inputSlot binds an input tensor of the recipe: its storage ordinal (-1 when the graph
// does not touch it) and its data pointer's byte offset from the storage base.
type inputSlot struct {
	ord   int32
	delta uintptr
}

// Recipe is a captured graph compiled into a plan, runnable over new storages.
type Recipe struct {
	mu       sync.Mutex // runs of one recipe share its scratch
	id       string
	g        *graph // the template: nodes over the captured storages
	p        *plan
	class    []storageClass // per storage ordinal
	inputs   []inputSlot
	outputs  []int32 // per output slot: its storage ordinal, or -1
	random   []int   // nodes whose (seed, offset) each run draws
	pins     []uintptr
	scratch  []unsafe.Pointer // internal storages the recipe owns
	released bool
	rebind   []argRef // operands over the storages a run rebinds (inputs, outputs)
	runG     *graph   // the bound graph synchronous runs reuse (guarded by mu)
}

// argRef names operand arg of node node.
type argRef struct{ node, arg int32 }

// RecipeInfo describes a finished capture to the caller.
type RecipeInfo struct {
	ID       string
	Nodes    int
	Steps    int
	Fused    int
	Removed  int
	Virtuals int
	Reused   int
	Random   int
	Confined []bool // per input: every access of the graph stays inside the input's view
	Used     []bool // per input: the graph touches its storage
	Bound    []bool // per output slot: pre-existing memory the recipe runs over in place
}

// EndCapture stops recording and compiles the capture. inBase/inPtr/inLo/inHi describe the
// input tensors (storage base, data pointer, and the byte range the view spans); outBase
// lists the distinct storages of the outputs. An error means the capture is unusable
// (cause in the message); the ops ran either way.
func EndCapture(inBase, inPtr, inLo, inHi, outBase []uintptr) (*Recipe, RecipeInfo, error) {
	captureMu.Lock()
	cp := capCur
	capCur = nil
	capActive.Store(false)
	captureMu.Unlock()
	if cp == nil {
		return nil, RecipeInfo{}, fmt.Errorf("no capture in progress")
	}
	g := cp.g
	// Memory the program released during the capture is released now when the recipe
	// will not keep it.
	keep := map[uintptr]bool{}
	defer func() {
		for b, p := range cp.freed {
			if !keep[b] {
				Free(p)
			}
		}
	}()
	if cp.err != nil {
		return nil, RecipeInfo{}, cp.err
	}
	r := &Recipe{g: g, class: make([]storageClass, len(g.stos)), outputs: make([]int32, len(outBase))}
	info := RecipeInfo{Confined: make([]bool, len(inBase)), Used: make([]bool, len(inBase)),
		Bound: make([]bool, len(outBase))}
	for i := range inBase {
		slot := inputSlot{ord: -1, delta: inPtr[i] - inBase[i]}
		if ord, ok := g.ord[inBase[i]]; ok {
			slot.ord = ord
			r.class[ord] = classInput
		}
		r.inputs = append(r.inputs, slot)
	}
	// Per input ordinal: the byte range the graph touches.
	lo := make([]uintptr, len(g.stos))
	hi := make([]uintptr, len(g.stos))
	for _, n := range g.nodes {
		for _, a := range n.args {
			if a.sto < 0 {
				continue
			}
			l, h := a.extent()
			b := g.stos[a.sto].base
			if lo[a.sto] == 0 || b+uintptr(l) < lo[a.sto] {
				lo[a.sto] = b + uintptr(l)
			}
			if b+uintptr(h) > hi[a.sto] {
				hi[a.sto] = b + uintptr(h)
			}
		}
	}
	for i, s := range r.inputs {
		info.Confined[i] = s.ord < 0 || (lo[s.ord] >= inLo[i] && hi[s.ord] <= inHi[i])
		info.Used[i] = s.ord >= 0
	}
	for k, b := range outBase {
		r.outputs[k] = -1
		ord, ok := g.ord[b]
		_, gone := cp.freed[b]
		fresh := cp.allocated[b] && !gone
		if ok && r.class[ord] == classInput {
			continue // the caller returns views of the input
		}
		if ok && fresh {
			r.outputs[k] = ord
			r.class[ord] = classOutput
		} else if !fresh {
			info.Bound[k] = true
		}
	}
	g.dead = make([]bool, len(g.stos))
	for i, s := range g.stos {
		if r.class[i] == classInput || r.class[i] == classOutput {
			continue
		}
		if _, gone := cp.freed[s.base]; gone {
			r.class[i] = classInternal
			g.dead[i] = true
		} else {
			r.class[i] = classBound
		}
	}
	for i, n := range g.nodes {
		if randomOps[n.op.Name] {
			r.random = append(r.random, i)
		}
		for k, a := range n.args {
			if a.sto >= 0 && (r.class[a.sto] == classInput || r.class[a.sto] == classOutput) {
				r.rebind = append(r.rebind, argRef{int32(i), int32(k)})
			}
		}
	}
	p, err := cache.get(g)
	if err != nil {
		return nil, RecipeInfo{}, err
	}
	r.p = p
	r.id = fmt.Sprintf("recipe_%016x", hashWords(g.canonical()))
	elided := map[int32]bool{}
	for _, x := range p.elided {
		elided[x] = true
	}
	captureMu.Lock()
	for i, s := range g.stos {
		switch r.class[i] {
		case classInternal:
			if !elided[int32(i)] {
				keep[s.base] = true
				r.scratch = append(r.scratch, s.ptr)
			}
		case classBound:
			pinned[s.base]++
			anyPinned.Add(1)
			r.pins = append(r.pins, s.base)
		}
	}
	captureMu.Unlock()
	info.ID, info.Nodes, info.Steps, info.Fused = r.id, len(g.nodes), len(p.steps), p.fused
	info.Removed, info.Virtuals, info.Reused, info.Random = len(p.removed), p.virtuals, len(p.elided), len(r.random)
	return r, info, nil
}

// Release frees the recipe's scratch and unpins its bound storages.
func (r *Recipe) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return
	}
	r.released = true
	var free []unsafe.Pointer
	captureMu.Lock()
	for _, b := range r.pins {
		pinned[b]--
		anyPinned.Add(-1)
		if pinned[b] == 0 {
			delete(pinned, b)
			if p, ok := pinnedFreed[b]; ok {
				delete(pinnedFreed, b)
				free = append(free, p)
			}
		}
	}
	captureMu.Unlock()
	for _, p := range append(free, r.scratch...) {
		Free(p)
	}
	r.scratch = nil
}

// checkRun checks a run's arguments against the recipe.
func (r *Recipe) checkRun(in, out []unsafe.Pointer, rnd []int64) error {
	if len(in) != len(r.inputs) || len(out) != len(r.outputs) {
		return fmt.Errorf("recipe %s: expected %d inputs and %d outputs, got %d and %d",
			r.id, len(r.inputs), len(r.outputs), len(in), len(out))
	}
	if len(rnd) != 2*len(r.random) {
		return fmt.Errorf("recipe %s: expected %d random draws, got %d", r.id, len(r.random), len(rnd)/2)
	}
	return nil
}

// newBound copies the template into a graph a run can bind (bindInto): nodes, operands
// and the storages a run rebinds are its own, the rest stay the captured ones.
func (r *Recipe) newBound() *graph {
	t := r.g
	g := &graph{nodes: make([]node, len(t.nodes)), stos: make([]*storage, len(t.stos)), dead: t.dead,
		reason: "recipe run", reuse: r.p.remap != nil}
	for i, s := range t.stos {
		g.stos[i] = s
		if c := r.class[i]; c == classInput || c == classOutput {
			g.stos[i] = &storage{ptr: s.ptr, base: s.base, size: s.size}
		}
	}
	nargs := 0
	for i := range t.nodes {
		nargs += len(t.nodes[i].args)
	}
	args := make([]operand, 0, nargs)
	for i := range t.nodes {
		n := t.nodes[i]
		base := len(args)
		args = append(args, n.args...)
		n.args = args[base:len(args):len(args)]
		g.nodes[i] = n
	}
	for _, ni := range r.random {
		n := &g.nodes[ni]
		n.ints = append([]int64(nil), n.ints...)
	}
	return g
}

// bindInto points a graph from newBound at a run's storages (checked by checkRun): the
// inputs' and outputs' storages and the operands over them, and the fresh random draws.
func (r *Recipe) bindInto(g *graph, in, out []unsafe.Pointer, rnd []int64) {
	for i, s := range r.inputs {
		if s.ord >= 0 {
			ptr := unsafe.Add(in[i], -int(s.delta))
			g.stos[s.ord].ptr, g.stos[s.ord].base = ptr, uintptr(ptr)
		}
	}
	for k, ord := range r.outputs {
		if ord >= 0 {
			g.stos[ord].ptr, g.stos[ord].base = out[k], uintptr(out[k])
		}
	}
	for _, ref := range r.rebind {
		a := &g.nodes[ref.node].args[ref.arg]
		a.t.Ptr = unsafe.Add(g.stos[a.sto].ptr, a.off)
	}
	for k, ni := range r.random {
		ints := g.nodes[ni].ints
		ints[0], ints[1] = rnd[2*k], rnd[2*k+1]
	}
}

// RunRecipe runs the recipe once over new storages: in holds the input tensors' data
// pointers (as at capture), out the output slots' fresh storages, rnd a (seed, offset)
// pair per random op. In lazy mode the pending graph runs first. A failing op is
// reported by name; the process goes on. Runs reuse one bound graph: no allocation.
func RunRecipe(r *Recipe, in, out []unsafe.Pointer, rnd []int64) error {
	if e := eng; e != nil {
		if err := e.sync("recipe run"); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return fmt.Errorf("recipe %s was released", r.id)
	}
	if err := r.checkRun(in, out, rnd); err != nil {
		return err
	}
	if r.runG == nil {
		r.runG = r.newBound()
	}
	r.bindInto(r.runG, in, out, rnd)
	return runPlan(r.runG, r.p, r.id)
}

// runPlan runs a plan's steps over a bound graph on the calling thread.
func runPlan(g *graph, p *plan, id string) error {
	for _, st := range p.steps {
		if st.group == nil {
			if err := runBound(g, p, st.node); err != nil {
				return fmt.Errorf("%s failed in op %s: %v", id, g.nodes[st.node].op.Name, err)
			}
			continue
		}
		if failed, err := runGroup(g, p, st.group); err != nil {
			return fmt.Errorf("%s failed in op %s: %v", id, g.nodes[failed].op.Name, err)
		}
	}
	return nil
}

// LaunchRecipe queues a run of the recipe on the lazy worker, after the pending graph
// (which is launched first), and returns at once: an HPU-graph replay in lazy mode. Host
// reads wait for it as for any launched graph, and a failure is raised at the next
// trigger, naming the op. Without lazy mode it runs the recipe at once.
func LaunchRecipe(r *Recipe, in, out []unsafe.Pointer, rnd []int64) error {
	e := eng
	if e == nil {
		return RunRecipe(r, in, out, rnd)
	}
	if err := e.launchCurrent("recipe launch"); err != nil {
		return err
	}
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return fmt.Errorf("recipe %s was released", r.id)
	}
	if err := r.checkRun(in, out, rnd); err != nil {
		r.mu.Unlock()
		return err
	}
	g := r.newBound() // queued: a graph of its own
	r.bindInto(g, in, out, rnd)
	r.mu.Unlock()
	if err := e.launchBound(g, r.p, "replay of "+r.id); err != nil {
		return err
	}
	return e.takeErr()
}

// launchBound queues a graph already bound to its storages and compiled (a recipe run):
// its storages join the engine's bookkeeping (references, last writer) as a recorded
// graph's do at launch.
func (e *engine) launchBound(g *graph, p *plan, reason string) error {
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	e.mu.Lock()
	for i, s := range g.stos {
		st := e.stos[s.base]
		if st == nil {
			st = &storage{ptr: s.ptr, base: s.base, size: s.size}
			e.stos[s.base] = st
		}
		if st.poison != nil {
			for _, done := range g.stos[:i] {
				done.refs--
			}
			e.mu.Unlock()
			return poisonError(st)
		}
		st.refs++
		g.stos[i] = st
	}
	e.seq++
	g.seq = e.seq
	g.launched.Store(g.seq)
	g.reason = reason
	g.taken = len(g.nodes)
	markLaunched(g)
	e.mu.Unlock()
	e.qmu.Lock()
	e.inflight++
	e.qmu.Unlock()
	e.queue <- launch{g: g, p: p}
	return nil
}
