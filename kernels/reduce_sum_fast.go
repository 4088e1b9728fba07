package kernels

import "unsafe"

// Fast paths of the CPU-order sum for inputs stored in the accumulation type (float32
// summed in float32, float64 in float64): the same per-output arithmetic as loop2d, but
// reading memory directly, summing many columns per pass and splitting independent
// outputs over the workers. sum_test.go checks them bit for bit against loop2d.

// sumColChunk bounds the columns summed together (their cascade accumulators stay in
// L1); a multiple of every 4*lanes block width.
const sumColChunk = 512

// nativeSum reports whether the fast paths apply: the input is stored as A and sums are
// kept in A.
func (s *sumIter[A]) nativeSum() bool {
	return nativeOf[A](s.in.DType) && nativeOf[A](s.scalarDT)
}

func elemPtr[A sumFloat](p unsafe.Pointer, off int64) *A {
	var z A
	return (*A)(unsafe.Add(p, off*int64(unsafe.Sizeof(z))))
}

// cascadeSum is multiRowSum over memory: nrows series, term i of series k at element
// offset i*is + k*ks from p, summed with the cascade of sumLevels accumulators. acc
// (at least sumLevels*nrows) is scratch; the sums are left in acc[:nrows].
func cascadeSum[A sumFloat](p unsafe.Pointer, is, ks, size, nrows int64, acc []A) {
	acc = acc[:sumLevels*nrows]
	levelPower := max(int64(4), ceilLog2(size)/sumLevels)
	if ks == 1 && size*nrows >= cgoCascadeMin && !noCSum {
		cascadeC(p, is, size, nrows, levelPower, acc)
		return
	}
	clear(acc)
	levelStep := int64(1) << levelPower
	levelMask := levelStep - 1
	a0 := acc[:nrows]
	i := int64(0)
	for i+levelStep <= size {
		for j := int64(0); j < levelStep; j, i = j+1, i+1 {
			addTerms(a0, elemPtr[A](p, i*is), ks)
		}
		for j := int64(1); j < sumLevels; j++ {
			lo := acc[(j-1)*nrows : j*nrows]
			hi := acc[j*nrows : (j+1)*nrows]
			for k := range hi {
				hi[k] += lo[k]
				lo[k] = 0
			}
			if i&(levelMask<<(j*levelPower)) != 0 {
				break
			}
		}
	}
	for ; i < size; i++ {
		addTerms(a0, elemPtr[A](p, i*is), ks)
	}
	for j := int64(1); j < sumLevels; j++ {
		hi := acc[j*nrows : (j+1)*nrows]
		for k := range a0 {
			a0[k] += hi[k]
		}
	}
}

// addTerms adds a[k] += p[k*ks].
func addTerms[A sumFloat](a []A, p *A, ks int64) {
	if ks == 1 {
		r := unsafe.Slice(p, len(a))
		for k := range a {
			a[k] += r[k]
		}
		return
	}
	q := unsafe.Pointer(p)
	st := ks * int64(unsafe.Sizeof(a[0]))
	for k := range a {
		a[k] += *(*A)(q)
		q = unsafe.Add(q, st)
	}
}

// rowSumP is rowSum over size elements at element stride st from p.
func rowSumP[A sumFloat](p unsafe.Pointer, st, size int64) A {
	var acc [sumLevels * 4]A
	sizeIlp := size / 4
	cascadeSum(p, 4*st, st, sizeIlp, 4, acc[:])
	r := acc[0]
	for i := sizeIlp * 4; i < size; i++ {
		r += *elemPtr[A](p, i*st)
	}
	return r + acc[1] + acc[2] + acc[3]
}

// loop2dFast is loop2d for nativeSum iterators; d0 is the reduced dim (os == 0).
func (s *sumIter[A]) loop2dFast(inOff, outOff int64, d0, d1 sumDim) {
	size0, size1 := d0.size, d1.size
	is0, is1 := d0.is, d1.is
	base := unsafe.Pointer(elemPtr[A](s.in.Ptr, inOff))
	// split over the workers when every j writes its own output
	par := func(n, cost int64, fn func(lo, hi int64)) {
		if d1.os == 0 {
			fn(0, n)
			return
		}
		ParallelFor(n, cost, fn)
	}
	store := func(j int64, v A) { s.acc[outOff+j*d1.os] += v }
	switch {
	case is0 == 1 && size0 >= s.vecN: // contiguous inner reduction: lanes x 4 interleaved series
		L := s.lanes
		nser := 4 * L
		vecSize := size0 / L
		sizeIlp := vecSize / 4
		if sizeIlp*nser >= cgoCascadeMin && !noCSum {
			res := make([]A, size1)
			power := max(int64(4), ceilLog2(sizeIlp)/sumLevels)
			par(size1, size0, func(lo, hi int64) {
				acc := make([]A, sumLevels*nser)
				innerC(unsafe.Pointer(elemPtr[A](base, lo*is1)), is1, hi-lo, size0, L, power, acc, res[lo:hi])
			})
			for j, v := range res {
				store(int64(j), v)
			}
			return
		}
		par(size1, size0, func(lo, hi int64) {
			acc := make([]A, sumLevels*nser)
			for j := lo; j < hi; j++ {
				pj := unsafe.Pointer(elemPtr[A](base, j*is1))
				x := unsafe.Slice((*A)(pj), size0)
				var final A
				for k := vecSize * L; k < size0; k++ {
					final += x[k]
				}
				cascadeSum(pj, nser, 1, sizeIlp, nser, acc)
				for l := int64(0); l < L; l++ {
					r := acc[l]
					for v := sizeIlp * 4; v < vecSize; v++ {
						r += x[v*L+l]
					}
					final += r + acc[L+l] + acc[2*L+l] + acc[3*L+l]
				}
				store(j, final)
			}
		})
	case is0 < is1 && !(is1 == 1 && size1 >= s.vecN): // strided inner reduction
		par(size1, size0, func(lo, hi int64) {
			for j := lo; j < hi; j++ {
				store(j, rowSumP[A](unsafe.Pointer(elemPtr[A](base, j*is1)), is0, size0))
			}
		})
	default: // outer reduction: blocked columns cascade together, the rest row_sum
		blocked := size1 / 4 * 4
		if is1 == 1 && size1 >= s.vecN {
			blocked = size1 / (4 * s.lanes) * 4 * s.lanes
		}
		// chunks of columns, at least one per worker when there is enough work
		bw := int64(4)
		if is1 == 1 && size1 >= s.vecN {
			bw = 4 * s.lanes
		}
		width := int64(sumColChunk)
		if w := int64(Workers()); d1.os != 0 && blocked*size0 >= 2*Grain && w > 1 {
			width = min(width, max(bw, (blocked/w+bw-1)/bw*bw))
		}
		chunks := (blocked + width - 1) / width
		res := make([]A, size1)
		par(chunks+size1-blocked, size0*min(blocked, width), func(lo, hi int64) {
			var acc []A
			for c := lo; c < hi; c++ {
				if c >= chunks {
					j := blocked + c - chunks
					res[j] = rowSumP[A](unsafe.Pointer(elemPtr[A](base, j*is1)), is0, size0)
					continue
				}
				j0 := c * width
				n := min(width, blocked-j0)
				if acc == nil {
					acc = make([]A, sumLevels*width)
				}
				cascadeSum(unsafe.Pointer(elemPtr[A](base, j0*is1)), is0, is1, size0, n, acc)
				copy(res[j0:j0+n], acc[:n])
			}
		})
		for j, v := range res {
			store(int64(j), v)
		}
	}
}

// bf16Cols is loop2d's contiguous outer reduction (column sums) of a bfloat16 input into
// a bfloat16 output, kept in bfloat16 (or float32 for mean) and summed in float32. The
// float32 loop2dFast over an exactly widened copy adds the same terms in the same order
// (the cascade of every column in the 4*lanes blocking, row_sum for the rest); this path
// reads the bfloat16 rows directly: the blocked columns by a cascade that widens as it
// loads (in C; split over the workers in column chunks), the few remaining columns from a
// widened copy of just those columns. Each column's sum is then added into the output
// with loop2d's rounding store. It reports false where loop2d's generic code must run.
func (s *sumIter[A]) bf16Cols(inOff, outOff int64, d0, d1 sumDim) bool {
	// (a bfloat16 output rounds every NaN to 0x7fc0: the NaNs that loop2d's load rounds
	// and the raw widening keeps reach it as the same 0x7fc0)
	if noFastSum || s.in.DType != BFloat16 || s.outDT != BFloat16 || !nativeOf[A](Float32) || (s.scalarDT != BFloat16 && s.scalarDT != Float32) ||
		d0.os != 0 || d1.os == 0 || (d0.is == 1 && d0.size >= s.vecN) || d1.is != 1 || d1.size < s.vecN {
		return false
	}
	const lanes = sumVecBytes / 4
	if lanes != s.lanes {
		return false // the float32 loop's blocking would not be this sum's
	}
	size0, size1, is0 := d0.size, d1.size, d0.is
	res := make([]float32, size1)
	bw := int64(4 * lanes)
	blocked := size1 / bw * bw
	if blocked > 0 {
		base := at(s.in.Ptr, inOff*2)
		power := max(int64(4), ceilLog2(size0)/sumLevels)
		width := int64(sumColChunk)
		if w := int64(Workers()); blocked*size0 >= 2*Grain && w > 1 {
			width = min(width, max(bw, (blocked/w+bw-1)/bw*bw))
		}
		chunks := (blocked + width - 1) / width
		ParallelFor(chunks, size0*min(blocked, width), func(lo, hi int64) {
			for c := lo; c < hi; c++ {
				j0 := c * width
				n := min(width, blocked-j0)
				cascadeBF16(at(base, j0*2), is0, size0, n, power, res[j0:j0+n])
			}
		})
	}
	if rest := size1 - blocked; rest > 0 {
		sp := getF32(int(size0 * rest))
		buf := *sp
		for i := int64(0); i < size0; i++ {
			bf16ToF32s(buf[i*rest:(i+1)*rest], unsafe.Slice((*uint16)(at(s.in.Ptr, (inOff+i*is0+blocked)*2)), rest))
		}
		for j := int64(0); j < rest; j++ {
			res[blocked+j] = rowSumP[float32](unsafe.Pointer(&buf[j]), rest, size0)
		}
		putF32(sp)
	}
	for j, v := range res {
		s.store(s.outIdx(outOff+int64(j)*d1.os), A(v))
	}
	return true
}

// cascadeBF16 is cascadeSum over nrows contiguous bfloat16 columns (term i of column k
// at element i*is + k from p), widened exactly to float32: the sums into out[:nrows].
func cascadeBF16(p unsafe.Pointer, is, size, nrows, power int64, out []float32) {
	if nrows%32 == 0 && !noCSum && cgoCascadeMin < 1<<62 {
		cascadeBF16C(p, is, size, nrows, power, out)
		return
	}
	// no C: widen the block row by row and run the float32 cascade over it
	sp := getF32(int(size * nrows))
	buf := *sp
	for i := int64(0); i < size; i++ {
		bf16ToF32s(buf[i*nrows:(i+1)*nrows], unsafe.Slice((*uint16)(at(p, i*is*2)), nrows))
	}
	acc := make([]float32, sumLevels*nrows)
	cascadeSum(unsafe.Pointer(unsafe.SliceData(buf)), nrows, 1, size, nrows, acc)
	copy(out, acc[:nrows])
	putF32(sp)
}

// noFastSum forces the generic loop2d, noCSum the Go cascade (tests compare them).
var noFastSum, noCSum bool
