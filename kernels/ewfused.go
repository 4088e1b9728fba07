package kernels

import (
	"fmt"
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
	l.runPer(bases, int64(4*len(steps)), func() rowFunc {
		w := newFusedWorker(ops, steps)
		return func(ptrs []unsafe.Pointer, s []int64, n int64) {
			for lo := int64(0); lo < n; lo += ewChunk {
				m := min(ewChunk, n-lo)
				for k := range steps {
					w.step(&steps[k], ptrs, s, real, dts, lo, m)
				}
			}
		}
	})
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
}

func newFusedWorker(ops []FusedOperand, steps []FusedStep) *fusedWorker {
	w := &fusedWorker{v32: make([][]float32, len(ops)), v64: make([][]float64, len(ops)), vI: make([][]int64, len(ops))}
	var n32, n64, nI int
	for _, st := range steps {
		switch classOf(st.CDT) {
		case classF32:
			n32 = max(n32, len(st.Ins))
			if w.out32 == nil {
				w.out32 = make([]float32, ewChunk)
			}
			if ops[st.Out].Virtual && w.v32[st.Out] == nil {
				w.v32[st.Out] = make([]float32, ewChunk)
			}
		case classF64:
			n64 = max(n64, len(st.Ins))
			if w.out64 == nil {
				w.out64 = make([]float64, ewChunk)
			}
			if ops[st.Out].Virtual && w.v64[st.Out] == nil {
				w.v64[st.Out] = make([]float64, ewChunk)
			}
		default:
			nI = max(nI, len(st.Ins))
			if w.outI == nil {
				w.outI = make([]int64, ewChunk)
				w.fb = make([]float64, ewChunk)
			}
			if ops[st.Out].Virtual && w.vI[st.Out] == nil {
				w.vI[st.Out] = make([]int64, ewChunk)
			}
		}
	}
	w.in32, w.a32 = make([][]float32, n32), make([][]float32, n32)
	for j := range w.in32 {
		w.in32[j] = make([]float32, ewChunk)
	}
	w.in64, w.a64 = make([][]float64, n64), make([][]float64, n64)
	for j := range w.in64 {
		w.in64[j] = make([]float64, ewChunk)
	}
	w.inI, w.aI = make([][]int64, nI), make([][]int64, nI)
	for j := range w.inI {
		w.inI[j] = make([]int64, ewChunk)
	}
	return w
}

// step runs one op on elements [lo, lo+m) of the current row, loading and storing each
// operand exactly as the eager row functions (ewRowF32/F64/I64) do.
func (w *fusedWorker) step(st *FusedStep, ptrs []unsafe.Pointer, s []int64, real []int, dts []DType, lo, m int64) {
	o := st.Out
	switch classOf(st.CDT) {
	case classF32:
		ins := w.a32[:len(st.Ins)]
		for j, x := range st.Ins {
			if r := real[x]; r < 0 {
				ins[j] = w.v32[x][:m]
			} else {
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
