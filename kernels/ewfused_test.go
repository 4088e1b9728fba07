package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// A fused AdamW-like chain gives the bits of its ops run one by one, over full operands,
// a scalar, a per-row value broadcast along the row (its address moves with the row,
// so a filled broadcast buffer must be refilled) and a row broadcast down the columns;
// rows longer than a chunk; virtual intermediates.
func TestFusedMatchesUnfused(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, sz := range [][2]int64{{5, 37}, {3, 3000}, {1, 4608}} {
		rows, cols := sz[0], sz[1]
		full := func() Tensor {
			return f32Tensor(randF32(r, int(rows*cols)), []int64{rows, cols}, []int64{cols, 1})
		}
		p, g, m, v := full(), full(), full(), full()
		scalar := f32Tensor([]float32{0.9}, []int64{rows, cols}, []int64{0, 0})
		perRow := f32Tensor(randF32(r, int(rows)), []int64{rows, cols}, []int64{1, 0})
		perCol := f32Tensor(randF32(r, int(cols)), []int64{rows, cols}, []int64{0, 1})
		scratch := func() Tensor {
			return f32Tensor(make([]float32, rows*cols), []int64{rows, cols}, []int64{cols, 1})
		}
		d1, d2, d3 := scratch(), scratch(), scratch()
		ops := []FusedOperand{{T: p}, {T: g}, {T: m}, {T: v}, {T: scalar}, {T: perRow}, {T: perCol},
			{T: d1}, {T: d2}, {T: d3}}
		steps := []FusedStep{
			{Op: EWOps["mul"], CDT: Float32, Out: 0, Ins: []int{0, 4}},
			{Op: EWOps["lerp"], CDT: Float32, Out: 2, Ins: []int{2, 1, 5}},
			{Op: EWOps["mul"], CDT: Float32, Out: 3, Ins: []int{3, 6}},
			{Op: EWOps["addcmul"], CDT: Float32, Out: 3, Ins: []int{3, 1, 1}, P: []float64{0.001}},
			{Op: EWOps["sqrt"], CDT: Float32, Out: 7, Ins: []int{3}},
			{Op: EWOps["div"], CDT: Float32, Out: 8, Ins: []int{7, 5}},
			{Op: EWOps["add"], CDT: Float32, Out: 9, Ins: []int{8, 4}, P: []float64{1}},
			{Op: EWOps["addcdiv"], CDT: Float32, Out: 0, Ins: []int{0, 2, 9}, P: []float64{-0.001}},
		}
		snap := func() [][]float32 {
			var out [][]float32
			for _, o := range ops[:4] {
				out = append(out, append([]float32(nil), f32Slice(o.T)...))
			}
			return out
		}
		restore := func(s [][]float32) {
			for i, o := range ops[:4] {
				copy(f32Slice(o.T), s[i])
			}
		}
		start := snap()
		for _, st := range steps {
			ins := make([]Tensor, len(st.Ins))
			for j, x := range st.Ins {
				ins[j] = ops[x].T
			}
			if err := Elementwise(st.Op, Float32, ops[st.Out].T, ins, st.P); err != nil {
				t.Fatal(err)
			}
		}
		want := snap()
		restore(start)
		for _, k := range []int{7, 8, 9} {
			ops[k].Virtual = true
		}
		if k, err := FusedElementwise([]int64{rows, cols}, ops, steps); err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
		for i, w := range want {
			for j, x := range f32Slice(ops[i].T) {
				if math.Float32bits(x) != math.Float32bits(w[j]) {
					t.Fatalf("%v operand %d element %d: fused %v, unfused %v", sz, i, j, x, w[j])
				}
			}
		}
	}
}

func f32Slice(t Tensor) []float32 {
	return unsafe.Slice((*float32)(t.Ptr), t.Sizes[0]*t.Sizes[1])
}

// A fused loop with no float32 step (int64 here) has no float32 scratch to return to the
// pool; the pool must stay usable after it.
func TestFusedWithoutFloat32Steps(t *testing.T) {
	a, b := []int64{1, 2, 3, 4}, []int64{10, 20, 30, 40}
	i64 := func(v []int64) Tensor {
		return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Int64, Sizes: []int64{4}, Strides: []int64{1}}
	}
	out := make([]int64, 4)
	ops := []FusedOperand{{T: i64(out)}, {T: i64(a)}, {T: i64(b)}, {T: i64(out), Virtual: true}}
	steps := []FusedStep{
		{Op: EWOps["add"], CDT: Int64, Out: 3, Ins: []int{1, 2}, P: []float64{1}},
		{Op: EWOps["mul"], CDT: Int64, Out: 0, Ins: []int{3, 1}},
	}
	if k, err := FusedElementwise([]int64{4}, ops, steps); err != nil {
		t.Fatalf("step %d: %v", k, err)
	}
	for i := range out {
		if out[i] != (a[i]+b[i])*a[i] {
			t.Fatalf("element %d: %d", i, out[i])
		}
	}
	putF32(getF32(16)) // the scratch pool still works
	if b := getF32(8); b == nil || len(*b) != 8 {
		t.Fatal("scratch pool broken")
	}
}

// In a one-element loop every operand has inner stride 0: an operand a step writes must
// be re-read by the later steps, never served from a broadcast buffer filled earlier.
func TestFusedOneElementRereadsWrittenOperands(t *testing.T) {
	for _, strides := range [][]int64{{1}, {0}} {
		x, y, c := []float32{1}, []float32{0}, []float32{10}
		f := func(v []float32) Tensor { return f32Tensor(v, []int64{1}, strides) }
		ops := []FusedOperand{{T: f(x)}, {T: f(y)}, {T: f(c)}}
		steps := []FusedStep{
			{Op: EWOps["mul"], CDT: Float32, Out: 0, Ins: []int{0, 2}},                  // x *= c
			{Op: EWOps["add"], CDT: Float32, Out: 1, Ins: []int{0, 2}, P: []float64{1}}, // y = x + c
			{Op: EWOps["mul"], CDT: Float32, Out: 0, Ins: []int{0, 1}},                  // x *= y
		}
		if k, err := FusedElementwise([]int64{1}, ops, steps); err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
		if y[0] != 20 || x[0] != 200 {
			t.Fatalf("strides %v: x %v y %v, want 200 20", strides, x[0], y[0])
		}
	}
}

// FusedElementwiseScratch gives FusedElementwise's bits call after call over new data and
// new addresses (a broadcast scalar changed in place is re-read, not served from the
// previous call's fill), and allocates nothing once its first call has run.
func TestFusedScratchMatchesFusedAndAllocatesNothing(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	type set struct {
		data [][]float32 // four full operands, then the scalar
		ops  []FusedOperand
	}
	for _, sz := range [][2]int64{{5, 37}, {32, 128}, {3, 3000}, {1, 4608}} {
		rows, cols := sz[0], sz[1]
		n := int(rows * cols)
		mk := func() *set {
			s := &set{}
			for i := 0; i < 4; i++ {
				d := randF32(r, n)
				s.data = append(s.data, d)
				s.ops = append(s.ops, FusedOperand{T: f32Tensor(d, []int64{rows, cols}, []int64{cols, 1})})
			}
			s.data = append(s.data, []float32{r.Float32()})
			s.ops = append(s.ops, FusedOperand{T: f32Tensor(s.data[4], []int64{rows, cols}, []int64{0, 0})},
				FusedOperand{T: f32Tensor(make([]float32, n), []int64{rows, cols}, []int64{cols, 1}), Virtual: true})
			return s
		}
		steps := func() []FusedStep {
			return []FusedStep{
				{Op: EWOps["mul"], CDT: Float32, Out: 5, Ins: []int{1, 4}, P: make([]float64, 4)},
				{Op: EWOps["add"], CDT: Float32, Out: 2, Ins: []int{2, 5}, P: []float64{1, 0, 0, 0}},
				{Op: EWOps["addcmul"], CDT: Float32, Out: 0, Ins: []int{0, 2, 3}, P: []float64{-0.1, 0, 0, 0}},
			}
		}
		var sc FusedScratch
		var b *set
		for call := 0; call < 3; call++ {
			a := mk()
			if call < 2 {
				b = mk() // new addresses
			} // else: the last call's addresses, new values (the scalar too)
			for i := range a.data {
				copy(b.data[i], a.data[i])
			}
			if k, err := FusedElementwise([]int64{rows, cols}, a.ops, steps()); err != nil {
				t.Fatalf("step %d: %v", k, err)
			}
			if k, err := FusedElementwiseScratch(&sc, []int64{rows, cols}, b.ops, steps()); err != nil {
				t.Fatalf("step %d: %v", k, err)
			}
			for i := 0; i < 4; i++ {
				for j := range a.data[i] {
					if math.Float32bits(a.data[i][j]) != math.Float32bits(b.data[i][j]) {
						t.Fatalf("%v call %d operand %d element %d: scratch %v, fused %v", sz, call, i, j,
							b.data[i][j], a.data[i][j])
					}
				}
			}
		}
		if n*3 < 2*Grain { // one part: nothing of the worker pool's either
			st, sizes := steps(), []int64{rows, cols}
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := FusedElementwiseScratch(&sc, sizes, b.ops, st); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v: %v allocations per call", sz, allocs)
			}
		}
	}
}
