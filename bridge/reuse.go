package bridge

import (
	"os"
	"strings"
	"unsafe"

	"hpusim/kernels"
)

// In-place buffer reuse.
//
// Outputs get their storage when an op is recorded (the Python lowering allocates an hpu
// tensor per result), so every intermediate of a lazy graph has an allocation of its own.
// A storage is internal to a graph when the program released it before the launch (dead)
// and its first access in the kept plan is an op that writes it densely as a pure output
// (an elementwise op, or one listed in effects.go's writeOnlyOps) without also reading
// it, every later access staying inside that write: its contents before
// and after the graph are irrelevant. Such a storage need not exist at its own address.
// Compile scans the plan in program order and assigns it the buffer of a dead storage
// that nothing uses any more (a pool of the graph's free buffers, best fit by size, most
// recently freed first), which includes an input of the producing elementwise op that
// dies there (in place). At run time its operands are bound into that buffer, so its own
// allocation is never touched and is released at launch rather than after the run.
//
// Hazards, on the storage that is really touched: intermediates that fusion keeps in
// per-chunk scratch are left alone; two storages sharing a buffer may meet inside one
// plan step (a fused loop or a single elementwise op) only through identical views, so
// chunk k only sees chunk k as in fusion's own analysis; a non-elementwise op never writes
// a buffer it reads. The plan's steps are the same with and without the reuse, so a graph
// whose prefix was already run by streaming (at the storages' own addresses) reuses
// buffers only for the storages first written after that prefix.

// reuseOff (HPUSIM_LAZY_REUSE=0) disables the pass: a debugging and measuring aid.
var reuseOff = strings.TrimSpace(os.Getenv("HPUSIM_LAZY_REUSE")) == "0"

type access struct{ node, arg int }

func planReuse(g *graph, keep []int, p *plan) {
	ns := len(g.stos)
	if reuseOff || ns == 0 {
		return
	}
	stepOf := make(map[int]int, len(keep))
	virtual := make([]bool, ns)
	for k, st := range p.steps {
		if st.group == nil {
			stepOf[st.node] = k
			continue
		}
		for _, ni := range st.group.nodes {
			stepOf[ni] = k
		}
		for u, r := range st.group.reps {
			if a := g.nodes[r[0]].args[r[1]]; st.group.virtual[u] && a.sto >= 0 {
				virtual[a.sto] = true
			}
		}
	}
	accs := make([][]access, ns)
	for _, i := range keep {
		for j, a := range g.nodes[i].args {
			if a.sto >= 0 {
				accs[a.sto] = append(accs[a.sto], access{i, j})
			}
		}
	}
	first := func(s int) int {
		if len(accs[s]) == 0 {
			return -1
		}
		return accs[s][0].node
	}
	last := func(s int) int {
		if len(accs[s]) == 0 {
			return -1
		}
		return accs[s][len(accs[s])-1].node
	}
	internal := make([]bool, ns)
	for s := range internal {
		internal[s] = g.dead[s] && !virtual[s] && isInternal(g, accs[s])
	}

	remap := make([]int32, ns)
	busy := make([]int, ns) // per buffer: last node index that uses it
	members := make([][]int32, ns)
	for s := range remap {
		remap[s] = -1
		busy[s] = last(s)
		members[s] = []int32{int32(s)}
	}
	// view is an access as bound at run time: its operand moved into buffer b.
	view := func(x access, b int32) operand {
		a := g.nodes[x.node].args[x.arg]
		a.sto = b
		return a
	}
	// fits reports whether x's accesses can share buffer b with b's current members.
	fits := func(x int, b int32) bool {
		for _, m := range members[b] {
			for _, ax := range accs[x] {
				for _, am := range accs[m] {
					if stepOf[ax.node] != stepOf[am.node] {
						continue
					}
					if ax.node == am.node && ewOpOf(&g.nodes[ax.node]) == nil {
						return false
					}
					va, vm := view(ax, b), view(am, b)
					if overlaps(va, vm) && !sameView(va, vm) {
						return false
					}
				}
			}
		}
		return true
	}
	assign := func(i, x int) {
		best := int32(-1)
		for b := range g.stos {
			if b == x || remap[b] >= 0 || !g.dead[b] || g.stos[b].size < g.stos[x].size ||
				busy[b] > i || (first(b) > i) {
				continue
			}
			if best >= 0 {
				bs, cs := g.stos[best].size, g.stos[b].size
				if cs > bs || (cs == bs && busy[b] <= busy[best]) {
					continue
				}
			}
			if fits(x, int32(b)) {
				best = int32(b)
			}
		}
		if best < 0 {
			return
		}
		remap[x] = best
		members[best] = append(members[best], int32(x))
		busy[best] = max(busy[best], last(x))
		p.elided = append(p.elided, int32(x))
		p.reusedBytes += g.stos[x].size
	}
	for _, i := range keep {
		n := &g.nodes[i]
		if !n.eff.writeOnly {
			continue
		}
		for _, w := range n.eff.writes {
			if w >= len(n.args) || n.args[w].sto < 0 {
				continue
			}
			if x := int(n.args[w].sto); internal[x] && first(x) == i {
				assign(i, x)
			}
		}
	}
	if len(p.elided) > 0 {
		p.remap = remap
		p.firstUse = make([]int, ns)
		for s := range p.firstUse {
			p.firstUse[s] = first(s)
		}
	}
}

// isInternal: the storage's first access writes it densely as a pure output of an op that
// does not also read it, and every access stays inside that write.
func isInternal(g *graph, accs []access) bool {
	if len(accs) == 0 {
		return false
	}
	w := accs[0]
	n := &g.nodes[w.node]
	if !n.eff.writeOnly || !n.eff.writesOp(w.arg) || (n.eff.elementwise && ewOpOf(n) == nil) {
		return false
	}
	for _, a := range accs[1:] {
		if a.node == w.node {
			return false // also an input of its producer: its old contents are read
		}
	}
	out := n.args[w.arg]
	lo, hi := out.extent()
	if hi-lo != out.t.Numel()*int64(out.t.DType.Size()) {
		return false // not dense: the write leaves holes a later read could see
	}
	for _, a := range accs[1:] {
		l, h := g.nodes[a.node].args[a.arg].extent()
		if l < lo || h > hi {
			return false
		}
	}
	return true
}

// bound is operand a as it runs: moved into its reuse buffer when the graph runs with
// the plan's reuse and the storage is first written after the streamed prefix. (A
// storage written in the prefix lives at its own address for the whole run; that only
// leaves its buffer-mate more room.)
func bound(g *graph, p *plan, a operand) kernels.Tensor {
	t := a.t
	if g.reuse && a.sto >= 0 {
		if b := p.remap[a.sto]; b >= 0 && p.firstUse[a.sto] >= g.reuseFrom {
			t.Ptr = unsafe.Add(g.stos[b].ptr, a.off)
		}
	}
	return t
}
