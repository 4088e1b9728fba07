package bridge

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"hpusim/device"
	"hpusim/kernels"
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
	cuts              []int                      // node counts at the step markers (segment ends)
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
	if err := Drain(); err != nil {
		return err
	}
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

// What is being captured (CaptureKind).
const (
	CaptureNone     = iota
	CaptureHPUGraph // host reads run unrecorded and split the capture
	CaptureRecipe   // any host access makes the capture unusable
)

// CaptureKind reports what kind of capture is recording, if any.
func CaptureKind() int {
	if !capActive.Load() {
		return CaptureNone
	}
	captureMu.Lock()
	defer captureMu.Unlock()
	switch {
	case capCur == nil:
		return CaptureNone
	case capCur.hostReads:
		return CaptureHPUGraph
	}
	return CaptureRecipe
}

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
	n := node{op: op, eff: eff, args: make([]operand, len(c.T)), ints: c.I, fl: c.F, label: c.Label}
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
				cp.cut() // a host read is a step marker: the bridge's capture splits there
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
	n.snapHostOperands()
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

// inputSlot binds an input tensor of the recipe: its storage ordinal in the whole
// capture (-1 when the graph does not touch it) and its data pointer's byte offset from
// the storage base.
type inputSlot struct {
	ord   int32
	delta uintptr
}

// Recipe is a captured graph compiled into plans, runnable over new storages. As on the
// bridge, each step marker inside the capture (mark_step, a host read, synchronize) ends
// a segment: every segment is a recipe of its own, and a run launches them back to back.
type Recipe struct {
	mu       sync.Mutex // runs of one recipe share its scratch
	id       string
	segs     []*segment
	inputs   []inputSlot
	nOut     int // output slots
	nRandom  int // random ops (a run draws a (seed, offset) pair for each)
	pins     []uintptr
	scratch  []unsafe.Pointer // internal storages the recipe owns
	released bool
	reason   string // replayReason
	// streamPool: the device stream splits this recipe's kernels over the worker pool
	// (its first asynchronous run, on the stream's thread alone, was long); stream.go.
	streamPool atomic.Int32
	// asyncTimed counts the synchronous runs LaunchAsync timed before deciding whether the
	// recipe is worth launching (asyncMinNs: the shortest; asyncWorth: 1 yes, 2 no).
	asyncTimed atomic.Int32
	asyncMinNs atomic.Int64
	asyncWorth atomic.Int32
	// runPool: streamRuns of this recipe's finished asynchronous launches, reused by the
	// next ones (a launch allocates no run, graph list or span list; stream.go).
	runPoolMu sync.Mutex
	runPool   []*streamRun
	// copyIn, when set (SetCopyIn), copies a launch's sources into the static tensors of
	// an HPU graph before the segments run (LaunchRecipeCopy).
	copyIn *segment
	// solo: RunRecipe keeps every kernel on the calling thread (SetSolo).
	solo atomic.Bool
}

// SetSolo makes RunRecipe run the recipe's kernels on the calling thread only (the
// compile path turns it on for regions measured faster so; results are the same).
func (r *Recipe) SetSolo(on bool) { r.solo.Store(on) }

// segment is one mark_step segment of a recipe: its nodes as a graph of their own
// (ordinals local to it), compiled into a plan.
type segment struct {
	g       *graph // the template: nodes over the captured storages
	p       *plan
	class   []storageClass // per ordinal
	inputs  []int32        // per recipe input: the ordinal of its storage, or -1
	outputs []int32        // per output slot: its storage's ordinal, or -1
	random  []int          // nodes whose (seed, offset) each run draws
	rnd0    int            // the run's draw pair for random[0]
	rebind  []argRef       // operands over the storages a run rebinds (inputs, outputs)
	runG    *graph         // the bound graph synchronous runs reuse (guarded by Recipe.mu)
	// Bound graphs launches reuse once the worker is done with them (recycle): a replay
	// allocates no graph, node or operand.
	poolMu    sync.Mutex
	pool      []*boundGraph
	asyncPool []*graph     // bound graphs of eager-mode asynchronous runs (stream.go)
	recycle   func(*graph) // s.put, made once
	bound     map[*graph]*boundGraph
	// renews marks the ordinals a run gives new contents whatever they held: temporaries
	// of the capture, and storages whose first access entirely overwrites them. A replay
	// after a failed one makes those valid again instead of refusing to run.
	renews []bool
	// srcs, in a recipe's copy-in segment (SetCopyIn), are the ordinals of the copies'
	// sources, bound at each launch (bindSources), and srcRefs their operands.
	srcs    []int32
	srcRefs []argRef
	clash   []int32 // the ordinals a source must not share a storage with
}

// boundGraph is a graph from newBound with the storages it was made with: launchBound
// swaps the rebound ones for the engine's, a reuse swaps them back.
type boundGraph struct {
	g   *graph
	own []*storage
}

// take returns a bound graph for a launch: a recycled one, or a new one.
func (s *segment) take() *graph {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if n := len(s.pool); n > 0 {
		b := s.pool[n-1]
		s.pool = s.pool[:n-1]
		return b.g
	}
	g := s.newBound()
	if s.bound == nil {
		s.bound = map[*graph]*boundGraph{}
		s.recycle = s.put
	}
	s.bound[g] = &boundGraph{g: g, own: append([]*storage(nil), g.stos...)}
	return g
}

// put takes back a bound graph the worker has run and released. Its own storages that
// the engine still tracks (a later graph uses them, or a failure poisoned them) stay the
// engine's: the graph gets new ones for its next launch.
func (s *segment) put(g *graph) {
	s.poolMu.Lock()
	b := s.bound[g]
	s.poolMu.Unlock()
	if b == nil {
		return
	}
	if e := eng; e != nil {
		e.mu.Lock()
		for i, st := range b.own {
			if st != s.g.stos[i] && e.stos[st.base] == st {
				b.own[i] = &storage{ptr: st.ptr, base: st.base, size: st.size}
			}
		}
		e.mu.Unlock()
	}
	copy(g.stos, b.own)
	g.seq, g.taken, g.done, g.streamErr, g.streamAt, g.reuseFrom, g.early = 0, 0, 0, nil, 0, 0, nil
	g.launched.Store(0)
	s.poolMu.Lock()
	s.pool = append(s.pool, b)
	s.poolMu.Unlock()
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
	Segments int
	Confined []bool // per input: every access of the graph stays inside the input's view
	Used     []bool // per input: the graph touches its storage
	Bound    []bool // per output slot: pre-existing memory the recipe runs over in place
}

// splitCapture ends the capture's current segment: a step marker (mark_step, a host
// read, synchronize) while capturing.
func splitCapture() {
	captureMu.Lock()
	defer captureMu.Unlock()
	if capCur != nil {
		capCur.cut()
	}
}

// cut ends the current segment (captureMu held).
func (cp *capture) cut() {
	n, last := len(cp.g.nodes), 0
	if len(cp.cuts) > 0 {
		last = cp.cuts[len(cp.cuts)-1]
	}
	if n > last {
		cp.cuts = append(cp.cuts, n)
	}
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
	class := make([]storageClass, len(g.stos))
	outputs := make([]int32, len(outBase))
	r := &Recipe{nOut: len(outBase)}
	info := RecipeInfo{Confined: make([]bool, len(inBase)), Used: make([]bool, len(inBase)),
		Bound: make([]bool, len(outBase))}
	for i := range inBase {
		slot := inputSlot{ord: -1, delta: inPtr[i] - inBase[i]}
		if ord, ok := g.ord[inBase[i]]; ok {
			slot.ord = ord
			class[ord] = classInput
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
		outputs[k] = -1
		ord, ok := g.ord[b]
		_, gone := cp.freed[b]
		fresh := cp.allocated[b] && !gone
		if ok && class[ord] == classInput {
			continue // the caller returns views of the input
		}
		if ok && fresh {
			outputs[k] = ord
			class[ord] = classOutput
		} else if !fresh {
			info.Bound[k] = true
		}
	}
	g.dead = make([]bool, len(g.stos))
	temp := make([]bool, len(g.stos))
	for i, s := range g.stos {
		if class[i] == classInput || class[i] == classOutput {
			continue
		}
		if _, gone := cp.freed[s.base]; gone {
			class[i] = classInternal
			g.dead[i] = true
			temp[i] = cp.allocated[s.base]
		} else {
			class[i] = classBound
		}
	}
	r.id = fmt.Sprintf("recipe_%016x", hashWords(g.canonical()))
	ranges := segmentRanges(len(g.nodes), cp.cuts)
	// Per ordinal: the last segment using it and how many do (an internal storage is
	// dead, as far as a segment's plan knows, only in the last one).
	lastSeg := make([]int, len(g.stos))
	nSegs := make([]int, len(g.stos))
	for si, rg := range ranges {
		for _, n := range g.nodes[rg[0]:rg[1]] {
			for _, a := range n.args {
				if a.sto >= 0 && (nSegs[a.sto] == 0 || lastSeg[a.sto] != si) {
					lastSeg[a.sto] = si
					nSegs[a.sto]++
				}
			}
		}
	}
	elided := map[int32]bool{}
	for si, rg := range ranges {
		s, full := newSegment(g, class, temp, rg, si, lastSeg, r.inputs, outputs)
		s.rnd0 = r.nRandom
		r.nRandom += len(s.random)
		p, err := cache.get(s.g)
		if err != nil {
			return nil, RecipeInfo{}, err
		}
		s.p = p
		for _, x := range p.elided {
			if nSegs[full[x]] == 1 {
				elided[full[x]] = true // its buffer folded into another's: the recipe needs no memory for it
			}
		}
		r.segs = append(r.segs, s)
		info.Steps += len(p.steps)
		info.Fused += p.fused
		info.Removed += len(p.removed)
		info.Virtuals += p.virtuals
		info.Reused += len(p.elided)
	}
	captureMu.Lock()
	for i, s := range g.stos {
		switch class[i] {
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
	info.ID, info.Nodes, info.Random, info.Segments = r.id, len(g.nodes), r.nRandom, len(r.segs)
	return r, info, nil
}

// segmentRanges splits nodes [0, n) at the cuts into non-empty [from, to) ranges (one
// empty range for an empty capture).
func segmentRanges(n int, cuts []int) [][2]int {
	var out [][2]int
	from := 0
	for _, c := range append(cuts, n) {
		if c > from && c <= n {
			out = append(out, [2]int{from, c})
			from = c
		}
	}
	if len(out) == 0 {
		out = append(out, [2]int{0, n})
	}
	return out
}

// newSegment builds segment si, nodes rg of the capture g, as a graph of its own; full
// maps its ordinals to g's. temp marks g's ordinals allocated and released within the
// capture.
func newSegment(g *graph, class []storageClass, temp []bool, rg [2]int, si int, lastSeg []int, inputs []inputSlot,
	outputs []int32) (*segment, []int32) {
	sg := newGraph()
	sg.reason = "capture"
	var full []int32
	local := make([]int32, len(g.stos))
	for i := range local {
		local[i] = -1
	}
	nargs := 0
	for _, n := range g.nodes[rg[0]:rg[1]] {
		nargs += len(n.args)
	}
	args := make([]operand, 0, nargs)
	for _, n := range g.nodes[rg[0]:rg[1]] {
		base := len(args)
		for _, a := range n.args {
			if a.sto >= 0 {
				if local[a.sto] < 0 {
					local[a.sto] = int32(len(sg.stos))
					sg.ord[g.stos[a.sto].base] = local[a.sto]
					sg.stos = append(sg.stos, g.stos[a.sto])
					full = append(full, a.sto)
				}
				a.sto = local[a.sto]
			}
			args = append(args, a)
		}
		n.args = args[base:len(args):len(args)]
		sg.nodes = append(sg.nodes, n)
	}
	s := &segment{g: sg, class: make([]storageClass, len(sg.stos)), inputs: make([]int32, len(inputs)),
		outputs: make([]int32, len(outputs))}
	sg.dead = make([]bool, len(sg.stos))
	for k, f := range full {
		s.class[k] = class[f]
		sg.dead[k] = g.dead[f] && lastSeg[f] == si
	}
	for i, in := range inputs {
		s.inputs[i] = -1
		if in.ord >= 0 {
			s.inputs[i] = local[in.ord]
		}
	}
	for k, ord := range outputs {
		s.outputs[k] = -1
		if ord >= 0 {
			s.outputs[k] = local[ord]
		}
	}
	s.renews = firstOverwrites(sg)
	for k, f := range full {
		s.renews[k] = s.renews[k] || temp[f]
	}
	for i, n := range sg.nodes {
		if randomOps[n.op.Name] {
			s.random = append(s.random, i)
		}
		for k, a := range n.args {
			if a.sto >= 0 && (s.class[a.sto] == classInput || s.class[a.sto] == classOutput) {
				s.rebind = append(s.rebind, argRef{int32(i), int32(k)})
			}
		}
	}
	return s, full
}

// firstOverwrites reports, per ordinal of g, whether the first node touching it writes
// every byte of it without reading it.
func firstOverwrites(g *graph) []bool {
	over := make([]bool, len(g.stos))
	seen := make([]bool, len(g.stos))
	for _, n := range g.nodes {
		for i, a := range n.args {
			if a.sto < 0 || seen[a.sto] {
				continue
			}
			lo, hi := a.extent()
			size := g.stos[a.sto].size
			full := n.eff.writeOnly && n.eff.writesOp(i) && lo == 0 && hi == size &&
				a.t.Numel()*int64(a.t.DType.Size()) == size
			for j, b := range n.args {
				if j != i && b.sto == a.sto {
					full = false // read (or written) through another operand too
				}
			}
			over[a.sto] = full
		}
		for _, a := range n.args {
			if a.sto >= 0 {
				seen[a.sto] = true
			}
		}
	}
	return over
}

// Release frees the recipe's scratch and unpins its bound storages.
func (r *Recipe) Release() {
	if err := Drain(); err != nil { // a queued run may still use the recipe
		devStream.keep(err)
	}
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
	if len(in) != len(r.inputs) || len(out) != r.nOut {
		return fmt.Errorf("recipe %s: expected %d inputs and %d outputs, got %d and %d",
			r.id, len(r.inputs), r.nOut, len(in), len(out))
	}
	if len(rnd) != 2*r.nRandom {
		return fmt.Errorf("recipe %s: expected %d random draws, got %d", r.id, r.nRandom, len(rnd)/2)
	}
	return nil
}

// newBound copies the template into a graph a run can bind (bindInto): nodes, operands
// and the storages a run rebinds are its own, the rest stay the captured ones.
func (s *segment) newBound() *graph {
	t := s.g
	g := &graph{nodes: make([]node, len(t.nodes)), stos: make([]*storage, len(t.stos)), dead: t.dead,
		reason: "recipe run", reuse: s.p.remap != nil,
		run: &runScratch{fused: map[*fusedGroup]*kernels.FusedScratch{}}}
	for i, st := range t.stos {
		g.stos[i] = st
		if c := s.class[i]; c == classInput || c == classOutput {
			g.stos[i] = &storage{ptr: st.ptr, base: st.base, size: st.size}
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
	for _, ni := range s.random {
		n := &g.nodes[ni]
		n.ints = append([]int64(nil), n.ints...)
	}
	return g
}

// bindInto points a graph from newBound at a run's storages (checked by checkRun): the
// inputs' and outputs' storages and the operands over them, and the fresh random draws.
func (s *segment) bindInto(g *graph, inputs []inputSlot, in, out []unsafe.Pointer, rnd []int64) {
	for i, ord := range s.inputs {
		if ord >= 0 {
			ptr := unsafe.Add(in[i], -int(inputs[i].delta))
			g.stos[ord].ptr, g.stos[ord].base = ptr, uintptr(ptr)
		}
	}
	for k, ord := range s.outputs {
		if ord >= 0 {
			g.stos[ord].ptr, g.stos[ord].base = out[k], uintptr(out[k])
		}
	}
	for _, ref := range s.rebind {
		a := &g.nodes[ref.node].args[ref.arg]
		a.t.Ptr = unsafe.Add(g.stos[a.sto].ptr, a.off)
	}
	for k, ni := range s.random {
		ints := g.nodes[ni].ints
		ints[0], ints[1] = rnd[2*(s.rnd0+k)], rnd[2*(s.rnd0+k)+1]
	}
}

// RunRecipe runs the recipe once over new storages: in holds the input tensors' data
// pointers (as at capture), out the output slots' fresh storages, rnd a (seed, offset)
// pair per random op. In lazy mode the pending graph runs first. A failing op is
// reported by name; the process goes on. Runs reuse one bound graph per segment: no
// allocation.
func RunRecipe(r *Recipe, in, out []unsafe.Pointer, rnd []int64) error {
	if err := Drain(); err != nil {
		return err
	}
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
	if r.solo.Load() {
		kernels.EnterSolo()
		defer kernels.ExitSolo()
	}
	for _, s := range r.segs {
		if s.runG == nil {
			s.runG = s.newBound()
		}
		s.bindInto(s.runG, r.inputs, in, out, rnd)
		if err := runPlan(s.runG, s.p, r.id); err != nil {
			return err
		}
	}
	return nil
}

// runPlan runs a plan's steps over a bound graph on the calling thread.
// HPUSIM_LAZY_OPTIME times a recipe's steps too ("recipe: " + the step's ops), so that
// a compiled region's kernels can be told apart from the host work around them.
func runPlan(g *graph, p *plan, id string) error {
	if opTimes != nil {
		return runPlanTimed(g, p, id)
	}
	for _, st := range p.steps {
		if st.group == nil {
			if err := runBound(g, p, st.node); err != nil {
				return nodeFailure(id, &g.nodes[st.node], err)
			}
			continue
		}
		if failed, err := runGroup(g, p, st.group); err != nil {
			return nodeFailure(id, &g.nodes[failed], err)
		}
	}
	return nil
}

func runPlanTimed(g *graph, p *plan, id string) error {
	for _, st := range p.steps {
		t0 := time.Now()
		nodes := []int{st.node}
		var err error
		failed := st.node
		if st.group == nil {
			err = runBound(g, p, st.node)
		} else {
			nodes = st.group.nodes
			failed, err = runGroup(g, p, st.group)
		}
		opTimes.add("recipe: "+stepName(g, nodes), time.Since(t0))
		if err != nil {
			return nodeFailure(id, &g.nodes[failed], err)
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
	// The host is busy (it runs Python between replays): kernels keep to the worker's
	// thread instead of waking a helper that would spin on the host's core.
	e.lastRecord.Store(int64(time.Since(engineEpoch)))
	if err := e.launchCurrent("recipe launch"); err != nil {
		return err
	}
	if err := r.lockForLaunch(in, out, rnd); err != nil {
		return err
	}
	var one [1]*graph
	gs := one[:0]
	if len(r.segs) > 1 {
		gs = make([]*graph, 0, len(r.segs))
	}
	for _, s := range r.segs {
		g := s.take() // queued: graphs of their own until the worker is done with them
		s.bindInto(g, r.inputs, in, out, rnd)
		gs = append(gs, g)
	}
	r.mu.Unlock()
	for i, g := range gs {
		s := r.segs[i]
		if err := e.launchBound(g, s.p, r.replayReason(), s.renews, s.recycle); err != nil {
			return err
		}
	}
	return e.takeErr()
}

// lockForLaunch locks the recipe for binding a launch and checks the run's arguments; on
// an error the recipe is left unlocked.
func (r *Recipe) lockForLaunch(in, out []unsafe.Pointer, rnd []int64) error {
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return fmt.Errorf("recipe %s was released", r.id)
	}
	if err := r.checkRun(in, out, rnd); err != nil {
		r.mu.Unlock()
		return err
	}
	return nil
}

// replayReason is the launch reason of the recipe's replays (made once).
func (r *Recipe) replayReason() string {
	if r.reason == "" {
		r.reason = replayPrefix + r.id
	}
	return r.reason
}

// launchBound queues a graph already bound to its storages and compiled (a recipe run):
// its storages join the engine's bookkeeping (references, last writer) as a recorded
// graph's do at launch. A storage a failed graph poisoned stops the launch, unless the
// graph gives it new contents whatever it held (renews): then it is valid again.
// done, when set, takes the graph back once the worker has run and released it.
func (e *engine) launchBound(g *graph, p *plan, reason string, renews []bool, done func(*graph)) error {
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	e.mu.Lock()
	for i, s := range g.stos {
		if st := e.stos[s.base]; st != nil && st.poison != nil && (renews == nil || !renews[i]) {
			e.mu.Unlock()
			return poisonError(st)
		}
	}
	for i, s := range g.stos {
		st := e.stos[s.base]
		if st == nil {
			// The graph's own storage becomes the engine's (the bound graph is the
			// recipe's: put gives it new ones if the engine still holds these then).
			st = s
			st.refs, st.lastWrite, st.lastUse, st.lastWriteNode, st.freed, st.poison = 0, 0, 0, 0, false, nil
			e.stos[s.base] = st
		}
		st.poison = nil // valid, or overwritten first by this graph
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
	e.queue <- launch{g: g, p: p, done: done}
	return nil
}

// SetCopyIn declares the static tensors an HPU-graph replay with the tensor cache fills
// before the recipe runs (wrap_in_hpu_graph's `copy_to(static, new)` then `replay()`): one
// copy node per static tensor, each reading a source bound at every launch, put in front
// of the first segment's nodes and compiled with them here, once. LaunchRecipeCopy then
// queues that graph and the other segments: no op is recorded, no graph built, hashed or
// looked up per replay, and the copies cost the worker no graph of their own.
func (r *Recipe) SetCopyIn(dsts []kernels.Tensor) error {
	mu.RLock()
	op := *byName["copy"]
	mu.RUnlock()
	op.Run = copyInKernel
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return fmt.Errorf("recipe %s was released", r.id)
	}
	if len(r.segs) == 0 {
		return fmt.Errorf("recipe %s has no segment", r.id)
	}
	s0 := r.segs[0]
	t := s0.g
	g := newGraph()
	g.reason = "capture"
	// The first segment's storages keep their ordinals; the static tensors it does not
	// use and the sources come after them.
	g.stos = append(g.stos, t.stos...)
	for b, o := range t.ord {
		g.ord[b] = o
	}
	s := &segment{g: g, class: append([]storageClass(nil), s0.class...), inputs: s0.inputs, outputs: s0.outputs,
		rnd0: s0.rnd0}
	nc := int32(len(dsts))
	var copies []node
	for k, d := range dsts {
		if err := d.Validate(); err != nil {
			return fmt.Errorf("static input %d: %v", k, err)
		}
		if d.Numel() == 0 {
			return fmt.Errorf("static input %d has no elements", k)
		}
		base, size, ok := device.Find(uintptr(d.Ptr))
		if !ok {
			return fmt.Errorf("static input %d is not device memory", k)
		}
		ord, seen := g.ord[uintptr(base)]
		if seen && s.class[ord] != classBound {
			return fmt.Errorf("static input %d is not bound memory of the recipe", k)
		}
		if !seen {
			ord = int32(len(g.stos))
			g.ord[uintptr(base)] = ord
			g.stos = append(g.stos, &storage{ptr: base, base: uintptr(base), size: size})
			s.class = append(s.class, classBound)
		}
		dst := operand{t: d, sto: ord, off: int64(uintptr(d.Ptr) - uintptr(base))}
		// The source: a storage of its own, rebound at each launch (its view's span here).
		src := operand{t: d, sto: int32(len(g.stos))}
		src.t.Ptr = nil
		_, span := src.extent()
		g.stos = append(g.stos, &storage{size: span})
		s.class = append(s.class, classInput)
		s.srcs = append(s.srcs, src.sto)
		s.srcRefs = append(s.srcRefs, argRef{int32(k), 1})
		copies = append(copies, node{op: &op, eff: effectsOf(&op, 2), args: []operand{dst, src}})
	}
	g.nodes = append(copies, t.nodes...)
	g.dead = make([]bool, len(g.stos))
	copy(g.dead, t.dead)
	for _, ni := range s0.random {
		s.random = append(s.random, ni+int(nc))
	}
	for _, ref := range s0.rebind {
		s.rebind = append(s.rebind, argRef{ref.node + nc, ref.arg})
	}
	s.renews = firstOverwrites(g)
	for i, v := range s0.renews {
		s.renews[i] = s.renews[i] || v
	}
	s.p = compile(g)
	// A source may not share a storage with memory the graph touches; storages folded
	// into another's buffer (elided) are never touched, and their memory may be free.
	elided := map[int32]bool{}
	for _, x := range s.p.elided {
		elided[x] = true
	}
	for o := int32(0); o < s.srcs[0]; o++ {
		if !elided[o] {
			s.clash = append(s.clash, o)
		}
	}
	r.copyIn = s
	return nil
}

// copyInKernel is the copy of a source into its static tensor: both laid out alike, so a
// dense view is one memmove.
func copyInKernel(c *Call) error {
	d, src := c.T[0], c.T[1]
	a := operand{t: d}
	lo, hi := a.extent()
	if n := d.Numel() * int64(d.DType.Size()); n > 0 && hi-lo == n && d.DType == src.DType &&
		slicesEqual(d.Sizes, src.Sizes) && slicesEqual(d.Strides, src.Strides) {
		copy(unsafe.Slice((*byte)(unsafe.Add(d.Ptr, lo)), n), unsafe.Slice((*byte)(unsafe.Add(src.Ptr, lo)), n))
		return nil
	}
	return kernels.Copy(d, src)
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ErrSourceAliases: a copy source shares a storage with another or with memory the graph
// touches (the caller then copies op by op and launches the recipe without its copy-in).
var ErrSourceAliases = errors.New("copy sources alias")

// bindSources points the copy-in segment's graph g (from newBound, bound with bindInto)
// at a launch's sources: their data pointers, each in a storage of its own that is none of
// the graph's others.
func (s *segment) bindSources(g *graph, src []unsafe.Pointer) error {
	if len(src) != len(s.srcs) {
		return fmt.Errorf("expected %d copy sources, got %d", len(s.srcs), len(src))
	}
	for k, ord := range s.srcs {
		base, size, ok := device.Find(uintptr(src[k]))
		if !ok {
			return fmt.Errorf("copy source %d is not device memory", k)
		}
		for _, o := range s.clash {
			if g.stos[o].base == uintptr(base) {
				return fmt.Errorf("copy source %d shares a storage with the graph's memory: %w", k, ErrSourceAliases)
			}
		}
		for j, o := range s.srcs[:k] {
			if g.stos[o].base == uintptr(base) {
				return fmt.Errorf("copy sources %d and %d share a storage: %w", k, j, ErrSourceAliases)
			}
		}
		st := g.stos[ord]
		st.ptr, st.base, st.size = base, uintptr(base), size
		a := &g.nodes[s.srcRefs[k].node].args[s.srcRefs[k].arg]
		a.t.Ptr, a.off = src[k], int64(uintptr(src[k])-uintptr(base))
		if _, hi := a.extent(); hi > size {
			return fmt.Errorf("copy source %d reaches past its storage", k)
		}
	}
	return nil
}

// LaunchRecipeCopy copies each src (a device data pointer, laid out as its static tensor)
// into the static tensors of SetCopyIn and then runs the recipe, as LaunchRecipe does: the
// copies and the first segment are one queued graph. Without lazy mode it all runs at once.
// ErrSourceAliases (wrapped) means nothing of the recipe ran.
func LaunchRecipeCopy(r *Recipe, src, in, out []unsafe.Pointer, rnd []int64) error {
	e := eng
	if e == nil {
		return runRecipeCopy(r, src, in, out, rnd)
	}
	e.lastRecord.Store(int64(time.Since(engineEpoch)))
	if err := e.launchCurrent("recipe launch"); err != nil {
		return err
	}
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return fmt.Errorf("recipe %s was released", r.id)
	}
	if r.copyIn == nil {
		r.mu.Unlock()
		return fmt.Errorf("recipe %s has no copy-in (SetCopyIn)", r.id)
	}
	if err := r.checkRun(in, out, rnd); err != nil {
		r.mu.Unlock()
		return err
	}
	var two [2]*graph
	gs := two[:0]
	if len(r.segs) > 2 {
		gs = make([]*graph, 0, len(r.segs))
	}
	for i := range r.segs {
		sg := r.segs[i]
		if i == 0 {
			sg = r.copyIn
		}
		g := sg.take()
		sg.bindInto(g, r.inputs, in, out, rnd)
		gs = append(gs, g)
		if i == 0 {
			if err := sg.bindSources(g, src); err != nil {
				r.mu.Unlock()
				sg.put(g)
				return err
			}
		}
	}
	r.mu.Unlock()
	for i, g := range gs {
		sg := r.segs[i]
		if i == 0 {
			sg = r.copyIn
		}
		if err := e.launchBound(g, sg.p, r.replayReason(), sg.renews, sg.recycle); err != nil {
			for j := i; j < len(gs); j++ { // never queued: back to their pools
				if j == 0 {
					r.copyIn.put(gs[j])
				} else {
					r.segs[j].put(gs[j])
				}
			}
			return err
		}
	}
	return e.takeErr()
}

// runRecipeCopy is LaunchRecipeCopy without lazy mode: the runs happen at once.
func runRecipeCopy(r *Recipe, src, in, out []unsafe.Pointer, rnd []int64) error {
	if err := Drain(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return fmt.Errorf("recipe %s was released", r.id)
	}
	if r.copyIn == nil {
		return fmt.Errorf("recipe %s has no copy-in (SetCopyIn)", r.id)
	}
	if err := r.checkRun(in, out, rnd); err != nil {
		return err
	}
	for i := range r.segs {
		s := r.segs[i]
		if i == 0 {
			s = r.copyIn
		}
		if s.runG == nil {
			s.runG = s.newBound()
		}
		s.bindInto(s.runG, r.inputs, in, out, rnd)
		if i == 0 {
			if err := s.bindSources(s.runG, src); err != nil {
				return err
			}
		}
		if err := runPlan(s.runG, s.p, r.id); err != nil {
			return err
		}
	}
	return nil
}
