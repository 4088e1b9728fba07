package kernels

import (
	"fmt"
	"sync"
	"unsafe"
)

// FusedScratch keeps a fused loop's set-up from call to call over operands laid out
// alike, as an HPU-graph replay runs the same loops over new addresses: the coalesced
// layout, the operand tables and each worker's scratch. With it a call allocates nothing
// once the first has run (FusedElementwise allocates all of it per call). One scratch
// serves one loop at a time.
type FusedScratch struct {
	sig       []int64 // per step (dtype, inputs, output), sizes, per operand (virtual, dtype, strides)
	real      []int
	dts       []DType
	strides   [][]int64
	es        []int
	bases     []unsafe.Pointer
	inner     []int64 // byte strides along the row
	l         layout
	chunk     int64
	cacheable []bool // of the current call
	workerBC  []bool // what the pooled workers were made for
	written   []bool

	mu   sync.Mutex
	free []*fusedWorker

	// The call being run, for the part functions (made once: no closure per call).
	ops          []FusedOperand
	steps        []FusedStep
	part1, partN func(lo, hi int64)
}

// FusedElementwiseScratch is FusedElementwise keeping its set-up in sc between calls.
func FusedElementwiseScratch(sc *FusedScratch, sizes []int64, ops []FusedOperand, steps []FusedStep) (int, error) {
	if k, err := checkSteps(steps); err != nil {
		return k, err
	}
	if !sc.matches(sizes, ops, steps) {
		if err := sc.setup(sizes, ops, steps); err != nil {
			return 0, err
		}
	}
	if len(sc.bases) == 0 {
		return 0, nil
	}
	for i, o := range ops {
		if r := sc.real[i]; r >= 0 {
			if o.T.Ptr == nil && o.T.Numel() > 0 {
				return 0, fmt.Errorf("fused operand %d: null data pointer for a tensor of %d elements", i, o.T.Numel())
			}
			sc.bases[r] = o.T.Ptr
		}
	}
	// Which float32 operands may be filled once per row element depends on the addresses.
	sc.markCacheable(ops, steps)
	if !boolsEqual(sc.cacheable, sc.workerBC) {
		sc.dropWorkers()
		sc.workerBC = append(sc.workerBC[:0], sc.cacheable...)
	}
	sc.ops, sc.steps = ops, steps
	if sc.part1 == nil {
		sc.part1, sc.partN = sc.runPart1, sc.runPartN
	}
	d := len(sc.l.sizes)
	inner := sc.l.sizes[d-1]
	rows := int64(1)
	for _, s := range sc.l.sizes[:d-1] {
		rows *= s
	}
	if rows*inner != 0 {
		if rows == 1 {
			ParallelFor(inner, 1, sc.part1)
		} else {
			ParallelFor(rows, inner, sc.partN)
		}
	}
	sc.ops, sc.steps = nil, nil
	return -1, nil
}

// checkSteps is FusedElementwise's validation of the steps (padding P to 4 parameters).
func checkSteps(steps []FusedStep) (int, error) {
	for k, st := range steps {
		if len(st.Ins) != st.Op.NIn || !st.CDT.Valid() {
			return k, fmt.Errorf("%s: invalid fused step", st.Op.Name)
		}
		ok := false
		switch classOf(st.CDT) {
		case classF32:
			ok = st.Op.F32 != nil
		case classF64:
			ok = st.Op.F64 != nil
		default:
			ok = st.Op.I64 != nil
		}
		if !ok {
			return k, fmt.Errorf("%s: %v not supported", st.Op.Name, st.CDT)
		}
		if len(st.P) < 4 {
			steps[k].P = append(append([]float64(nil), st.P...), make([]float64, 4-len(st.P))...)
		}
	}
	return -1, nil
}

// matches reports whether the set-up in sc was made for these sizes and operand layouts.
func (sc *FusedScratch) matches(sizes []int64, ops []FusedOperand, steps []FusedStep) bool {
	w := sc.sig
	if len(w) < 1+3*len(steps) || w[0] != int64(len(steps)) {
		return false
	}
	for k, st := range steps {
		if w[1+3*k] != int64(st.CDT) || w[2+3*k] != int64(len(st.Ins)) || w[3+3*k] != int64(st.Out) {
			return false
		}
	}
	w = w[1+3*len(steps):]
	if len(w) < 2+len(sizes) || w[0] != int64(len(sizes)) || w[1] != int64(len(ops)) {
		return false
	}
	w = w[2:]
	for _, s := range sizes {
		if w[0] != s {
			return false
		}
		w = w[1:]
	}
	for _, o := range ops {
		v := int64(0)
		if o.Virtual {
			v = 1
		}
		if len(w) < 3 || w[0] != v || w[1] != int64(o.T.DType) || w[2] != int64(len(o.T.Strides)) ||
			len(o.T.Sizes) != len(sizes) {
			return false
		}
		w = w[3:]
		if len(w) < len(o.T.Strides) {
			return false
		}
		for d, s := range o.T.Strides {
			if w[d] != s || o.T.Sizes[d] != sizes[d] {
				return false
			}
		}
		w = w[len(o.T.Strides):]
	}
	return len(w) == 0
}

// setup makes the set-up for these sizes and operands (FusedElementwise's, kept).
func (sc *FusedScratch) setup(sizes []int64, ops []FusedOperand, steps []FusedStep) error {
	sc.dropWorkers()
	sc.sig = sc.sig[:0]
	sc.real, sc.dts, sc.strides, sc.es, sc.bases = nil, nil, nil, nil, nil
	real := make([]int, len(ops))
	dts := make([]DType, len(ops))
	var strides [][]int64
	var es []int
	var bases []unsafe.Pointer
	for i, o := range ops {
		dts[i] = o.T.DType
		if o.Virtual {
			real[i] = -1
			continue
		}
		if err := o.T.Validate(); err != nil {
			return fmt.Errorf("fused operand %d: %v", i, err)
		}
		if !sameShape(o.T.Sizes, sizes) {
			return fmt.Errorf("fused operand %d has shape %v, loop %v", i, o.T.Sizes, sizes)
		}
		real[i] = len(bases)
		strides = append(strides, append([]int64(nil), o.T.Strides...))
		es = append(es, o.T.DType.Size())
		bases = append(bases, o.T.Ptr)
	}
	sc.real, sc.dts, sc.strides, sc.es, sc.bases = real, dts, strides, es, bases
	if len(bases) > 0 {
		sc.l = newLayout(sizes, strides, es)
		d := len(sc.l.sizes)
		sc.inner = make([]int64, len(bases))
		for op := range sc.inner {
			sc.inner[op] = sc.l.strides[op][d-1]
		}
		sc.chunk = max(min(int64(ewChunk), sc.l.sizes[d-1]), 1)
	}
	sc.cacheable = make([]bool, len(ops))
	sc.written = make([]bool, len(ops))
	sc.workerBC = nil
	sig := append(sc.sig, int64(len(steps)))
	for _, st := range steps {
		sig = append(sig, int64(st.CDT), int64(len(st.Ins)), int64(st.Out))
	}
	sig = append(sig, int64(len(sizes)), int64(len(ops)))
	sig = append(sig, sizes...)
	for _, o := range ops {
		v := int64(0)
		if o.Virtual {
			v = 1
		}
		sig = append(sig, v, int64(o.T.DType), int64(len(o.T.Strides)))
		sig = append(sig, o.T.Strides...)
	}
	sc.sig = sig
	return nil
}

// markCacheable is broadcastCacheable into sc's tables.
func (sc *FusedScratch) markCacheable(ops []FusedOperand, steps []FusedStep) {
	clear(sc.written)
	for _, st := range steps {
		sc.written[st.Out] = true
	}
	for x, o := range ops {
		sc.cacheable[x] = false
		if o.Virtual || sc.written[x] || o.T.DType != Float32 {
			continue
		}
		lo, hi := memSpan(o.T)
		sc.cacheable[x] = true
		for y, w := range ops {
			if sc.written[y] && !w.Virtual {
				if wl, wh := memSpan(w.T); wl < hi && lo < wh {
					sc.cacheable[x] = false
					break
				}
			}
		}
	}
}

func boolsEqual(a, b []bool) bool {
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

// worker takes a pooled worker (or makes one) for a part of the current call.
func (sc *FusedScratch) worker() *fusedWorker {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if n := len(sc.free); n > 0 {
		w := sc.free[n-1]
		sc.free = sc.free[:n-1]
		for x, b := range w.bc32 {
			if b != nil {
				w.bc32[x] = b[:0] // filled for another call's data: refill
			}
		}
		return w
	}
	w := newFusedWorker(sc.ops, sc.steps, int(sc.chunk), sc.cacheable)
	d := len(sc.l.sizes)
	w.idx = make([]int64, d-1)
	w.offs = make([]int64, len(sc.bases))
	w.ptrs = make([]unsafe.Pointer, len(sc.bases))
	return w
}

func (sc *FusedScratch) putWorker(w *fusedWorker) {
	sc.mu.Lock()
	sc.free = append(sc.free, w)
	sc.mu.Unlock()
}

// dropWorkers returns the pooled workers' buffers (the set-up changed).
func (sc *FusedScratch) dropWorkers() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, w := range sc.free {
		if w.slab != nil {
			putF32(w.slab)
		}
	}
	sc.free = sc.free[:0]
}

// row runs every step over one row of n elements, chunk by chunk.
func (sc *FusedScratch) row(w *fusedWorker, ptrs []unsafe.Pointer, n int64) {
	steps, real, dts, s := sc.steps, sc.real, sc.dts, sc.inner
	for lo := int64(0); lo < n; lo += sc.chunk {
		m := min(sc.chunk, n-lo)
		for k := range steps {
			w.step(&steps[k], ptrs, s, real, dts, lo, m)
		}
	}
}

// runPart1 runs elements [lo, hi) of a layout that is one row.
func (sc *FusedScratch) runPart1(lo, hi int64) {
	w := sc.worker()
	for op := range w.ptrs {
		w.ptrs[op] = at(sc.bases[op], lo*sc.inner[op])
	}
	sc.row(w, w.ptrs, hi-lo)
	sc.putWorker(w)
}

// runPartN runs rows [lo, hi) (layout.runPer's walk over the outer dimensions).
func (sc *FusedScratch) runPartN(lo, hi int64) {
	w := sc.worker()
	l := sc.l
	d := len(l.sizes)
	inner := l.sizes[d-1]
	idx, offs, ptrs := w.idx, w.offs, w.ptrs
	rem := lo
	for k := d - 2; k >= 0; k-- {
		idx[k] = rem % l.sizes[k]
		rem /= l.sizes[k]
	}
	for op := range offs {
		offs[op] = 0
		for k := 0; k < d-1; k++ {
			offs[op] += idx[k] * l.strides[op][k]
		}
	}
	for r := lo; r < hi; r++ {
		for op := range ptrs {
			ptrs[op] = at(sc.bases[op], offs[op])
		}
		sc.row(w, ptrs, inner)
		for k := d - 2; k >= 0; k-- {
			idx[k]++
			for op := range offs {
				offs[op] += l.strides[op][k]
			}
			if idx[k] < l.sizes[k] {
				break
			}
			for op := range offs {
				offs[op] -= idx[k] * l.strides[op][k]
			}
			idx[k] = 0
		}
	}
	sc.putWorker(w)
}
