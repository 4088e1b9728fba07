package bridge

import (
	"os"
	"strings"

	"hpusim/kernels"
)

// Compilation of a lazy graph into a plan: dead-code removal, then fusion of runs of
// elementwise ops into single-pass loops whose dead intermediates never reach memory.
// A plan refers to nodes and operands by index only, so it replays any graph with the
// same canonical form (the new graph's addresses and scalars are bound at run time).

type fusedStep struct {
	op  *kernels.EWOp
	out int   // unique-operand index
	ins []int // unique-operand indices
}

type fusedGroup struct {
	nodes   []int    // node indices, program order
	reps    [][2]int // per unique operand: a (node, arg) that names it
	virtual []bool   // per unique operand: lives only in per-chunk scratch
	steps   []fusedStep
}

type planStep struct {
	node  int         // a single node, when group is nil
	group *fusedGroup // a fused run of elementwise nodes
}

type plan struct {
	steps    []planStep
	removed  []int // nodes removed as dead
	fused    int   // nodes inside fused groups
	virtuals int   // intermediates never materialised

	// In-place buffer reuse (reuse.go): per storage ordinal, the ordinal whose buffer it
	// runs in (-1: its own); nil when nothing is reused.
	remap       []int32
	elided      []int32 // storages bound into another's buffer, never touched
	firstUse    []int   // per storage ordinal: first kept node that accesses it
	reusedBytes int64
}

// maxFusedNodes bounds a fused loop (its per-worker scratch grows with it).
const maxFusedNodes = 64

// fusionOff (HPUSIM_LAZY_FUSION=0) compiles every kept node as its own step: a debugging
// and measuring aid (the same graphs with and without fused loops).
var fusionOff = strings.TrimSpace(os.Getenv("HPUSIM_LAZY_FUSION")) == "0"

func compile(g *graph) *plan {
	p := &plan{}
	keep := deadCodeElimination(g, p)
	if fusionOff {
		for _, i := range keep {
			p.steps = append(p.steps, planStep{node: i})
		}
	} else {
		fuse(g, keep, p)
	}
	planReuse(g, keep, p)
	return p
}

// deadCodeElimination keeps a node only if it writes a storage that is still needed:
// alive after the graph, or read by a later kept node. Nodes with nothing to write (or
// with effects we do not model) are kept.
func deadCodeElimination(g *graph, p *plan) []int {
	needed := make([]bool, len(g.stos))
	for i := range needed {
		needed[i] = !g.dead[i]
	}
	kept := make([]bool, len(g.nodes))
	for i := len(g.nodes) - 1; i >= 0; i-- {
		n := &g.nodes[i]
		keepIt := len(n.eff.writes) == 0
		for _, w := range n.eff.writes {
			if w < len(n.args) && n.args[w].sto >= 0 && needed[n.args[w].sto] {
				keepIt = true
				break
			}
		}
		if !keepIt {
			continue
		}
		kept[i] = true
		for j, a := range n.args {
			if a.sto >= 0 && n.eff.reads(j) {
				needed[a.sto] = true
			}
		}
	}
	var keep []int
	for i, k := range kept {
		if k {
			keep = append(keep, i)
		} else {
			p.removed = append(p.removed, i)
		}
	}
	return keep
}

func ewOpOf(n *node) *kernels.EWOp {
	if !n.eff.elementwise || len(n.ints) < 1 || len(n.args) == 0 {
		return nil
	}
	op := kernels.EWOps[strings.TrimPrefix(n.op.Name, "ew.")]
	if op == nil || op.NIn != len(n.args)-1 || n.args[0].t.Numel() == 0 || len(n.args[0].t.Sizes) == 0 {
		return nil
	}
	return op
}

// selfSafe: the node's output either is exactly one of its inputs' views or shares no
// memory with them (what the elementwise kernel itself supports).
func selfSafe(n *node) bool {
	out := n.args[0]
	for _, a := range n.args[1:] {
		if overlaps(out, a) && !sameView(out, a) {
			return false
		}
	}
	return true
}

// compatible reports whether node b can join a fused group: every pair of accesses to
// overlapping memory where either side writes must be the identical view, so chunk k of
// b only ever sees chunk k of the group's earlier nodes (read/write hazard analysis).
func compatible(g *graph, group []int, b *node) bool {
	if len(group) >= maxFusedNodes {
		return false
	}
	first := &g.nodes[group[0]]
	if !sameSizes(first.args[0].t.Sizes, b.args[0].t.Sizes) {
		return false
	}
	for _, ai := range group {
		a := &g.nodes[ai]
		for i, x := range a.args {
			for j, y := range b.args {
				if (i == 0 || j == 0) && overlaps(x, y) && !sameView(x, y) {
					return false
				}
			}
		}
	}
	return true
}

func sameSizes(a, b []int64) bool {
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

// classDType is the dtype whose values equal the compute class's values (an intermediate
// of that dtype can stay in the class's scratch without changing any result).
func classDType(cdt kernels.DType) kernels.DType {
	switch {
	case cdt == kernels.Float64:
		return kernels.Float64
	case cdt.IsFloat():
		return kernels.Float32
	default:
		return kernels.Int64
	}
}

func fuse(g *graph, keep []int, p *plan) {
	// Accesses per storage among kept nodes, to know which intermediates are confined.
	uses := make([]int, len(g.stos))
	for _, i := range keep {
		for _, a := range g.nodes[i].args {
			if a.sto >= 0 {
				uses[a.sto]++
			}
		}
	}
	var group []int
	flushGroup := func() {
		switch len(group) {
		case 0:
		case 1:
			p.steps = append(p.steps, planStep{node: group[0]})
		default:
			p.steps = append(p.steps, planStep{node: -1, group: buildGroup(g, group, uses, p)})
			p.fused += len(group)
		}
		group = nil
	}
	for _, i := range keep {
		n := &g.nodes[i]
		if ewOpOf(n) == nil || !selfSafe(n) {
			flushGroup()
			p.steps = append(p.steps, planStep{node: i})
			continue
		}
		if len(group) > 0 && !compatible(g, group, n) {
			flushGroup()
		}
		group = append(group, i)
	}
	flushGroup()
}

// buildGroup names the group's distinct operand views and marks the intermediates that
// may stay virtual: dead after the graph, touched by nobody outside the group and always
// through this one view, first written inside the group, and of their class's own dtype.
func buildGroup(g *graph, nodes []int, uses []int, p *plan) *fusedGroup {
	fg := &fusedGroup{nodes: nodes}
	index := func(ni, ai int) int {
		a := g.nodes[ni].args[ai]
		for k, r := range fg.reps {
			b := g.nodes[r[0]].args[r[1]]
			if a.sto >= 0 && sameView(a, b) {
				return k
			}
		}
		fg.reps = append(fg.reps, [2]int{ni, ai})
		return len(fg.reps) - 1
	}
	count := map[int]int{} // unique operand -> accesses inside the group
	class := map[int]kernels.DType{}
	mixed := map[int]bool{}
	written := map[int]bool{}
	readFirst := map[int]bool{}
	for _, ni := range nodes {
		n := &g.nodes[ni]
		cls := classDType(kernels.DType(n.ints[0]))
		st := fusedStep{op: ewOpOf(n)}
		for ai := range n.args {
			k := index(ni, ai)
			count[k]++
			if c, ok := class[k]; ok && c != cls {
				mixed[k] = true
			}
			class[k] = cls
			if ai == 0 {
				st.out = k
				written[k] = true
			} else {
				st.ins = append(st.ins, k)
				if !written[k] {
					readFirst[k] = true
				}
			}
		}
		fg.steps = append(fg.steps, st)
	}
	fg.virtual = make([]bool, len(fg.reps))
	for k, r := range fg.reps {
		a := g.nodes[r[0]].args[r[1]]
		if a.sto < 0 || !g.dead[a.sto] || uses[a.sto] != count[k] || !written[k] || readFirst[k] ||
			mixed[k] || a.t.DType != class[k] {
			continue
		}
		fg.virtual[k] = true
		p.virtuals++
	}
	return fg
}
