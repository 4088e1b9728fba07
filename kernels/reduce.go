package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Reductions work on a 2-D view [M, N] (any strides) reducing N into M outputs: the caller
// permutes the reduced dims last and flattens (copying only when no view exists).

// Reduce kinds.
const (
	RedSum = iota
	RedMean
	RedProd
	RedAmax
	RedAmin
	RedVar  // p[0] = correction; p[1] != 0 takes the square root (std)
	RedNorm // p[0] = ord
	RedLogSumExp
	RedAll
	RedAny
)

func check2D(name string, in Tensor, outs ...Tensor) error {
	if in.Dim() != 2 {
		return fmt.Errorf("%s: input must be 2-D [M, N], got %v", name, in.Sizes)
	}
	for _, o := range outs {
		if o.Dim() != 1 || o.Sizes[0] != in.Sizes[0] {
			return fmt.Errorf("%s: output must be 1-D of %d, got %v", name, in.Sizes[0], o.Sizes)
		}
	}
	return nil
}

// rowLoader reads a row (or column) chunk of an [M,N] input as float32 or float64.
type rowLoader struct {
	dt   DType
	base unsafe.Pointer
	sm   int64 // byte strides
	sn   int64
	f32  []float32
	f64  []float64
	tmp  []float64
}

func newRowLoader(in Tensor) *rowLoader {
	es := int64(in.DType.Size())
	return &rowLoader{dt: in.DType, base: in.Ptr, sm: in.Strides[0] * es, sn: in.Strides[1] * es,
		f32: make([]float32, ewChunk), f64: make([]float64, ewChunk)}
}

// useF32 reports whether the dtype reduces in float32 chunks (float32, bf16, fp16).
func useF32(dt DType) bool { return dt == Float32 || dt == BFloat16 || dt == Float16 }

func (r *rowLoader) chunk32(m, lo, n int64) []float32 {
	return loadF32(r.f32[:n], r.dt, at(r.base, m*r.sm+lo*r.sn), r.sn, &r.tmp)
}

func (r *rowLoader) chunk64(m, lo, n int64) []float64 {
	p := at(r.base, m*r.sm+lo*r.sn)
	if r.dt == Float64 && r.sn == 8 {
		return unsafe.Slice((*float64)(p), n)
	}
	loadFloat(r.f64[:n], r.dt, p, r.sn)
	return r.f64[:n]
}

// each calls f on the row's chunks as float64 (converting float32 chunks).
func (r *rowLoader) each(m, n int64, f func(x []float64)) {
	for lo := int64(0); lo < n; lo += ewChunk {
		c := min(ewChunk, n-lo)
		if useF32(r.dt) {
			x := r.chunk32(m, lo, c)
			d := r.f64[:c]
			for i, v := range x {
				d[i] = float64(v)
			}
			f(d)
		} else {
			f(r.chunk64(m, lo, c))
		}
	}
}

// sum32 sums a float32 chunk with four accumulators.
func sum32(x []float32) float32 {
	var a0, a1, a2, a3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a0 += x[i]
		a1 += x[i+1]
		a2 += x[i+2]
		a3 += x[i+3]
	}
	for ; i < len(x); i++ {
		a0 += x[i]
	}
	return (a0 + a1) + (a2 + a3)
}

func sum64(x []float64) float64 {
	var a0, a1, a2, a3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a0 += x[i]
		a1 += x[i+1]
		a2 += x[i+2]
		a3 += x[i+3]
	}
	for ; i < len(x); i++ {
		a0 += x[i]
	}
	return (a0 + a1) + (a2 + a3)
}

// rowSum: float32 chunks summed with 4 accumulators, chunk sums accumulated in float64.
func (r *rowLoader) rowSum(m, n int64) float64 {
	total := 0.0
	for lo := int64(0); lo < n; lo += ewChunk {
		c := min(ewChunk, n-lo)
		if useF32(r.dt) {
			total += float64(sum32(r.chunk32(m, lo, c)))
		} else {
			total += sum64(r.chunk64(m, lo, c))
		}
	}
	return total
}

func storeOne(o Tensor, m int64, v float64) {
	storeFloat(at(o.Ptr, m*o.Strides[0]*int64(o.DType.Size())), 0, o.DType, []float64{v})
}

// Reduce reduces in [M,N] along N into out [M].
func Reduce(kind int, out, in Tensor, p []float64) error {
	if err := check2D("reduce", in, out); err != nil {
		return err
	}
	M, N := in.Sizes[0], in.Sizes[1]
	if (kind == RedSum || kind == RedMean) && in.Strides[1] != 1 && in.Strides[0] == 1 && M > 1 && N > 1 {
		return reduceColumns(kind, out, in)
	}
	ParallelFor(M, max(N, 1)*2, func(lo, hi int64) {
		r := newRowLoader(in)
		for m := lo; m < hi; m++ {
			storeOne(out, m, reduceRow(kind, r, m, N, p))
		}
	})
	return nil
}

func reduceRow(kind int, r *rowLoader, m, N int64, p []float64) float64 {
	switch kind {
	case RedSum:
		return r.rowSum(m, N)
	case RedMean:
		return r.rowSum(m, N) / float64(N)
	case RedProd:
		acc := 1.0
		r.each(m, N, func(x []float64) {
			for _, v := range x {
				acc *= v
			}
		})
		return acc
	case RedAmax, RedAmin:
		acc := math.Inf(1)
		if kind == RedAmax {
			acc = math.Inf(-1)
		}
		r.each(m, N, func(x []float64) {
			for _, v := range x {
				if v != v {
					acc = v
					return
				}
				if acc == acc && ((kind == RedAmax && v > acc) || (kind == RedAmin && v < acc)) {
					acc = v
				}
			}
		})
		return acc
	case RedAll, RedAny:
		res := kind == RedAll
		done := false
		r.each(m, N, func(x []float64) {
			for _, v := range x {
				if done {
					return
				}
				if (v != 0) != res {
					res, done = !res, true
				}
			}
		})
		if res {
			return 1
		}
		return 0
	case RedVar:
		mean := r.rowSum(m, N) / float64(N)
		ss := 0.0
		r.each(m, N, func(x []float64) {
			for _, v := range x {
				d := v - mean
				ss += d * d
			}
		})
		v := ss / math.Max(0, float64(N)-p[0])
		if p[1] != 0 {
			return math.Sqrt(v)
		}
		return v
	case RedNorm:
		ord := p[0]
		acc := 0.0
		switch {
		case math.IsInf(ord, 1):
			r.each(m, N, func(x []float64) {
				for _, v := range x {
					if a := math.Abs(v); a > acc || a != a {
						acc = a
					}
				}
			})
			return acc
		case math.IsInf(ord, -1):
			acc = math.Inf(1)
			r.each(m, N, func(x []float64) {
				for _, v := range x {
					if a := math.Abs(v); a < acc || a != a {
						acc = a
					}
				}
			})
			return acc
		case ord == 0:
			r.each(m, N, func(x []float64) {
				for _, v := range x {
					if v != 0 {
						acc++
					}
				}
			})
			return acc
		case ord == 1:
			r.each(m, N, func(x []float64) {
				for _, v := range x {
					acc += math.Abs(v)
				}
			})
			return acc
		case ord == 2:
			r.each(m, N, func(x []float64) {
				for _, v := range x {
					acc += v * v
				}
			})
			return math.Sqrt(acc)
		default:
			r.each(m, N, func(x []float64) {
				for _, v := range x {
					acc += math.Pow(math.Abs(v), ord)
				}
			})
			return math.Pow(acc, 1/ord)
		}
	case RedLogSumExp:
		mx := math.Inf(-1)
		r.each(m, N, func(x []float64) {
			for _, v := range x {
				if v > mx || v != v {
					mx = v
				}
			}
		})
		if math.IsInf(mx, 0) || mx != mx {
			if math.IsInf(mx, -1) {
				return mx
			}
			// +inf or NaN dominate
			s := 0.0
			r.each(m, N, func(x []float64) {
				for _, v := range x {
					s += math.Exp(v - mx)
				}
			})
			return mx + math.Log(s)
		}
		s := 0.0
		r.each(m, N, func(x []float64) {
			for _, v := range x {
				s += math.Exp(v - mx)
			}
		})
		return mx + math.Log(s)
	}
	panic(fmt.Sprintf("unknown reduction kind %d", kind))
}

// reduceColumns sums an [M,N] input whose M axis is contiguous (e.g. a bias gradient,
// summing a [B, C] tensor over B): rows of N are added into M column accumulators.
func reduceColumns(kind int, out, in Tensor) error {
	M, N := in.Sizes[0], in.Sizes[1]
	ParallelFor((M+ewChunk-1)/ewChunk, N*ewChunk, func(blo, bhi int64) {
		r := newRowLoader(in)
		// Column blocks: treat the transposed view, so chunks run along M.
		r.sm, r.sn = r.sn, r.sm
		acc := make([]float64, ewChunk)
		acc32 := make([]float32, ewChunk)
		for b := blo; b < bhi; b++ {
			lo := b * ewChunk
			c := min(ewChunk, M-lo)
			a := acc[:c]
			clear(a)
			if useF32(r.dt) {
				a32 := acc32[:c]
				for n0 := int64(0); n0 < N; n0 += 256 {
					clear(a32)
					for n := n0; n < min(N, n0+256); n++ {
						x := r.chunk32(n, lo, c)
						for j, v := range x {
							a32[j] += v
						}
					}
					for j, v := range a32 {
						a[j] += float64(v)
					}
				}
			} else {
				for n := int64(0); n < N; n++ {
					x := r.chunk64(n, lo, c)
					for j, v := range x {
						a[j] += v
					}
				}
			}
			for j, v := range a {
				if kind == RedMean {
					v /= float64(N)
				}
				storeOne(out, lo+int64(j), v)
			}
		}
	})
	return nil
}

// ArgReduce finds the max (isMin false) or min of each row with its first index; NaN wins
// (first NaN), as torch's max/min/argmax/argmin. vals may have a nil Ptr to skip values.
func ArgReduce(isMin bool, vals, idx, in Tensor) error {
	if err := check2D("argreduce", in, idx); err != nil {
		return err
	}
	if idx.DType != Int64 {
		return fmt.Errorf("argreduce: indices must be int64")
	}
	M, N := in.Sizes[0], in.Sizes[1]
	if N == 0 {
		return fmt.Errorf("argreduce: cannot reduce over an empty dimension")
	}
	if !in.DType.IsFloat() {
		if err := checkIntArg(in, vals); err != nil {
			return err
		}
		return argReduceInt(isMin, vals, idx, in)
	}
	ParallelFor(M, N, func(lo, hi int64) {
		r := newRowLoader(in)
		for m := lo; m < hi; m++ {
			best := math.NaN()
			bi := int64(-1)
			var pos int64
			r.each(m, N, func(x []float64) {
				if bi >= 0 && best != best {
					return
				}
				for i, v := range x {
					switch {
					case bi < 0:
						best, bi = v, pos+int64(i)
					case best != best:
					case v != v:
						best, bi = v, pos+int64(i)
					case (!isMin && v > best) || (isMin && v < best):
						best, bi = v, pos+int64(i)
					}
				}
				pos += int64(len(x))
			})
			*(*int64)(at(idx.Ptr, m*idx.Strides[0]*8)) = bi
			if vals.Ptr != nil {
				storeOne(vals, m, best)
			}
		}
	})
	return nil
}

// Cumsum writes the running sum along N of in [M,N] into out [M,N] (float64 accumulator
// for float inputs, as exact as torch's).
func Cumsum(out, in Tensor) error {
	if in.Dim() != 2 || out.Dim() != 2 || out.Sizes[0] != in.Sizes[0] || out.Sizes[1] != in.Sizes[1] {
		return fmt.Errorf("cumsum: shapes %v, %v", out.Sizes, in.Sizes)
	}
	M, N := in.Sizes[0], in.Sizes[1]
	oes := int64(out.DType.Size())
	ParallelFor(M, N*2, func(lo, hi int64) {
		r := newRowLoader(in)
		buf := make([]float64, ewChunk)
		// torch's CPU accumulator type: double for float32/float64, float for bf16/fp16.
		acc32 := in.DType == BFloat16 || in.DType == Float16
		for m := lo; m < hi; m++ {
			acc := 0.0
			var pos int64
			r.each(m, N, func(x []float64) {
				b := buf[:len(x)]
				for i, v := range x {
					if acc32 {
						acc = float64(float32(acc) + float32(v))
					} else {
						acc += v
					}
					b[i] = acc
				}
				storeFloat(at(out.Ptr, (m*out.Strides[0]+pos*out.Strides[1])*oes), out.Strides[1]*oes, out.DType, b)
				pos += int64(len(x))
			})
		}
	})
	return nil
}
