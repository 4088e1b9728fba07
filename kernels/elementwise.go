package kernels

import (
	"fmt"
	"unsafe"
)

// Elementwise engine. An elementwise op has n same-shape inputs (broadcast operands arrive
// as stride-0 views) and one output. It computes in a "compute class" chosen from the
// compute dtype the caller passes: float32 (for float32, bfloat16 and float16, as torch's
// opmath does), float64, or int64 (every integral dtype and bool). Rows are processed in
// chunks: each operand is viewed (contiguous, matching dtype) or converted into a
// per-worker buffer, the op runs a tight loop over slices, and the result is stored.

type flt interface{ ~float32 | ~float64 }

// EWFunc computes one chunk: out[i] = f(in[0][i], in[1][i], ...). Implementations must
// read every input at index i before writing out[i] (out may alias an input).
type EWFunc[T any] func(out []T, in [][]T, p []float64)

// EWOp is an elementwise op's implementations per compute class; nil means unsupported.
type EWOp struct {
	Name string
	NIn  int
	F32  EWFunc[float32]
	F64  EWFunc[float64]
	I64  EWFunc[int64]
}

const ewChunk = 1024

// Elementwise runs op with out = T[0] and inputs T[1:], computing in class cdt.
func Elementwise(op *EWOp, cdt DType, out Tensor, ins []Tensor, p []float64) error {
	if len(ins) != op.NIn {
		return fmt.Errorf("%s: expected %d inputs, got %d", op.Name, op.NIn, len(ins))
	}
	if !cdt.Valid() {
		return fmt.Errorf("%s: invalid compute dtype %d", op.Name, int32(cdt))
	}
	all := append([]Tensor{out}, ins...)
	for i, t := range all {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%s: operand %d: %v", op.Name, i, err)
		}
		if len(t.Sizes) != len(out.Sizes) {
			return fmt.Errorf("%s: operand %d has shape %v, output %v", op.Name, i, t.Sizes, out.Sizes)
		}
		for d := range t.Sizes {
			if t.Sizes[d] != out.Sizes[d] {
				return fmt.Errorf("%s: operand %d has shape %v, output %v", op.Name, i, t.Sizes, out.Sizes)
			}
		}
	}
	strides := make([][]int64, len(all))
	es := make([]int, len(all))
	bases := make([]unsafe.Pointer, len(all))
	for i, t := range all {
		strides[i] = t.Strides
		es[i] = t.DType.Size()
		bases[i] = t.Ptr
	}
	l := newLayout(out.Sizes, strides, es)
	dts := make([]DType, len(all))
	for i, t := range all {
		dts[i] = t.DType
	}
	switch {
	case cdt == Float64:
		if op.F64 == nil {
			return fmt.Errorf("%s: float64 not supported", op.Name)
		}
		l.runPer(bases, 4, func() rowFunc { return ewRowF64(op.F64, dts, p) })
	case cdt.IsFloat():
		if op.F32 == nil {
			return fmt.Errorf("%s: %v not supported", op.Name, cdt)
		}
		l.runPer(bases, 4, func() rowFunc { return ewRowF32(op.F32, dts, p) })
	default:
		if op.I64 == nil {
			return fmt.Errorf("%s: %v not supported", op.Name, cdt)
		}
		l.runPer(bases, 2, func() rowFunc { return ewRowI64(op.I64, dts, p) })
	}
	return nil
}

func ewRowF32(f EWFunc[float32], dts []DType, p []float64) rowFunc {
	nin := len(dts) - 1
	bufs := make([][]float32, len(dts))
	for i := range bufs {
		bufs[i] = make([]float32, ewChunk)
	}
	var tmp []float64
	ins := make([][]float32, nin)
	return func(ptrs []unsafe.Pointer, s []int64, n int64) {
		for lo := int64(0); lo < n; lo += ewChunk {
			m := min(ewChunk, n-lo)
			for k := 0; k < nin; k++ {
				ins[k] = loadF32(bufs[k+1][:m], dts[k+1], at(ptrs[k+1], lo*s[k+1]), s[k+1], &tmp)
			}
			op := at(ptrs[0], lo*s[0])
			if dts[0] == Float32 && s[0] == 4 {
				f(unsafe.Slice((*float32)(op), m), ins, p)
				continue
			}
			o := bufs[0][:m]
			f(o, ins, p)
			storeF32(op, s[0], dts[0], o, &tmp)
		}
	}
}

func ewRowF64(f EWFunc[float64], dts []DType, p []float64) rowFunc {
	nin := len(dts) - 1
	bufs := make([][]float64, len(dts))
	for i := range bufs {
		bufs[i] = make([]float64, ewChunk)
	}
	ins := make([][]float64, nin)
	return func(ptrs []unsafe.Pointer, s []int64, n int64) {
		for lo := int64(0); lo < n; lo += ewChunk {
			m := min(ewChunk, n-lo)
			for k := 0; k < nin; k++ {
				q := at(ptrs[k+1], lo*s[k+1])
				if dts[k+1] == Float64 && s[k+1] == 8 {
					ins[k] = unsafe.Slice((*float64)(q), m)
				} else {
					ins[k] = bufs[k+1][:m]
					loadFloat(ins[k], dts[k+1], q, s[k+1])
				}
			}
			op := at(ptrs[0], lo*s[0])
			if dts[0] == Float64 && s[0] == 8 {
				f(unsafe.Slice((*float64)(op), m), ins, p)
				continue
			}
			o := bufs[0][:m]
			f(o, ins, p)
			storeFloat(op, s[0], dts[0], o)
		}
	}
}

func ewRowI64(f EWFunc[int64], dts []DType, p []float64) rowFunc {
	nin := len(dts) - 1
	bufs := make([][]int64, len(dts))
	for i := range bufs {
		bufs[i] = make([]int64, ewChunk)
	}
	ins := make([][]int64, nin)
	fb := make([]float64, ewChunk)
	return func(ptrs []unsafe.Pointer, s []int64, n int64) {
		for lo := int64(0); lo < n; lo += ewChunk {
			m := min(ewChunk, n-lo)
			for k := 0; k < nin; k++ {
				q := at(ptrs[k+1], lo*s[k+1])
				if dts[k+1] == Int64 && s[k+1] == 8 {
					ins[k] = unsafe.Slice((*int64)(q), m)
				} else {
					ins[k] = bufs[k+1][:m]
					if dts[k+1].IsFloat() {
						loadFloat(fb[:m], dts[k+1], q, s[k+1])
						for i, v := range fb[:m] {
							ins[k][i] = floatToInt64(v)
						}
					} else {
						loadInt(ins[k], dts[k+1], q, s[k+1])
					}
				}
			}
			op := at(ptrs[0], lo*s[0])
			if dts[0] == Int64 && s[0] == 8 {
				f(unsafe.Slice((*int64)(op), m), ins, p)
				continue
			}
			o := bufs[0][:m]
			f(o, ins, p)
			if dts[0].IsFloat() {
				for i, v := range o {
					fb[i] = float64(v)
				}
				storeFloat(op, s[0], dts[0], fb[:m])
			} else {
				storeInt(op, s[0], dts[0], o)
			}
		}
	}
}

// loadF32 returns the n elements at p (byte stride s, dtype dt) as float32: the memory
// itself when it is contiguous float32, else buf filled by a conversion loop.
func loadF32(buf []float32, dt DType, p unsafe.Pointer, s int64, tmp *[]float64) []float32 {
	n := int64(len(buf))
	switch {
	case dt == Float32 && s == 4:
		return unsafe.Slice((*float32)(p), n)
	case dt == Float32 && s == 0:
		v := *(*float32)(p)
		for i := range buf {
			buf[i] = v
		}
	case dt == BFloat16 && s == 2:
		bf16ToF32s(buf, unsafe.Slice((*uint16)(p), n))
	case dt == BFloat16:
		for i := int64(0); i < n; i++ {
			buf[i] = BF16ToF32(*(*uint16)(at(p, i*s)))
		}
	case dt == Float32:
		for i := int64(0); i < n; i++ {
			buf[i] = *(*float32)(at(p, i*s))
		}
	default:
		if int64(cap(*tmp)) < n {
			*tmp = make([]float64, n)
		}
		t := (*tmp)[:n]
		loadFloat(t, dt, p, s)
		for i, v := range t {
			buf[i] = float32(v)
		}
	}
	return buf
}

func storeF32(p unsafe.Pointer, s int64, dt DType, v []float32, tmp *[]float64) {
	n := int64(len(v))
	switch {
	case dt == BFloat16 && s == 2:
		f32ToBF16s(unsafe.Slice((*uint16)(p), n), v)
	case dt == BFloat16:
		for i, x := range v {
			*(*uint16)(at(p, int64(i)*s)) = F32ToBF16(x)
		}
	case dt == Float32:
		for i, x := range v {
			*(*float32)(at(p, int64(i)*s)) = x
		}
	case dt == Bool && s == 1:
		dst := unsafe.Slice((*uint8)(p), n)
		for i, x := range v {
			dst[i] = b2u(x != 0)
		}
	default:
		if int64(cap(*tmp)) < n {
			*tmp = make([]float64, n)
		}
		t := (*tmp)[:n]
		for i, x := range v {
			t[i] = float64(x)
		}
		storeFloat(p, s, dt, t)
	}
}

// runPer is layout.run with per-worker state: mk is called once per worker chunk to build
// that worker's row function (with its own scratch buffers).
func (l layout) runPer(bases []unsafe.Pointer, cost int64, mk func() rowFunc) {
	d := len(l.sizes)
	inner := l.sizes[d-1]
	rows := int64(1)
	for _, s := range l.sizes[:d-1] {
		rows *= s
	}
	if rows*inner == 0 {
		return
	}
	nops := len(bases)
	innerStrides := make([]int64, nops)
	for op := range innerStrides {
		innerStrides[op] = l.strides[op][d-1]
	}
	if rows == 1 {
		ParallelFor(inner, cost, func(lo, hi int64) {
			fn := mk()
			ptrs := make([]unsafe.Pointer, nops)
			for op := range ptrs {
				ptrs[op] = at(bases[op], lo*innerStrides[op])
			}
			fn(ptrs, innerStrides, hi-lo)
		})
		return
	}
	ParallelFor(rows, inner*cost, func(lo, hi int64) {
		fn := mk()
		idx := make([]int64, d-1)
		rem := lo
		for k := d - 2; k >= 0; k-- {
			idx[k] = rem % l.sizes[k]
			rem /= l.sizes[k]
		}
		offs := make([]int64, nops)
		for op := range offs {
			for k := 0; k < d-1; k++ {
				offs[op] += idx[k] * l.strides[op][k]
			}
		}
		ptrs := make([]unsafe.Pointer, nops)
		for r := lo; r < hi; r++ {
			for op := range ptrs {
				ptrs[op] = at(bases[op], offs[op])
			}
			fn(ptrs, innerStrides, inner)
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
	})
}
