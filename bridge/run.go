package bridge

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"hpusim/kernels"
)

// Running a launched graph on the worker: the plan's steps in order, each over the
// graph's own operands (its addresses and scalars), stopping at the first failure.

func (e *engine) execute(g *graph, p *plan) {
	if g.streamErr != nil {
		if !slices.Contains(p.removed, g.streamAt) {
			where := fmt.Sprintf("lazy graph #%d", g.seq)
			var sf *streamFailure
			if errors.As(g.streamErr, &sf) {
				e.fail(g, g.streamAt, nodeFailure(where, &g.nodes[g.streamAt], sf.err))
			} else {
				e.fail(g, g.streamAt, fmt.Errorf("%s %w", where, g.streamErr))
			}
			return
		}
		// The failed node is dead code (the plan removes it; only streaming ran it): as
		// without streaming, its failure is no failure. The rest runs from it on.
	}
	poisoned := e.poisonedIn(g)
	prog := newProgress(g, p)
	e.progress(g.seq, prog.pos)
	for _, st := range p.steps {
		nodes := []int{st.node}
		if st.group != nil {
			nodes = st.group.nodes
		}
		if nodes[len(nodes)-1] < g.done {
			prog.finish(e, g, nodes)
			continue // already run by streaming
		}
		if poisoned != nil {
			for _, ni := range nodes {
				for _, a := range g.nodes[ni].args {
					if a.sto >= 0 && poisoned[a.sto] != nil {
						e.fail(g, nodes[0], fmt.Errorf("lazy graph #%d: op %s uses a tensor that holds no valid data: %w",
							g.seq, g.nodes[ni].op.Name, poisoned[a.sto]))
						return
					}
				}
			}
		}
		if nodes[0] < g.done {
			// A fused group the streamed prefix cut: its remaining nodes run one by one
			// (their inputs are all in memory, as the prefix ran unfused).
			for _, ni := range nodes {
				if ni < g.done {
					continue
				}
				if err := runBound(g, p, ni); err != nil {
					e.fail(g, ni, nodeFailure(fmt.Sprintf("lazy graph #%d", g.seq), &g.nodes[ni], err))
					return
				}
			}
			prog.finish(e, g, nodes)
			continue
		}
		var failed int
		var err error
		t0 := time.Now()
		if st.group == nil {
			failed, err = st.node, runBound(g, p, st.node)
		} else {
			failed, err = runGroup(g, p, st.group)
		}
		if opTimes != nil {
			opTimes.add(stepName(g, nodes), time.Since(t0))
		}
		if traceOn.Load() {
			cat := "Kernel"
			if len(nodes) > 1 {
				cat = "FusedKernel"
			}
			traceSpan(stepName(g, nodes), cat, "graph worker", t0, int64(g.seq), len(nodes))
		}
		if err != nil {
			e.fail(g, nodes[0], nodeFailure(fmt.Sprintf("lazy graph #%d", g.seq), &g.nodes[failed], err))
			return
		}
		prog.finish(e, g, nodes)
	}
}

// runProgress tracks which nodes of the graph being run are done (run, by streaming or
// the plan, or removed as dead) and publishes the first that is not (engine.progress),
// so that a host read of a value the graph produced early returns before the rest runs.
type runProgress struct {
	done []bool
	pos  int
}

func newProgress(g *graph, p *plan) *runProgress {
	if g.run == nil {
		g.run = &runScratch{}
	}
	r := &g.run.prog // a recycled graph (a recipe replay) reuses it
	if cap(r.done) < len(g.nodes) {
		r.done = make([]bool, len(g.nodes))
	}
	r.done, r.pos = r.done[:len(g.nodes)], 0
	clear(r.done)
	for i := range min(g.done, len(g.nodes)) {
		r.done[i] = true
	}
	for _, i := range p.removed {
		r.done[i] = true
	}
	r.advance()
	return r
}

func (r *runProgress) advance() {
	for r.pos < len(r.done) && r.done[r.pos] {
		r.pos++
	}
}

// finish marks a plan step's nodes done and publishes the new position if it moved.
func (r *runProgress) finish(e *engine, g *graph, nodes []int) {
	old := r.pos
	for _, n := range nodes {
		r.done[n] = true
	}
	r.advance()
	if r.pos != old {
		e.progress(g.seq, r.pos)
	}
}

// poisonedIn returns the graph's storages that a failed graph poisoned (nil when none).
func (e *engine) poisonedIn(g *graph) map[int32]error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var m map[int32]error
	for i, s := range g.stos {
		if s.poison != nil {
			if m == nil {
				m = map[int32]error{}
			}
			m[int32(i)] = s.poison
		}
	}
	return m
}

// recovered turns a kernel panic into an error: a failed graph must not kill the worker.
func recovered(err *error) {
	if r := recover(); r != nil {
		if kp, ok := r.(kernels.KernelPanic); ok {
			*err = kp
		} else {
			*err = fmt.Errorf("kernel panic: %v", r)
		}
	}
}

func runNode(n *node) (err error) {
	defer recovered(&err)
	c := Call{T: make([]kernels.Tensor, len(n.args)), I: n.ints, F: n.fl}
	for i, a := range n.args {
		c.T[i] = a.t
	}
	return n.op.Run(&c)
}

// runBound runs node ni with its operands bound as the plan runs them (reuse buffers).
func runBound(g *graph, p *plan, ni int) (err error) {
	n := &g.nodes[ni]
	defer recovered(&err)
	c := g.scratchCall(n)
	for i, a := range n.args {
		c.T[i] = a.t
		if g.reuse {
			c.T[i] = bound(g, p, a)
		}
	}
	return n.op.Run(c)
}

// scratchCall is the graph's reusable Call for node n (a graph runs one node at a time):
// a replay of a recipe allocates no Call per node.
func (g *graph) scratchCall(n *node) *Call {
	if g.run == nil {
		g.run = &runScratch{}
	}
	if cap(g.run.t) < len(n.args) {
		g.run.t = make([]kernels.Tensor, len(n.args))
	}
	g.run.call = Call{T: g.run.t[:len(n.args)], I: n.ints, F: n.fl}
	return &g.run.call
}

// runScratch holds what running a graph's steps needs, reused from step to step.
type runScratch struct {
	call  Call
	t     []kernels.Tensor
	ops   []kernels.FusedOperand
	steps []kernels.FusedStep
	pad   [][4]float64
	prog  runProgress
	// fused, for a graph that runs many times (a recipe's), keeps each fused loop's
	// set-up between runs; nil for a lazy graph that runs once.
	fused map[*fusedGroup]*kernels.FusedScratch
}

func runGroup(g *graph, p *plan, fg *fusedGroup) (failed int, err error) {
	failed = fg.nodes[0]
	defer recovered(&err)
	if g.run == nil {
		g.run = &runScratch{}
	}
	sc := g.run
	if cap(sc.ops) < len(fg.reps) {
		sc.ops = make([]kernels.FusedOperand, len(fg.reps))
	}
	if cap(sc.steps) < len(fg.steps) {
		sc.steps = make([]kernels.FusedStep, len(fg.steps))
		sc.pad = make([][4]float64, len(fg.steps))
	}
	ops, steps := sc.ops[:len(fg.reps)], sc.steps[:len(fg.steps)]
	for k, r := range fg.reps {
		ops[k] = kernels.FusedOperand{T: bound(g, p, g.nodes[r[0]].args[r[1]]), Virtual: fg.virtual[k]}
	}
	for k, s := range fg.steps {
		n := &g.nodes[fg.nodes[k]]
		fl := n.fl
		if len(fl) < 4 { // FusedElementwise pads to 4 parameters: here, without allocating
			sc.pad[k] = [4]float64{}
			copy(sc.pad[k][:], fl)
			fl = sc.pad[k][:]
		}
		steps[k] = kernels.FusedStep{Op: s.op, CDT: kernels.DType(n.ints[0]), Out: s.out, Ins: s.ins, P: fl}
	}
	sizes := g.nodes[fg.nodes[0]].args[0].t.Sizes
	var k int
	if sc.fused != nil {
		// A recipe's bound graph runs again and again: its loops keep their set-up.
		fs := sc.fused[fg]
		if fs == nil {
			fs = &kernels.FusedScratch{}
			sc.fused[fg] = fs
		}
		k, err = kernels.FusedElementwiseScratch(fs, sizes, ops, steps)
	} else {
		k, err = kernels.FusedElementwise(sizes, ops, steps)
	}
	if err != nil && k >= 0 {
		failed = fg.nodes[k]
	}
	return failed, err
}

// stepName names a plan step for the op timer: the op, or "fused(op+op+…)".
func stepName(g *graph, nodes []int) string {
	if len(nodes) == 1 {
		return g.nodes[nodes[0]].op.Name
	}
	names := make([]string, len(nodes))
	for i, ni := range nodes {
		names[i] = g.nodes[ni].op.Name
	}
	return "fused(" + strings.Join(names, "+") + ")"
}
