package kernels

import (
	"fmt"
	"sync"
	"unsafe"
)

// Fused elementwise loops for lazy graphs: a run of elementwise ops over one iteration
// space executes chunk by chunk, every op on the chunk before the next chunk, so the
// chunk's data stays in cache. Each op loads, computes and stores exactly as Elementwise
// does, so results are bitwise those of running the ops one by one. Virtual operands
// (dead intermediates) have no memory: they live in per-worker scratch of their class.

// FusedOperand is one distinct view used by the fused ops.
type FusedOperand struct {
	T       Tensor // sizes must equal the loop's; Ptr unused when Virtual
	Virtual bool
}

// FusedStep is one elementwise op: Out = Op(Ins...) computing in class CDT.
type FusedStep struct {
	Op  *EWOp
	CDT DType
	Out int
	Ins []int
	P   []float64
}

type ewClass int

const (
	classF32 ewClass = iota
	classF64
	classI64
)

func classOf(cdt DType) ewClass {
	switch {
	case cdt == Float64:
		return classF64
	case cdt.IsFloat():
		return classF32
	default:
		return classI64
	}
}

// FusedElementwise runs steps over sizes. On an invalid step it returns that step's index.
func FusedElementwise(sizes []int64, ops []FusedOperand, steps []FusedStep) (int, error) {
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
	real := make([]int, len(ops)) // operand -> position among memory operands
	var strides [][]int64
	var es []int
	var bases []unsafe.Pointer
	dts := make([]DType, len(ops))
	for i, o := range ops {
		dts[i] = o.T.DType
		if o.Virtual {
			real[i] = -1
			continue
		}
		if err := o.T.Validate(); err != nil {
			return 0, fmt.Errorf("fused operand %d: %v", i, err)
		}
		if !sameShape(o.T.Sizes, sizes) {
			return 0, fmt.Errorf("fused operand %d has shape %v, loop %v", i, o.T.Sizes, sizes)
		}
		real[i] = len(bases)
		strides = append(strides, o.T.Strides)
		es = append(es, o.T.DType.Size())
		bases = append(bases, o.T.Ptr)
	}
	if len(bases) == 0 {
		return 0, nil
	}
	l := newLayout(sizes, strides, es)
	cacheable := broadcastCacheable(ops, steps)
	var mu sync.Mutex
	var workers []*fusedWorker // their pooled scratch goes back after the loop
	// Rows are at most the layout's inner extent long: a small tensor (an optimizer step
	// over biases) gets scratch of its own size, not ewChunk per buffer.
	chunk := int64(ewChunk)
	if len(l.sizes) > 0 {
		chunk = max(min(chunk, l.sizes[len(l.sizes)-1]), 1)
	}
	// Split cost: one unit per element whatever the step count. The steps are vectorized C
	// loops of a fraction of a nanosecond per element, and a split pays a helper's wake-up
	// (tens of µs here): a 4608-element optimizer step ran 7x slower split.
	l.runPer(bases, 1, func() rowFunc {
		w := newFusedWorker(ops, steps, int(chunk), cacheable)
		mu.Lock()
		workers = append(workers, w)
		mu.Unlock()
		return func(ptrs []unsafe.Pointer, s []int64, n int64) {
			for lo := int64(0); lo < n; lo += chunk {
				m := min(chunk, n-lo)
				for k := range steps {
					w.step(&steps[k], ptrs, s, real, dts, lo, m)
				}
			}
		}
	})
	for _, w := range workers {
		if w.slab != nil { // nil when no step computes in float32
			putF32(w.slab)
		}
	}
	return -1, nil
}

func sameShape(a, b []int64) bool {
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

// fusedWorker is one worker's scratch: input and output buffers of each class shared by
// every step (a step's inputs are consumed before the next step loads), and per virtual
// operand its values for the current chunk (indexed by operand).
type fusedWorker struct {
	in32  [][]float32
	in64  [][]float64
	inI   [][]int64
	out32 []float32
	out64 []float64
	outI  []int64
	v32   [][]float32
	v64   [][]float64
	vI    [][]int64
	a32   [][]float32
	a64   [][]float64
	aI    [][]int64
	tmp   []float64
	fb    []float64
	// bc32[x] holds float32 operand x broadcast along the row (inner stride 0) as filled for
	// the element at bcAt[x]: refilled only when the row moves to another element.
	bc32  [][]float32
	bcAt  []unsafe.Pointer
	chunk int
	slab  *[]float32 // pooled backing of the float32 buffers
	// A FusedScratch's worker: its walk over the outer dimensions.
	idx, offs []int64
	ptrs      []unsafe.Pointer
}

// broadcastCacheable marks the float32 operands whose values no step of the loop can
// change: not an output of any step, and sharing no memory with one. Only those may be
// filled once per row element (fusedWorker.broadcast32); in a one-element loop every
// operand has stride 0, written ones included.
func broadcastCacheable(ops []FusedOperand, steps []FusedStep) []bool {
	written := make([]bool, len(ops))
	for _, st := range steps {
		written[st.Out] = true
	}
	ok := make([]bool, len(ops))
	for x, o := range ops {
		if o.Virtual || written[x] || o.T.DType != Float32 {
			continue
		}
		lo, hi := memSpan(o.T)
		ok[x] = true
		for y, w := range ops {
			if written[y] && !w.Virtual {
				if wl, wh := memSpan(w.T); wl < hi && lo < wh {
					ok[x] = false
					break
				}
			}
		}
	}
	return ok
}

// memSpan is the byte range [lo, hi) a view can touch.
func memSpan(t Tensor) (uintptr, uintptr) {
	lo, hi := uintptr(t.Ptr), uintptr(t.Ptr)
	es := int64(t.DType.Size())
	for d, n := range t.Sizes {
		if n == 0 {
			return lo, lo
		}
		off := (n - 1) * t.Strides[d] * es
		if off < 0 {
			lo -= uintptr(-off)
		} else {
			hi += uintptr(off)
		}
	}
	return lo, hi + uintptr(es)
}

func newFusedWorker(ops []FusedOperand, steps []FusedStep, chunk int, cacheable []bool) *fusedWorker {
	w := &fusedWorker{v32: make([][]float32, len(ops)), v64: make([][]float64, len(ops)), vI: make([][]int64, len(ops)),
		bc32: make([][]float32, len(ops)), bcAt: make([]unsafe.Pointer, len(ops)), chunk: chunk}
	// float32 buffers (the common class) are carved from one pooled slab: a fused call per
	// optimizer parameter would otherwise allocate and zero them every time.
	var n32, n64, nI, f32Bufs int
	virt32 := make([]bool, len(ops))
	for _, st := range steps {
		switch classOf(st.CDT) {
		case classF32:
			n32 = max(n32, len(st.Ins))
			if ops[st.Out].Virtual {
				virt32[st.Out] = true
			}
			for _, x := range st.Ins {
				if cacheable[x] {
					w.bc32[x] = []float32{} // a broadcast operand: gets a buffer below
				}
			}
		case classF64:
			n64 = max(n64, len(st.Ins))
			if w.out64 == nil {
				w.out64 = make([]float64, chunk)
			}
			if ops[st.Out].Virtual && w.v64[st.Out] == nil {
				w.v64[st.Out] = make([]float64, chunk)
			}
		default:
			nI = max(nI, len(st.Ins))
			if w.outI == nil {
				w.outI = make([]int64, chunk)
				w.fb = make([]float64, chunk)
			}
			if ops[st.Out].Virtual && w.vI[st.Out] == nil {
				w.vI[st.Out] = make([]int64, chunk)
			}
		}
	}
	if n32 > 0 {
		f32Bufs = n32 + 1
		for x := range ops {
			if virt32[x] {
				f32Bufs++
			}
			if w.bc32[x] != nil {
				f32Bufs++
			}
		}
		w.slab = getF32(f32Bufs * chunk)
		off := 0
		next := func() []float32 {
			b := (*w.slab)[off : off+chunk : off+chunk]
			off += chunk
			return b
		}
		w.out32 = next()
		w.in32, w.a32 = make([][]float32, n32), make([][]float32, n32)
		for j := range w.in32 {
			w.in32[j] = next()
		}
		for x := range ops {
			if virt32[x] {
				w.v32[x] = next()
			}
			if w.bc32[x] != nil {
				w.bc32[x] = next()[:0]
			}
		}
	}
	w.in64, w.a64 = make([][]float64, n64), make([][]float64, n64)
	for j := range w.in64 {
		w.in64[j] = make([]float64, chunk)
	}
	w.inI, w.aI = make([][]int64, nI), make([][]int64, nI)
	for j := range w.inI {
		w.inI[j] = make([]int64, chunk)
	}
	return w
}

// broadcast32 is a chunk of copies of the float32 at p (operand x's element for this row),
// filled once per row element rather than once per step and chunk: an optimizer's scalar
// operands would otherwise cost a fill per op per chunk.
func (w *fusedWorker) broadcast32(x int, p unsafe.Pointer) []float32 {
	b := w.bc32[x]
	if len(b) > 0 && w.bcAt[x] == p {
		return b
	}
	b = b[:w.chunk]
	v := *(*float32)(p)
	for i := range b {
		b[i] = v
	}
	w.bc32[x], w.bcAt[x] = b, p
	return b
}

// step runs one op on elements [lo, lo+m) of the current row, loading and storing each
// operand exactly as the eager row functions (ewRowF32/F64/I64) do.
func (w *fusedWorker) step(st *FusedStep, ptrs []unsafe.Pointer, s []int64, real []int, dts []DType, lo, m int64) {
	o := st.Out
	switch classOf(st.CDT) {
	case classF32:
		ins := w.a32[:len(st.Ins)]
		for j, x := range st.Ins {
			r := real[x]
			switch {
			case r < 0:
				ins[j] = w.v32[x][:m]
			case s[r] == 0 && w.bc32[x] != nil:
				ins[j] = w.broadcast32(x, ptrs[r])[:m]
			default:
				ins[j] = loadF32(w.in32[j][:m], dts[x], at(ptrs[r], lo*s[r]), s[r], &w.tmp)
			}
		}
		r := real[o]
		switch {
		case r < 0:
			st.Op.F32(w.v32[o][:m], ins, st.P)
		case dts[o] == Float32 && s[r] == 4:
			st.Op.F32(unsafe.Slice((*float32)(at(ptrs[r], lo*s[r])), m), ins, st.P)
		default:
			out := w.out32[:m]
			st.Op.F32(out, ins, st.P)
			storeF32(at(ptrs[r], lo*s[r]), s[r], dts[o], out, &w.tmp)
		}
	case classF64:
		ins := w.a64[:len(st.Ins)]
		for j, x := range st.Ins {
			r := real[x]
			switch {
			case r < 0:
				ins[j] = w.v64[x][:m]
			case dts[x] == Float64 && s[r] == 8:
				ins[j] = unsafe.Slice((*float64)(at(ptrs[r], lo*s[r])), m)
			default:
				ins[j] = w.in64[j][:m]
				loadFloat(ins[j], dts[x], at(ptrs[r], lo*s[r]), s[r])
			}
		}
		r := real[o]
		switch {
		case r < 0:
			st.Op.F64(w.v64[o][:m], ins, st.P)
		case dts[o] == Float64 && s[r] == 8:
			st.Op.F64(unsafe.Slice((*float64)(at(ptrs[r], lo*s[r])), m), ins, st.P)
		default:
			out := w.out64[:m]
			st.Op.F64(out, ins, st.P)
			storeFloat(at(ptrs[r], lo*s[r]), s[r], dts[o], out)
		}
	default:
		ins := w.aI[:len(st.Ins)]
		for j, x := range st.Ins {
			r := real[x]
			switch {
			case r < 0:
				ins[j] = w.vI[x][:m]
			case dts[x] == Int64 && s[r] == 8:
				ins[j] = unsafe.Slice((*int64)(at(ptrs[r], lo*s[r])), m)
			default:
				ins[j] = w.inI[j][:m]
				q := at(ptrs[r], lo*s[r])
				if dts[x].IsFloat() {
					fb := w.fb[:m]
					loadFloat(fb, dts[x], q, s[r])
					for i, v := range fb {
						ins[j][i] = floatToInt64(v)
					}
				} else {
					loadInt(ins[j], dts[x], q, s[r])
				}
			}
		}
		r := real[o]
		switch {
		case r < 0:
			st.Op.I64(w.vI[o][:m], ins, st.P)
		case dts[o] == Int64 && s[r] == 8:
			st.Op.I64(unsafe.Slice((*int64)(at(ptrs[r], lo*s[r])), m), ins, st.P)
		default:
			out := w.outI[:m]
			st.Op.I64(out, ins, st.P)
			q := at(ptrs[r], lo*s[r])
			if dts[o].IsFloat() {
				fb := w.fb[:m]
				for i, v := range out {
					fb[i] = float64(v)
				}
				storeFloat(q, s[r], dts[o], fb)
			} else {
				storeInt(q, s[r], dts[o], out)
			}
		}
	}
}
