package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"testing"
	"unsafe"
)

// The bfloat16 fast paths (widen to float32, float32 C rows, round once) give
// exactly the generic paths' bits, on awkward inputs: odd lengths, NaN, ±inf, ±0,
// subnormals, huge and tiny values, padded row strides.

// halfBits rounds v to dt's bit pattern.
func halfBits(dt DType, v float32) uint16 {
	if dt == BFloat16 {
		return F32ToBF16(v)
	}
	return F32ToF16(v)
}

// awkwardHalf is n values of dtype dt for row r: plain rows, rows with special values,
// rows of tiny (subnormal) and of huge magnitudes, in turn.
func awkwardHalf(rng *rand.Rand, dt DType, r, n int64) []uint16 {
	maxV, minSub, minNorm := float32(3.3e38), float32(9.2e-41), float32(1.2e-38)
	if dt == Float16 {
		maxV, minSub, minNorm = 65504, 6e-8, 6.2e-5
	}
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		minSub, -minSub, minSub * 37, minNorm, -minNorm, maxV, -maxV, 1, -1}
	out := make([]uint16, n)
	for i := range out {
		v := float32(rng.NormFloat64())
		switch r % 5 {
		case 1:
			if rng.Intn(6) == 0 {
				v = special[rng.Intn(len(special))]
			}
		case 2:
			v *= minNorm * float32(rng.Intn(4)) // subnormals and small normals, some zeros
		case 3:
			v *= maxV / 8
		case 4:
			if rng.Intn(3) == 0 {
				v = special[3+rng.Intn(len(special)-3)] // no NaN or inf: finite extremes
			}
		}
		out[i] = halfBits(dt, v)
	}
	return out
}

// halfMatrix is an [M,D] dt tensor with row stride ld >= D, rows from awkwardHalf (the
// padding holds NaNs, which must not be read).
func halfMatrix(rng *rand.Rand, dt DType, M, D, ld int64) (Tensor, []uint16) {
	buf := make([]uint16, M*ld+1)
	for i := range buf {
		buf[i] = 0x7fc1
	}
	for r := int64(0); r < M; r++ {
		copy(buf[r*ld:], awkwardHalf(rng, dt, r, D))
	}
	return Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: dt, Sizes: []int64{M, D}, Strides: []int64{ld, 1}}, buf
}

func emptyLike16(t Tensor) (Tensor, []uint16) {
	buf := make([]uint16, t.Sizes[0]*t.Strides[0]+1)
	return Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: t.DType, Sizes: t.Sizes, Strides: t.Strides}, buf
}

func vec32(v []float32) Tensor {
	return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Float32, Sizes: []int64{int64(len(v))}, Strides: []int64{1}}
}

func sameBits16(t *testing.T, what string, a, b []uint16) {
	t.Helper()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("%s element %d: fast %#04x, reference %#04x", what, i, a[i], b[i])
		}
	}
}

// sameBits32 compares float32 results bit for bit except a NaN's sign and payload, which
// neither Go nor the C clones define (either may commute the operands of an add whose
// two inputs are NaN; the existing float32 C-versus-Go tests accept any NaN likewise).
// Reduced-precision results have one NaN (0x7fc0 after rounding) and are compared
// strictly by sameBits16.
func sameBits32(t *testing.T, what string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			t.Fatalf("%s element %d: fast %v (%#08x), reference %v (%#08x)", what, i, a[i], math.Float32bits(a[i]), b[i],
				math.Float32bits(b[i]))
		}
	}
}

// nearTo reports whether a is b up to tol (NaN only for NaN, infinities exactly).
func nearTo(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return math.IsNaN(a) == math.IsNaN(b) && (math.IsNaN(a) || a == b)
	}
	return math.Abs(a-b) <= tol
}

// finiteMax is the largest finite |v|.
func finiteMax(vs []float64) float64 {
	m := 0.0
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			m = math.Max(m, math.Abs(v))
		}
	}
	return m
}

// nearBF16 compares bfloat16 results of [rows][chans][sp] (or one array when chans is 1)
// within one bfloat16 step (2^-7 of the magnitude) plus 1e-3 of its channel's largest
// finite value (float32 against float64 math: a rounding apart, cancellation aside).
func nearBF16(t *testing.T, what string, a, b []uint16, chans, sp int64) {
	t.Helper()
	ref := make([][]float64, chans)
	ch := func(i int) int64 { return int64(i) / sp % chans }
	if chans == 1 {
		ch = func(int) int64 { return 0 }
	}
	for i, v := range b {
		ref[ch(i)] = append(ref[ch(i)], float64(BF16ToF32(v)))
	}
	scale := make([]float64, chans)
	for c := range scale {
		scale[c] = finiteMax(ref[c])
	}
	for i := range a {
		x, y := float64(BF16ToF32(a[i])), float64(BF16ToF32(b[i]))
		if !nearTo(x, y, math.Max(math.Abs(x), math.Abs(y))/128+1e-3*scale[ch(i)]) {
			t.Fatalf("%s element %d: fast %v (%#04x), reference %v (%#04x)", what, i, x, a[i], y, b[i])
		}
	}
}

// near32 compares per-channel float32 results within 1e-4 of each element's magnitude
// plus 1e-5 of the largest finite one.
func near32(t *testing.T, what string, a, b []float32) {
	t.Helper()
	ref := make([]float64, len(b))
	for i, v := range b {
		ref[i] = float64(v)
	}
	m := finiteMax(ref)
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		if !nearTo(x, y, 1e-4*math.Max(math.Abs(x), math.Abs(y))+1e-5*m) {
			t.Fatalf("%s element %d: fast %v, reference %v", what, i, x, y)
		}
	}
}

func TestLayerNormHalfFastMatchesGeneric(t *testing.T) {
	if !haveCNorm {
		t.Skip("no C rows")
	}
	rng := rand.New(rand.NewSource(21))
	for _, dt := range []DType{BFloat16, Float16} { // float16: the generic path both times
		for _, D := range []int64{1, 3, 15, 16, 17, 33, 64, 100} {
			for _, pad := range []int64{0, 3} {
				M := int64(41)
				x, _ := halfMatrix(rng, dt, M, D, D+pad)
				dy, _ := halfMatrix(rng, dt, M, D, D+pad)
				w, b := make([]float32, D), make([]float32, D)
				for j := range w {
					w[j], b[j] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				w[0] = float32(math.Copysign(0, -1))
				for _, withW := range []bool{false, true} {
					var o16 [2][][]uint16
					var o32 [2][][]float32
					for k, generic := range []bool{false, true} {
						noCNorm = generic
						out, ob := emptyLike16(x)
						mean, rstd := make([]float32, M), make([]float32, M)
						mt, rt := vec32(mean), vec32(rstd)
						var wt, bt *Tensor
						if withW {
							w1, b1 := vec32(w), vec32(b)
							wt, bt = &w1, &b1
						}
						err := LayerNormForward(out, &mt, &rt, x, wt, bt, 1e-5)
						gin, gb16 := emptyLike16(x)
						gw, gbias := make([]float32, D), make([]float32, D)
						gwt, gbt := vec32(gw), vec32(gbias)
						if err == nil {
							err = LayerNormBackward(&gin, &gwt, &gbt, dy, x, mt, rt, wt)
						}
						noCNorm = false
						if err != nil {
							t.Fatal(err)
						}
						o16[k] = [][]uint16{ob, gb16}
						o32[k] = [][]float32{mean, rstd, gw, gbias}
					}
					for i := range o16[0] {
						sameBits16(t, fmt.Sprintf("%v D=%d pad=%d w=%v layer norm half output %d", dt, D, pad, withW, i), o16[0][i], o16[1][i])
					}
					for i := range o32[0] {
						sameBits32(t, fmt.Sprintf("%v D=%d pad=%d w=%v layer norm float32 output %d", dt, D, pad, withW, i), o32[0][i], o32[1][i])
					}
				}
			}
		}
	}
}

// The C rows' log gives math.Log's float32 for every bfloat16 sum of exps (finite, >= 1).
func TestLogCMatchesGoOnBF16(t *testing.T) {
	for b := uint16(0x3f80); b < 0x7f80; b++ {
		v := float64(BF16ToF32(b))
		if got, want := float32(logC(v)), float32(math.Log(v)); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("log(%v): C %v, Go %v", v, got, want)
		}
	}
}

func TestSoftmaxBF16FastMatchesGeneric(t *testing.T) {
	// the widened C rows (the fused rows have their own test: softmax_bf16_test.go)
	noBF16Rows = true
	defer func() { noBF16Rows = false }()
	rng := rand.New(rand.NewSource(22))
	for _, N := range []int64{1, 2, 7, 15, 16, 17, 33, 64, 100, 257} {
		for _, pad := range []int64{0, 5} {
			M := int64(47)
			x, xb := halfMatrix(rng, BFloat16, M, N, N+pad)
			// rows of equal maxima of both zero signs, and a lone maximum
			for j := int64(0); j < N; j++ {
				xb[6*(N+pad)+j] = F32ToBF16(-3)
				xb[11*(N+pad)+j] = F32ToBF16(-100)
			}
			xb[6*(N+pad)] = 0x8000
			xb[6*(N+pad)+N-1] = 0
			xb[11*(N+pad)+N/2] = 0
			g, _ := halfMatrix(rng, BFloat16, M, N, N+pad)
			for _, log := range []bool{false, true} {
				var res [2][][]uint16
				for k, generic := range []bool{false, true} {
					noCSoftmax = generic
					y, yb := emptyLike16(x)
					err := Softmax(log, y, x, SoftmaxOpts{LastDim: true, Inner: 1})
					gi, gib := emptyLike16(x)
					if err == nil {
						err = SoftmaxBackward(log, gi, g, y, true)
					}
					// in place backward (grad_input over grad_output)
					g2, g2b := emptyLike16(x)
					copy(g2b, unsafe.Slice((*uint16)(g.Ptr), len(g2b)))
					if err == nil {
						err = SoftmaxBackward(log, g2, g2, y, true)
					}
					noCSoftmax = false
					if err != nil {
						t.Fatal(err)
					}
					res[k] = [][]uint16{yb, gib, g2b}
				}
				for i := range res[0] {
					sameBits16(t, fmt.Sprintf("N=%d pad=%d log=%v softmax output %d", N, pad, log, i), res[0][i], res[1][i])
				}
			}
		}
	}
}

// bfloat16 sums (and means) over every layout of the sum test, on awkward values: the
// column-sum fast path gives the generic loop2d's bits.
func TestSumBF16FastMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewSource(23))
	shapes := [][]int64{{1024, 256}, {1024, 192}, {1024, 64}, {16, 64, 64}, {64, 64}, {7, 500}, {500, 7}, {3, 33, 17},
		{300, 40}, {40, 300}, {37, 16}, {37, 17}, {9, 15}, {2, 3, 4, 5}, {129, 33}, {4100, 3}, {5, 31, 48}}
	for _, sh := range shapes {
		nd := len(sh)
		numel := int64(1)
		for _, v := range sh {
			numel *= v
		}
		for trial := 0; trial < 6; trial++ {
			perm := rng.Perm(nd)
			strides := make([]int64, nd)
			st := int64(1)
			for i := nd - 1; i >= 0; i-- {
				strides[perm[i]] = st
				st *= sh[perm[i]]
			}
			if trial == 5 && nd > 1 {
				strides[rng.Intn(nd)] = 0
			}
			red := make([]bool, nd)
			for i := range red {
				red[i] = rng.Intn(2) == 0
			}
			if trial <= 1 { // the bias-gradient sums: leading dims reduced, contiguous input
				for i := range red {
					red[i] = i < nd-1
					strides[i] = 1
					for _, v := range sh[i+1:] {
						strides[i] *= v
					}
				}
			}
			outSizes := make([]int64, nd)
			nOut := int64(1)
			for i := range sh {
				outSizes[i] = sh[i]
				if red[i] {
					outSizes[i] = 1
				}
				nOut *= outSizes[i]
			}
			// rows of awkwardHalf values; the special rows (NaN, inf) only now and then,
			// so that most sums stay finite
			vals := make([]uint16, numel)
			for i := int64(0); i < numel; i += 97 {
				r := int64(rng.Intn(5))
				if r == 1 && rng.Intn(4) != 0 {
					r = 0
				}
				copy(vals[i:], awkwardHalf(rng, BFloat16, r, min(97, numel-i)))
			}
			in := Tensor{Ptr: unsafe.Pointer(&vals[0]), DType: BFloat16, Sizes: sh, Strides: strides}
			for _, mean := range []bool{false, true} {
				for _, threads := range []int{1, 2} {
					o := SumOpts{Mean: mean, Threads: threads}
					want := runSumBytes(t, in, red, outSizes, nOut, o, true)
					got := runSumBytes(t, in, red, outSizes, nOut, o, false)
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("%v strides %v reduced %v mean %v: fast and generic differ at byte %d", sh, strides, red, mean, i)
						}
					}
				}
			}
		}
	}
}

// bfloat16 Bernoulli with a scalar p through the float32 batch kernel gives the generic
// walk's values, for odd lengths and the edge probabilities.
func TestBernoulliBF16FastMatchesGeneric(t *testing.T) {
	s := Stream{Seed: 0x9e37_79b9, Offset: 5}
	for _, n := range []int64{1, 3, 4, 17, 1023, 70001} {
		for _, p := range []float64{0, 1e-9, 0.1, 0.5, 0.9, 1 - 1e-9, 1} {
			var res [2][]uint16
			for k, generic := range []bool{false, true} {
				buf := make([]uint16, n)
				for i := range buf {
					buf[i] = 0x7fc1
				}
				noFastBernoulli = generic
				err := Bernoulli(Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: BFloat16, Sizes: []int64{n}, Strides: []int64{1}}, nil, s, p)
				noFastBernoulli = false
				if err != nil {
					t.Fatal(err)
				}
				res[k] = buf
			}
			sameBits16(t, fmt.Sprintf("bernoulli n=%d p=%v", n, p), res[0], res[1])
		}
	}
}

// bfloat16 batch norm channels in C give the bits of the float32 fast path on the widened
// values, rounded once: channels of each kind of awkwardHalf row, odd spatial sizes,
// padded strides, training and eval, float32 and bfloat16 saved statistics. (Against the
// generic loop's single float64 sums they agree only to rounding: a channel of +-3.3e38
// values sums differently in four lanes.)
func TestBatchNormBF16FastMatchesFloat32(t *testing.T) {
	if !haveCNorm {
		t.Skip("no C rows")
	}
	// the reference is the float32 path in float64 lanes (the AVX-512 float32 kernels sum
	// in float32 like torch, and near the range limits their sums overflow where float64
	// ones cancel)
	savedF32 := bnF32Vec
	bnF32Vec = false
	defer func() { bnF32Vec = savedF32 }()
	rng := rand.New(rand.NewSource(24))
	N, C := int64(5), int64(6)
	for _, S := range []int64{1, 7, 16, 37, 100} {
		for _, pad := range []int64{0, 3} {
			Sp := S + pad
			mk16 := func() (Tensor, []uint16) {
				buf := make([]uint16, N*C*Sp)
				for i := range buf {
					buf[i] = 0x7fc1
				}
				for n := int64(0); n < N; n++ {
					for c := int64(0); c < C; c++ {
						copy(buf[(n*C+c)*Sp:], awkwardHalf(rng, BFloat16, c, S))
					}
				}
				return Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: BFloat16, Sizes: []int64{N, C, S}, Strides: []int64{C * Sp, Sp, 1}}, buf
			}
			x, xbuf := mk16()
			g, gbuf := mk16()
			widen := func(t16 Tensor, b16 []uint16) Tensor {
				b := make([]float32, len(b16))
				for i, v := range b16 {
					b[i] = BF16ToF32(v)
				}
				return Tensor{Ptr: unsafe.Pointer(&b[0]), DType: Float32, Sizes: t16.Sizes, Strides: t16.Strides}
			}
			x32, g32 := widen(x, xbuf), widen(g, gbuf)
			round := func(b []float32) []uint16 {
				r := make([]uint16, len(b))
				for i, v := range b {
					r[i] = F32ToBF16(v)
				}
				return r
			}
			w, b := make([]float32, C), make([]float32, C)
			for c := range w {
				w[c], b[c] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			}
			for _, statDT := range []DType{Float32, BFloat16} {
				for _, training := range []bool{true, false} {
					var o16 [2][][]uint16
					var o32 [2][][]float32
					for k, f32 := range []bool{false, true} {
						xk, gk := x, g
						out, ob := emptyLike16(Tensor{DType: BFloat16, Sizes: x.Sizes, Strides: []int64{C * Sp, Sp, 1}})
						out.Sizes, out.Strides = x.Sizes, x.Strides
						ob = ob[:N*C*Sp]
						var ob32, gib32 []float32
						if f32 {
							xk, gk = x32, g32
							ob32 = make([]float32, N*C*Sp)
							out = Tensor{Ptr: unsafe.Pointer(&ob32[0]), DType: Float32, Sizes: x.Sizes, Strides: x.Strides}
						}
						sm16, si16 := make([]uint16, C), make([]uint16, C)
						sm, si := make([]float32, C), make([]float32, C)
						smt, sit := vec32(sm), vec32(si)
						if statDT == BFloat16 {
							smt = Tensor{Ptr: unsafe.Pointer(&sm16[0]), DType: BFloat16, Sizes: []int64{C}, Strides: []int64{1}}
							sit = Tensor{Ptr: unsafe.Pointer(&si16[0]), DType: BFloat16, Sizes: []int64{C}, Strides: []int64{1}}
						}
						rm, rv := []float32{0.1, 0.2, 0.3, -1, 0, 5}, []float32{1, 2, 3, 0.5, 1e-3, 7}
						rmt, rvt, wt, bt := vec32(rm), vec32(rv), vec32(w), vec32(b)
						err := BatchNormForward(out, &smt, &sit, xk, &wt, &bt, &rmt, &rvt, training, 0.1, 1e-5)
						if !training {
							copy(sm, []float32{0.5, -0.5, 1, 0, 2, -3})
							copy(si, []float32{1, 2, 0.5, 3, 0.25, 1})
							smt, sit = vec32(sm), vec32(si)
						}
						gin, gib := emptyLike16(Tensor{DType: BFloat16, Sizes: x.Sizes, Strides: []int64{C * Sp, Sp, 1}})
						gin.Sizes, gin.Strides = x.Sizes, x.Strides
						if f32 {
							gib32 = make([]float32, len(gib))
							gin = Tensor{Ptr: unsafe.Pointer(&gib32[0]), DType: Float32, Sizes: x.Sizes, Strides: x.Strides}
						}
						gw, gb := make([]float32, C), make([]float32, C)
						gwt, gbt := vec32(gw), vec32(gb)
						if err == nil {
							err = BatchNormBackward(&gin, &gwt, &gbt, gk, xk, &wt, &rmt, &rvt, &smt, &sit, training, 1e-5)
						}
						if err != nil {
							t.Fatal(err)
						}
						if f32 {
							ob, gib = round(ob32), round(gib32)
						}
						o16[k] = [][]uint16{ob, gib, sm16, si16}
						o32[k] = [][]float32{sm, si, rm, rv, gw, gb}
					}
					for i := range o16[0] {
						what := fmt.Sprintf("S=%d pad=%d stat %v training=%v batch norm bf16 output %d", S, pad, statDT, training, i)
						if bnBF16Vec { // float32 math (bn_bf16_cgo.go): near the float64 path, not its bits
							chans := C
							if i >= 2 {
								chans = 1 // the saved statistics: one array
							}
							nearBF16(t, what, o16[0][i], o16[1][i], chans, Sp)
							continue
						}
						sameBits16(t, what, o16[0][i], o16[1][i])
					}
					for i := range o32[0] {
						what := fmt.Sprintf("S=%d pad=%d stat %v training=%v batch norm float32 output %d", S, pad, statDT, training, i)
						if bnBF16Vec {
							near32(t, what, o32[0][i], o32[1][i])
							continue
						}
						sameBits32(t, what, o32[0][i], o32[1][i])
					}
				}
			}
		}
	}
}

// Elementwise ops with bfloat16 operands through F32Mixed (one C call per run) give the
// bits of rowF32's conversion chunks: every C op, random operand kinds (float32,
// bfloat16, scalars, bool/uint8 masks), odd lengths, awkward values, in place.
func TestElementwiseBF16MixedMatchesChunks(t *testing.T) {
	rng := rand.New(rand.NewSource(25))
	var names []string
	for name, op := range EWOps {
		if op.F32Mixed != nil {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Skip("no C elementwise ops")
	}
	sort.Strings(names)
	for _, name := range names {
		op := EWOps[name]
		for trial := 0; trial < 12; trial++ {
			n := []int64{1, 3, 17, 511, 512, 513, 1023, 1025, 4099, 70001}[trial%10]
			mk := func(kind int) Tensor {
				st := []int64{1}
				switch kind {
				case 0:
					v := make([]float32, n)
					for i := range v {
						v[i] = BF16ToF32(awkwardHalf(rng, BFloat16, int64(rng.Intn(5)), 1)[0]) * (1 + float32(rng.Intn(3))/1024)
					}
					return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: Float32, Sizes: []int64{n}, Strides: st}
				case 1:
					v := make([]uint16, n)
					for i := int64(0); i < n; i += 64 {
						copy(v[i:], awkwardHalf(rng, BFloat16, int64(rng.Intn(5)), min(64, n-i)))
					}
					return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: BFloat16, Sizes: []int64{n}, Strides: st}
				case 2: // a bfloat16 scalar broadcast
					v := awkwardHalf(rng, BFloat16, int64(rng.Intn(5)), 1)
					return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: BFloat16, Sizes: []int64{n}, Strides: []int64{0}}
				default:
					v := make([]uint8, n)
					for i := range v {
						v[i] = uint8(rng.Intn(256))
						if kind == 3 {
							v[i] &= 1
						}
					}
					dt := Bool
					if kind == 4 {
						dt = Uint8
					}
					return Tensor{Ptr: unsafe.Pointer(&v[0]), DType: dt, Sizes: []int64{n}, Strides: st}
				}
			}
			ins := make([]Tensor, op.NIn)
			for j := range ins {
				ins[j] = mk([]int{0, 1, 1, 2, 3, 4}[rng.Intn(6)])
			}
			outKind := rng.Intn(2)
			inPlace := trial == 11 && ins[0].DType == BFloat16 && ins[0].Strides[0] == 1
			params := [][]float64{{0, 1, 1, 0}, {1, 1.5, 2, 0}, {0.5, 2, 0.5, 1}}[trial%3]
			var res [2][]byte
			for k, chunks := range []bool{false, true} {
				out := mk(outKind)
				if inPlace {
					out = mk(1)
					copy(unsafe.Slice((*uint16)(out.Ptr), n), unsafe.Slice((*uint16)(ins[0].Ptr), n))
				}
				args := append([]Tensor(nil), ins...)
				if inPlace {
					args[0] = out
				}
				noEWMixed = chunks
				err := Elementwise(op, Float32, out, args, params)
				noEWMixed = false
				if err != nil {
					t.Fatal(err)
				}
				res[k] = append([]byte(nil), unsafe.Slice((*byte)(out.Ptr), n*int64(out.DType.Size()))...)
			}
			for i := range res[0] {
				if res[0][i] != res[1][i] {
					t.Fatalf("%s n=%d trial %d: byte %d differs: mixed %#x, chunks %#x", name, n, trial, i, res[0][i], res[1][i])
				}
			}
		}
	}
}
