package bridge

import (
	"encoding/binary"
	"hash/fnv"
	"sync/atomic"

	"hpusim/kernels"
)

// A lazy graph: the ops recorded between two triggers, in program order, over device
// storages identified by ordinal (order of first use), so two graphs with the same
// structure have the same canonical form whatever their addresses and data.

// Operand storage markers besides an ordinal >= 0.
const (
	noStorage = -1 // a tensor with no elements: no memory is touched
	hostSnap  = -2 // a host source captured at record time (H2D copy)
)

type operand struct {
	t   kernels.Tensor
	sto int32 // storage ordinal, noStorage or hostSnap
	off int64 // byte offset of t.Ptr from the storage base
}

type node struct {
	op    *Op
	eff   effect
	args  []operand
	ints  []int64
	fl    []float64
	snap  [][]byte // the host bytes of hostSnap operands, kept alive until the graph ran
	label string   // Call.Label: how a failure of the node is reported (NodeError)
}

type graph struct {
	nodes  []node
	stos   []*storage        // by ordinal
	ord    map[uintptr]int32 // storage base -> ordinal
	dead   []bool            // per ordinal: released by the program before the graph was launched
	seq    uint64            // launch number
	reason string            // what triggered the launch (for logs and dumps)
	// launched is seq for the worker's streaming loop, which may still be running the
	// graph's prefix when the host launches it (seq is guarded by engine.mu).
	launched atomic.Uint64

	// Streaming: while the graph is still being recorded and the worker has nothing
	// launched to run, it runs the recorded prefix node by node (see engine.streamSome).
	taken     int   // nodes handed to the worker (guarded by engine.mu)
	done      int   // nodes already run by streaming (worker only)
	streamErr error // a streamed node's failure, raised when the graph runs (worker only)
	streamAt  int   // that node's index

	// reuse: the graph runs with its plan's buffer reuse for the storages first written at
	// or after node reuseFrom (the end of its streamed prefix); early marks the storages
	// released at launch for it (release skips them).
	reuse     bool
	reuseFrom int
	early     []bool

	run *runScratch // reused by runBound and runGroup (run.go)
}

func newGraph() *graph { return &graph{ord: map[uintptr]int32{}} }

// canonical serialises the structure: per storage (size, dead), per node the op, every
// operand's (ordinal, offset, dtype, sizes, strides) and the integer attributes (but
// those listed in dynamicInts, which are values like a random op's seed). Floating
// attributes contribute only their count: their values (alpha, a learning-rate step size
// that changes every optimizer step) are bound at launch like addresses, so they do not
// force a recompilation, as scalar inputs do not on Gaudi.
func (g *graph) canonical() []int64 {
	w := make([]int64, 0, 16*len(g.nodes)+2*len(g.stos)+2)
	w = append(w, int64(len(g.stos)))
	for i, s := range g.stos {
		d := int64(0)
		if g.dead[i] {
			d = 1
		}
		w = append(w, s.size, d)
	}
	w = append(w, int64(len(g.nodes)))
	for _, n := range g.nodes {
		w = append(w, int64(n.op.ID), int64(len(n.args)))
		for _, a := range n.args {
			w = append(w, int64(a.sto), a.off, int64(a.t.DType), int64(len(a.t.Sizes)))
			w = append(w, a.t.Sizes...)
			w = append(w, a.t.Strides...)
		}
		w = append(w, int64(len(n.ints)))
		for i, v := range n.ints {
			if i < 64 && n.eff.dynInts&(1<<i) != 0 {
				v = 0 // bound at launch
			}
			w = append(w, v)
		}
		w = append(w, int64(len(n.fl)))
	}
	return w
}

// hashWords is a stable 64-bit FNV-1a over the canonical words (little-endian).
func hashWords(w []int64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range w {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	return h.Sum64()
}

func equalWords(a, b []int64) bool {
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

// extent is the half-open byte range [lo, hi) an operand's view can touch within its storage.
func (a operand) extent() (lo, hi int64) {
	if a.t.Numel() == 0 {
		return a.off, a.off
	}
	lo, hi = a.off, a.off
	es := int64(a.t.DType.Size())
	for d, n := range a.t.Sizes {
		s := a.t.Strides[d] * es
		if s >= 0 {
			hi += (n - 1) * s
		} else {
			lo += (n - 1) * s
		}
	}
	return lo, hi + es
}

// sameView reports whether two operands address exactly the same elements in the same order.
func sameView(a, b operand) bool {
	if a.sto != b.sto || a.off != b.off || a.t.DType != b.t.DType || len(a.t.Sizes) != len(b.t.Sizes) {
		return false
	}
	for d := range a.t.Sizes {
		if a.t.Sizes[d] != b.t.Sizes[d] || (a.t.Sizes[d] > 1 && a.t.Strides[d] != b.t.Strides[d]) {
			return false
		}
	}
	return true
}

// overlaps reports whether two operands of the same storage may touch a common byte.
func overlaps(a, b operand) bool {
	if a.sto != b.sto || a.sto < 0 {
		return false
	}
	alo, ahi := a.extent()
	blo, bhi := b.extent()
	return alo < bhi && blo < ahi
}
