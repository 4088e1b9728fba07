package kernels

import (
	"fmt"
	"math"
	"sync"
	"time"
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
	// F32Rows, when set, computes F32 over rows blocks of n contiguous float32 elements
	// (operand k's row j at ptrs[k] + j*rowStrides[k] bytes; output first) in one call,
	// with the same results as F32 row by row: short broadcast rows (a bias) would
	// otherwise pay a call per row.
	F32Rows func(ptrs []unsafe.Pointer, rowStrides []int64, rows, n int64, p []float64)
	// F32Mixed, when set, computes F32 over n elements of operands that are contiguous
	// float32 (kind 0) or bfloat16 (1) runs, float32 scalars (2, pointing at one float32),
	// or bool (3) / uint8 (4) masks (inputs only), in one call, with the bits of rowF32's
	// conversion chunks.
	F32Mixed func(ptrs []unsafe.Pointer, kinds []int32, n int64, p []float64)
}

const ewChunk = 1024

// ewCost is the relative per-element cost the engine passes to ParallelFor: with Grain
// (32K) a call is considered for a split over goroutines from 32K elements on; below that
// the goroutine start-up and join cost more than the split saves.
const ewCost = 2

// ewScratch is one worker's reusable state: conversion buffers per operand (allocated on
// first use, never zeroed: every element read was written in the same chunk), the row
// pointers and the iteration counters. Pooled, so a small call allocates next to nothing.
type ewScratch struct {
	f32  [][]float32
	f64  [][]float64
	i64  [][]int64
	tmp  []float64
	fb   []float64
	in32 [][]float32
	in64 [][]float64
	inI  [][]int64
	ptrs []unsafe.Pointer
	offs []int64
	idx  []int64
	// Stride-0 operands: the value (bits) whose broadcast fills the operand's buffer and
	// how many leading elements hold it; reset per call.
	sbits []uint64
	sfill []int64
}

var ewPool = sync.Pool{New: func() any { return new(ewScratch) }}

func getEWScratch(nops, dims int) *ewScratch {
	w := ewPool.Get().(*ewScratch)
	if len(w.f32) < nops {
		w.f32 = make([][]float32, nops)
		w.f64 = make([][]float64, nops)
		w.i64 = make([][]int64, nops)
		w.in32 = make([][]float32, nops)
		w.in64 = make([][]float64, nops)
		w.inI = make([][]int64, nops)
		w.ptrs = make([]unsafe.Pointer, nops)
		w.offs = make([]int64, nops)
		w.sbits = make([]uint64, nops)
		w.sfill = make([]int64, nops)
	}
	if len(w.idx) < dims {
		w.idx = make([]int64, dims)
	}
	for i := range w.sfill {
		w.sfill[i] = 0
	}
	return w
}

func (w *ewScratch) buf32(k int) []float32 {
	if w.f32[k] == nil {
		w.f32[k] = make([]float32, ewChunk)
	}
	return w.f32[k]
}

func (w *ewScratch) buf64(k int) []float64 {
	if w.f64[k] == nil {
		w.f64[k] = make([]float64, ewChunk)
	}
	return w.f64[k]
}

func (w *ewScratch) bufI(k int) []int64 {
	if w.i64[k] == nil {
		w.i64[k] = make([]int64, ewChunk)
	}
	return w.i64[k]
}

func (w *ewScratch) floatBuf() []float64 {
	if w.fb == nil {
		w.fb = make([]float64, ewChunk)
	}
	return w.fb
}

// bcast returns buf[:m] holding m copies of the value with bits b, filling only when the
// buffer does not hold them already (the value is re-read every chunk, so an output that
// overwrote it is still seen).
func bcast[T any](w *ewScratch, k int, buf []T, m int64, b uint64, v T) []T {
	if w.sfill[k] < m || w.sbits[k] != b {
		for i := range buf[:m] {
			buf[i] = v
		}
		w.sbits[k], w.sfill[k] = b, m
	}
	return buf[:m]
}

// scalarF32 is the float32 the conversion loops make of the element at p.
func scalarF32(dt DType, p unsafe.Pointer) float32 {
	switch dt {
	case Float32:
		return *(*float32)(p)
	case BFloat16:
		return BF16ToF32(*(*uint16)(p))
	}
	var t [1]float64
	loadFloat(t[:], dt, p, 0)
	return float32(t[0])
}

// ewKernel is one Elementwise call: the op's function for the compute class, the operand
// dtypes (output first) and the op's parameters.
type ewKernel struct {
	f32Rows  func(ptrs []unsafe.Pointer, rowStrides []int64, rows, n int64, p []float64)
	f32Mixed func(ptrs []unsafe.Pointer, kinds []int32, n int64, p []float64)
	f32      EWFunc[float32]
	f64      EWFunc[float64]
	i64      EWFunc[int64]
	dts      []DType
	p        []float64
	// fixed storage for dts and p, so that a call allocates nothing
	dtBuf [4]DType
	pBuf  [8]float64
}

var ewKernelPool = sync.Pool{New: func() any { return new(ewKernel) }}

// Elementwise runs op with out = T[0] and inputs T[1:], computing in class cdt.
func Elementwise(op *EWOp, cdt DType, out Tensor, ins []Tensor, p []float64) error {
	if len(ins) != op.NIn {
		return fmt.Errorf("%s: expected %d inputs, got %d", op.Name, op.NIn, len(ins))
	}
	if !cdt.Valid() {
		return fmt.Errorf("%s: invalid compute dtype %d", op.Name, int32(cdt))
	}
	nops := len(ins) + 1
	for i := 0; i < nops; i++ {
		t := out
		if i > 0 {
			t = ins[i-1]
		}
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
	k := ewKernelPool.Get().(*ewKernel)
	defer ewKernelPool.Put(k)
	*k = ewKernel{}
	// parameters padded with zeros to at least 4 (ops read p[0..3] unconditionally)
	if len(p) <= len(k.pBuf) {
		k.p = k.pBuf[:max(len(p), 4)]
		copy(k.p, p)
	} else {
		k.p = p
	}
	if nops <= len(k.dtBuf) {
		k.dts = k.dtBuf[:nops]
	} else {
		k.dts = make([]DType, nops)
	}
	k.dts[0] = out.DType
	for i, t := range ins {
		k.dts[i+1] = t.DType
	}
	switch {
	case cdt == Float64:
		if op.F64 == nil {
			return fmt.Errorf("%s: float64 not supported", op.Name)
		}
		k.f64 = op.F64
	case cdt.IsFloat():
		if op.F32 == nil {
			return fmt.Errorf("%s: %v not supported", op.Name, cdt)
		}
		k.f32 = op.F32
		k.f32Rows = op.F32Rows
		if !noEWMixed {
			k.f32Mixed = op.F32Mixed
		}
	default:
		if op.I64 == nil {
			return fmt.Errorf("%s: %v not supported", op.Name, cdt)
		}
		k.i64 = op.I64
	}
	if op.Name == "where" && maskedFillFast(out, ins, cdt) {
		return nil
	}
	if n, ok := flatEW(out, ins); ok {
		k.runFlat(out, ins, n)
		return nil
	}
	strides := make([][]int64, nops)
	es := make([]int, nops)
	bases := make([]unsafe.Pointer, nops)
	for i := 0; i < nops; i++ {
		t := out
		if i > 0 {
			t = ins[i-1]
		}
		strides[i], es[i], bases[i] = t.Strides, t.DType.Size(), t.Ptr
	}
	k.runLayout(newLayout(out.Sizes, strides, es), bases)
	return nil
}

// flatEW reports whether the call is one flat row: the output contiguous and every input
// either laid out as the output or a broadcast scalar (all strides 0). n is the numel.
func flatEW(out Tensor, ins []Tensor) (int64, bool) {
	n, st := int64(1), int64(1)
	for d := len(out.Sizes) - 1; d >= 0; d-- {
		if out.Sizes[d] != 1 && out.Strides[d] != st {
			return 0, false
		}
		st *= out.Sizes[d]
		n *= out.Sizes[d]
	}
	for _, t := range ins {
		same, zero := true, true
		for d, s := range t.Strides {
			if out.Sizes[d] == 1 {
				continue
			}
			same = same && s == out.Strides[d]
			zero = zero && s == 0
		}
		if !same && !zero {
			return 0, false
		}
	}
	return n, true
}

// runFlat runs a flatEW call: one row of n elements. From 32K elements on (ewCost, Grain)
// it times a first serial slice and splits the rest over workers only if that rest would
// take longer than ewSplitMin: op costs differ ~100x (add vs gelu), and a split of a
// short call loses more to goroutine start-up and join than it gains.
func (k *ewKernel) runFlat(out Tensor, ins []Tensor, n int64) {
	if n == 0 {
		return
	}
	nops := len(ins) + 1
	w := getEWScratch(nops, 1)
	defer ewPool.Put(w)
	if Workers() <= 1 || n*ewCost < 2*Grain {
		k.flatChunk(w, out, ins, n, 0, n)
		return
	}
	first := int64(4 * ewChunk)
	t0 := time.Now()
	k.flatChunk(w, out, ins, n, 0, first)
	rest := time.Duration(float64(time.Since(t0)) * float64(n-first) / float64(first))
	if rest < ewSplitMin {
		k.flatChunk(w, out, ins, n, first, n)
		return
	}
	ParallelFor(n-first, 1<<30, func(lo, hi int64) {
		w := getEWScratch(nops, 1)
		k.flatChunk(w, out, ins, n, first+lo, first+hi)
		ewPool.Put(w)
	})
}

// ewSplitMin is the least estimated serial time worth splitting over workers.
const ewSplitMin = 40 * time.Microsecond

func (k *ewKernel) flatChunk(w *ewScratch, out Tensor, ins []Tensor, n, lo, hi int64) {
	nops := len(ins) + 1
	s := w.offs[:nops] // the row's byte strides
	ptrs := w.ptrs[:nops]
	for i := 0; i < nops; i++ {
		t := out
		if i > 0 {
			t = ins[i-1]
		}
		es := int64(t.DType.Size())
		s[i] = es
		if i > 0 && n > 1 && isZeroStrided(t, out) {
			s[i] = 0
		}
		ptrs[i] = at(t.Ptr, lo*s[i])
	}
	k.row(w, ptrs, s, hi-lo)
}

func isZeroStrided(t, out Tensor) bool {
	for d, st := range t.Strides {
		if out.Sizes[d] != 1 && st != 0 {
			return false
		}
	}
	return true
}

// runLayout runs the call over a coalesced layout, rows split over workers when large.
func (k *ewKernel) runLayout(l layout, bases []unsafe.Pointer) {
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
		ParallelFor(inner, ewCost, func(lo, hi int64) {
			w := getEWScratch(nops, d)
			ptrs := w.ptrs[:nops]
			for op := range ptrs {
				ptrs[op] = at(bases[op], lo*innerStrides[op])
			}
			k.row(w, ptrs, innerStrides, hi-lo)
			ewPool.Put(w)
		})
		return
	}
	ParallelFor(rows, inner*ewCost, func(lo, hi int64) {
		w := getEWScratch(nops, d)
		idx := w.idx[:d-1]
		rem := lo
		for j := d - 2; j >= 0; j-- {
			idx[j] = rem % l.sizes[j]
			rem /= l.sizes[j]
		}
		offs := w.offs[:nops]
		for op := range offs {
			offs[op] = 0
			for j := 0; j < d-1; j++ {
				offs[op] += idx[j] * l.strides[op][j]
			}
		}
		ptrs := w.ptrs[:nops]
		if k.blockRows(innerStrides) {
			k.runRowBlocks(l, bases, idx, offs, ptrs, lo, hi)
			ewPool.Put(w)
			return
		}
		for r := lo; r < hi; r++ {
			for op := range ptrs {
				ptrs[op] = at(bases[op], offs[op])
			}
			k.row(w, ptrs, innerStrides, inner)
			for j := d - 2; j >= 0; j-- {
				idx[j]++
				for op := range offs {
					offs[op] += l.strides[op][j]
				}
				if idx[j] < l.sizes[j] {
					break
				}
				for op := range offs {
					offs[op] -= idx[j] * l.strides[op][j]
				}
				idx[j] = 0
			}
		}
		ewPool.Put(w)
	})
}

// blockRows reports whether rows can go to f32Rows: every operand float32 and contiguous
// along the row.
func (k *ewKernel) blockRows(innerStrides []int64) bool {
	if k.f32Rows == nil || len(k.dts) > 4 {
		return false
	}
	for j, dt := range k.dts {
		if dt != Float32 || innerStrides[j] != 4 {
			return false
		}
	}
	return true
}

// runRowBlocks is runLayout's row loop for f32Rows: rows [lo, hi) in runs along the
// second-innermost dim (one call per run), idx/offs positioned at row lo.
func (k *ewKernel) runRowBlocks(l layout, bases []unsafe.Pointer, idx, offs []int64, ptrs []unsafe.Pointer, lo, hi int64) {
	d := len(l.sizes)
	inner, m := l.sizes[d-1], l.sizes[d-2]
	var rsBuf [4]int64
	rs := rsBuf[:len(ptrs)]
	for op := range rs {
		rs[op] = l.strides[op][d-2]
	}
	for r := lo; r < hi; {
		jn := min(m-idx[d-2], hi-r)
		for op := range ptrs {
			ptrs[op] = at(bases[op], offs[op])
		}
		k.f32Rows(ptrs, rs, jn, inner, k.p)
		r += jn
		idx[d-2] += jn
		for op := range offs {
			offs[op] += jn * rs[op]
		}
		for j := d - 2; j > 0 && idx[j] == l.sizes[j]; j-- {
			for op := range offs {
				offs[op] += l.strides[op][j-1] - idx[j]*l.strides[op][j]
			}
			idx[j] = 0
			idx[j-1]++
		}
	}
}

func (k *ewKernel) row(w *ewScratch, ptrs []unsafe.Pointer, s []int64, n int64) {
	switch {
	case k.f64 != nil:
		k.rowF64(w, ptrs, s, n)
	case k.f32 != nil:
		k.rowF32(w, ptrs, s, n)
	default:
		k.rowI64(w, ptrs, s, n)
	}
}

// noEWMixed forces rowF32's conversion chunks (tests compare them with F32Mixed).
var noEWMixed bool

// mixedRow runs a row with a bfloat16 operand through F32Mixed in one call when every
// operand is of a kind it takes; it reports false otherwise.
func (k *ewKernel) mixedRow(ptrs []unsafe.Pointer, s []int64, n int64) bool {
	if len(k.dts) > 4 || n == 0 {
		return false
	}
	var kinds [4]int32
	var ps [4]unsafe.Pointer
	var sc [4]float32
	bf16 := false
	for j, dt := range k.dts {
		ps[j] = ptrs[j]
		switch {
		case dt == Float32 && s[j] == 4:
			kinds[j] = 0
		case dt == BFloat16 && s[j] == 2:
			kinds[j], bf16 = 1, true
		case j > 0 && s[j] == 0:
			sc[j] = scalarF32(dt, ptrs[j])
			kinds[j], ps[j] = 2, unsafe.Pointer(&sc[j])
		case j > 0 && dt == Bool && s[j] == 1:
			kinds[j] = 3
		case j > 0 && dt == Uint8 && s[j] == 1:
			kinds[j] = 4
		default:
			return false
		}
	}
	if !bf16 {
		return false
	}
	k.f32Mixed(ps[:len(k.dts)], kinds[:len(k.dts)], n, k.p)
	return true
}

func (k *ewKernel) rowF32(w *ewScratch, ptrs []unsafe.Pointer, s []int64, n int64) {
	if k.f32Mixed != nil && k.mixedRow(ptrs, s, n) {
		return
	}
	dts, nin := k.dts, len(k.dts)-1
	ins := w.in32[:nin]
	// When every operand is contiguous float32 no buffer is involved: one call for the
	// whole row (the vectorized C kernels pay a fixed cost per call).
	chunk := n
	for j, dt := range dts {
		if dt != Float32 || s[j] != 4 {
			chunk = ewChunk
			break
		}
	}
	for lo := int64(0); lo < n; lo += chunk {
		m := min(chunk, n-lo)
		for j := 0; j < nin; j++ {
			q, dt := at(ptrs[j+1], lo*s[j+1]), dts[j+1]
			switch {
			case dt == Float32 && s[j+1] == 4:
				ins[j] = unsafe.Slice((*float32)(q), m)
			case s[j+1] == 0:
				v := scalarF32(dt, q)
				ins[j] = bcast(w, j+1, w.buf32(j+1), m, uint64(math.Float32bits(v)), v)
			default:
				ins[j] = loadF32(w.buf32(j + 1)[:m], dt, q, s[j+1], &w.tmp)
			}
		}
		op := at(ptrs[0], lo*s[0])
		if dts[0] == Float32 && s[0] == 4 {
			k.f32(unsafe.Slice((*float32)(op), m), ins, k.p)
			continue
		}
		o := w.buf32(0)[:m]
		k.f32(o, ins, k.p)
		storeF32(op, s[0], dts[0], o, &w.tmp)
	}
}

func (k *ewKernel) rowF64(w *ewScratch, ptrs []unsafe.Pointer, s []int64, n int64) {
	dts, nin := k.dts, len(k.dts)-1
	ins := w.in64[:nin]
	for lo := int64(0); lo < n; lo += ewChunk {
		m := min(ewChunk, n-lo)
		for j := 0; j < nin; j++ {
			q, dt := at(ptrs[j+1], lo*s[j+1]), dts[j+1]
			switch {
			case dt == Float64 && s[j+1] == 8:
				ins[j] = unsafe.Slice((*float64)(q), m)
			case s[j+1] == 0:
				var t [1]float64
				loadFloat(t[:], dt, q, 0)
				ins[j] = bcast(w, j+1, w.buf64(j+1), m, math.Float64bits(t[0]), t[0])
			default:
				ins[j] = w.buf64(j + 1)[:m]
				loadFloat(ins[j], dt, q, s[j+1])
			}
		}
		op := at(ptrs[0], lo*s[0])
		if dts[0] == Float64 && s[0] == 8 {
			k.f64(unsafe.Slice((*float64)(op), m), ins, k.p)
			continue
		}
		o := w.buf64(0)[:m]
		k.f64(o, ins, k.p)
		storeFloat(op, s[0], dts[0], o)
	}
}

// loadI64 is the int64 compute class's view of one element.
func loadI64(dt DType, p unsafe.Pointer) int64 {
	var t [1]float64
	if dt.IsFloat() {
		loadFloat(t[:], dt, p, 0)
		return floatToInt64(t[0])
	}
	var u [1]int64
	loadInt(u[:], dt, p, 0)
	return u[0]
}

func (k *ewKernel) rowI64(w *ewScratch, ptrs []unsafe.Pointer, s []int64, n int64) {
	dts, nin := k.dts, len(k.dts)-1
	ins := w.inI[:nin]
	for lo := int64(0); lo < n; lo += ewChunk {
		m := min(ewChunk, n-lo)
		for j := 0; j < nin; j++ {
			q, dt := at(ptrs[j+1], lo*s[j+1]), dts[j+1]
			switch {
			case dt == Int64 && s[j+1] == 8:
				ins[j] = unsafe.Slice((*int64)(q), m)
			case s[j+1] == 0:
				v := loadI64(dt, q)
				ins[j] = bcast(w, j+1, w.bufI(j+1), m, uint64(v), v)
			case dt.IsFloat():
				fb := w.floatBuf()[:m]
				loadFloat(fb, dt, q, s[j+1])
				ins[j] = w.bufI(j + 1)[:m]
				for i, v := range fb {
					ins[j][i] = floatToInt64(v)
				}
			default:
				ins[j] = w.bufI(j + 1)[:m]
				loadInt(ins[j], dt, q, s[j+1])
			}
		}
		op := at(ptrs[0], lo*s[0])
		if dts[0] == Int64 && s[0] == 8 {
			k.i64(unsafe.Slice((*int64)(op), m), ins, k.p)
			continue
		}
		o := w.bufI(0)[:m]
		k.i64(o, ins, k.p)
		if dts[0].IsFloat() {
			fb := w.floatBuf()[:m]
			for i, v := range o {
				fb[i] = float64(v)
			}
			storeFloat(op, s[0], dts[0], fb)
		} else {
			storeInt(op, s[0], dts[0], o)
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
	case (dt == Bool || dt == Uint8) && s == 1:
		// masks (where, masked_fill)
		bm := uint8(0xff)
		if dt == Bool {
			bm = 1
		}
		u8ToF32(buf, unsafe.Slice((*uint8)(p), n), bm)
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
