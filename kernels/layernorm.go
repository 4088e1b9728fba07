package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Layer and group normalisation with torch's CPU rounding: float32 and reduced-precision
// inputs compute in float32 (rounding each operation as torch's vectorised kernels do,
// including the multiply-adds its compiler fuses), float64 in float64. Reductions follow
// the order of torch's AVX-512 reduce_all: vecW lanes accumulated strided, then a
// pairwise tree over the lanes (inputs shorter than one vector: sequential).

const vecW32 = 16 // float32 lanes of one AVX-512 vector
const vecW64 = 8  // float64 lanes

func vecWidth[F gemmFloat]() int {
	var z F
	if isF64(z) {
		return vecW64
	}
	return vecW32
}

func isF64[F gemmFloat](z F) bool {
	_, ok := any(z).(float64)
	return ok
}

// fmaF is a fused multiply-add rounded to F. A product of float32s is exact in float64,
// so for float32 one float64 add rounds exactly like the fused operation (no math.FMA).
func fmaF[F gemmFloat](a, b, c F) F {
	if unsafe.Sizeof(a) == 4 {
		return F(float64(a)*float64(b) + float64(c))
	}
	return F(math.FMA(float64(a), float64(b), float64(c)))
}

// vecSum is vecReduce of v (plain adds).
func vecSum[F gemmFloat](v []F, W int) F {
	n := len(v)
	if n == 0 {
		return 0
	}
	if n < W {
		s := v[0]
		for _, x := range v[1:] {
			s += x
		}
		return s
	}
	var accA [vecW32]F
	acc := accA[:W]
	copy(acc, v[:W])
	for d := W; d < n; d += W {
		blk := v[d:min(d+W, n)]
		for j, x := range blk {
			acc[j] += x
		}
	}
	return treeSum(acc)
}

// vecDot is vecReduce of the products a[i]*b[i], fused into the lanes after the first
// vector.
func vecDot[F gemmFloat](a, b []F, W int) F {
	n := len(a)
	b = b[:n]
	if n == 0 {
		return 0
	}
	if n < W {
		s := F(a[0] * b[0])
		for i := 1; i < n; i++ {
			s += F(a[i] * b[i])
		}
		return s
	}
	var accA [vecW32]F
	acc := accA[:W]
	for j := range acc {
		acc[j] = F(a[j] * b[j])
	}
	for d := W; d < n; d += W {
		ab, bb := a[d:min(d+W, n)], b[d:min(d+W, n)]
		for j, x := range ab {
			acc[j] = fmaF(x, bb[j], acc[j])
		}
	}
	return treeSum(acc)
}

func treeSum[F gemmFloat](acc []F) F {
	for h := len(acc) / 2; h >= 1; h /= 2 {
		for j := 0; j < h; j++ {
			acc[j] += acc[j+h]
		}
	}
	return acc[0]
}

// vecReduce sums map(i) for i < n in reduce_all order. fused: after the first vector,
// lanes accumulate with a fused multiply-add of the pair mul(i) (torch's map lambda is a
// product the compiler fuses into the accumulation); otherwise map values are added.
func vecReduce[F gemmFloat](n int, W int, val func(i int) F, mulPair func(i int) (F, F)) F {
	if n <= 0 {
		return 0
	}
	if n < W {
		s := val(0)
		for i := 1; i < n; i++ {
			s = F(s + val(i))
		}
		return s
	}
	var accA [vecW32]F
	acc := accA[:W]
	for j := 0; j < W; j++ {
		acc[j] = val(j)
	}
	for d := W; d < n; d += W {
		for j := 0; j < W && d+j < n; j++ {
			if mulPair != nil {
				a, b := mulPair(d + j)
				acc[j] = fmaF(a, b, acc[j])
			} else {
				acc[j] = F(acc[j] + val(d+j))
			}
		}
	}
	for h := W / 2; h >= 1; h /= 2 {
		for j := 0; j < h; j++ {
			acc[j] = F(acc[j] + acc[j+h])
		}
	}
	return acc[0]
}

// moments returns the mean and biased variance of v, accurate to the last bit of F
// (torch's Welford moments are within an ulp of these): float64 sums, four partial sums
// each (as layernorm_cgo.go's ln_moments).
func moments[F gemmFloat](v []F) (F, F) {
	a0, a1, a2, a3 := sums4(v, 0, false, 0, 0, 0, 0)
	m := ((a0 + a1) + (a2 + a3)) / float64(len(v))
	a0, a1, a2, a3 = sums4(v, m, true, 0, 0, 0, 0)
	return F(m), F(((a0 + a1) + (a2 + a3)) / float64(len(v)))
}

// sums4 adds v's elements (sq: their squared deviations from mean) into four float64
// partial sums, element i into sum i%4 and a tail into the first: the order the C kernels
// (ln_moments, bn_sum) follow bit for bit.
func sums4[F gemmFloat](v []F, mean float64, sq bool, a0, a1, a2, a3 float64) (float64, float64, float64, float64) {
	i := 0
	if sq {
		for ; i+4 <= len(v); i += 4 {
			d0, d1, d2, d3 := float64(v[i])-mean, float64(v[i+1])-mean, float64(v[i+2])-mean, float64(v[i+3])-mean
			a0 += d0 * d0
			a1 += d1 * d1
			a2 += d2 * d2
			a3 += d3 * d3
		}
		for ; i < len(v); i++ {
			d := float64(v[i]) - mean
			a0 += d * d
		}
		return a0, a1, a2, a3
	}
	for ; i+4 <= len(v); i += 4 {
		a0 += float64(v[i])
		a1 += float64(v[i+1])
		a2 += float64(v[i+2])
		a3 += float64(v[i+3])
	}
	for ; i < len(v); i++ {
		a0 += float64(v[i])
	}
	return a0, a1, a2, a3
}

// f32s views a []F of float32 as []float32.
func f32s[F gemmFloat](v []F) []float32 { return *(*[]float32)(unsafe.Pointer(&v)) }

// noCNorm forces the Go layer norm rows (tests compare them with the C ones).
var noCNorm bool

func rowMajorF32(ts ...Tensor) bool {
	for _, t := range ts {
		if t.DType != Float32 || t.Strides[1] != 1 {
			return false
		}
	}
	return haveCNorm && !noCNorm
}

func checkMD(name string, t Tensor, M, D int64) error {
	if t.Dim() != 2 || t.Sizes[0] != M || t.Sizes[1] != D || !t.DType.IsFloat() {
		return fmt.Errorf("%s: %v %v, expected float [%d %d]", name, t.Sizes, t.DType, M, D)
	}
	return nil
}

func loadVec[F gemmFloat](t *Tensor, n int64, def F) []F {
	out := make([]F, n)
	if t == nil {
		for i := range out {
			out[i] = def
		}
		return out
	}
	loadRowT(out, t.Ptr, t.Strides[0]*int64(t.DType.Size()), t.DType)
	return out
}

func rowPtr(t Tensor, r int64) (p, s int64) {
	es := int64(t.DType.Size())
	return r * t.Strides[0] * es, t.Strides[1] * es
}

func loadRow2[F gemmFloat](t Tensor, r int64, dst []F) {
	off, s := rowPtr(t, r)
	loadRowT(dst, at(t.Ptr, off), s, t.DType)
}

func storeRow2[F gemmFloat](t Tensor, r int64, src []F) {
	off, s := rowPtr(t, r)
	storeRowT(at(t.Ptr, off), s, t.DType, src)
}

// LayerNormForward normalises the rows of x ([M, D]) into out, with optional weight and
// bias ([D]) and optional saved mean and rstd ([M]).
func LayerNormForward(out Tensor, mean, rstd *Tensor, x Tensor, w, b *Tensor, eps float64) error {
	M, D := x.Sizes[0], x.Sizes[1]
	if err := checkMD("input", x, M, D); err != nil {
		return err
	}
	if err := checkMD("out", out, M, D); err != nil {
		return err
	}
	if err := checkVecs(M, mean, rstd); err != nil {
		return err
	}
	if err := checkVecs(D, w, b); err != nil {
		return err
	}
	if x.DType == Float64 {
		layerNormFwd[float64](out, mean, rstd, x, w, b, eps)
	} else {
		layerNormFwd[float32](out, mean, rstd, x, w, b, eps)
	}
	return nil
}

func layerNormFwd[F gemmFloat](out Tensor, mean, rstd *Tensor, x Tensor, w, b *Tensor, eps float64) {
	M, D := x.Sizes[0], x.Sizes[1]
	g, be := loadVec[F](w, D, 1), loadVec[F](b, D, 0)
	reduced := x.DType != Float32 && x.DType != Float64
	if D > 0 && M > 0 && lnBF16Rows(&x, &out) {
		layerNormFwdBF16(out, mean, rstd, x, f32s(g), f32s(be), eps)
		return
	}
	if D > 0 && M > 0 && reducedRows(x, out) {
		// the float32 C rows with the reduced formula on blocks of widened rows (in
		// place), each result rounded once
		ParallelFor(M, 4*D+1, func(lo, hi int64) {
			rb := max(1, min(hi-lo, halfBlock/D))
			sp := getF32(int(rb * D))
			defer putF32(sp)
			mb, rsb := make([]float32, rb), make([]float32, rb)
			for r0 := lo; r0 < hi; r0 += rb {
				n := min(rb, hi-r0)
				blk := (*sp)[:n*D]
				loadRowsF32(blk, x, r0)
				p := unsafe.Pointer(unsafe.SliceData(blk))
				lnFwdC(p, D, p, D, n, D, f32s(g), f32s(be), float32(eps), mb, rsb, true)
				storeRowsF32(out, r0, blk)
				for r := int64(0); r < n; r++ {
					vec{mean}.set(r0+r, float64(mb[r]))
					vec{rstd}.set(r0+r, float64(rsb[r]))
				}
			}
		})
		return
	}
	// the AVX2 rows from two elements on: a single-element row's results are CPU's rounding
	// residues (test_ops_nn.py::test_layer_norm_backward_single_element_rows), which the
	// portable rows reproduce
	if D > 1 && lnAVX2 && rowMajorF32(x, out) {
		var gC, bC []float32
		if w != nil {
			gC = f32s(g)
		}
		if b != nil {
			bC = f32s(be)
		}
		mp, rp := f32Vec(mean, M), f32Vec(rstd, M)
		ParallelFor(M, 4*D+1, func(lo, hi int64) {
			var mb, rb []float32
			if mp != nil && rp != nil {
				mb, rb = mp[lo:hi], rp[lo:hi]
			} else {
				mb, rb = make([]float32, hi-lo), make([]float32, hi-lo)
			}
			lnFwdAVX2(at(x.Ptr, lo*x.Strides[0]*4), x.Strides[0], at(out.Ptr, lo*out.Strides[0]*4), out.Strides[0], hi-lo, D,
				gC, bC, eps, mb, rb)
			if mp == nil || rp == nil {
				for r := lo; r < hi; r++ {
					vec{mean}.set(r, float64(mb[r-lo]))
					vec{rstd}.set(r, float64(rb[r-lo]))
				}
			}
		})
		return
	}
	if D > 0 && rowMajorF32(x, out) {
		ParallelFor(M, 4*D+1, func(lo, hi int64) {
			mb, rb := make([]float32, hi-lo), make([]float32, hi-lo)
			lnFwdC(at(x.Ptr, lo*x.Strides[0]*4), x.Strides[0], at(out.Ptr, lo*out.Strides[0]*4), out.Strides[0], hi-lo, D,
				f32s(g), f32s(be), float32(eps), mb, rb, false)
			for r := lo; r < hi; r++ {
				vec{mean}.set(r, float64(mb[r-lo]))
				vec{rstd}.set(r, float64(rb[r-lo]))
			}
		})
		return
	}
	ParallelFor(M, 4*D+1, func(lo, hi int64) {
		row := make([]F, D)
		for r := lo; r < hi; r++ {
			loadRow2(x, r, row)
			m, v := moments(row)
			rs := F(F(1) / F(math.Sqrt(float64(F(v+F(eps))))))
			if reduced {
				// float opmath: (x*scale + bias)*gamma + beta with scale = rstd, bias = -rstd*mean
				bias := F(-rs * m)
				for j, xv := range row {
					row[j] = fmaF(fmaF(xv, rs, bias), g[j], be[j])
				}
			} else {
				for j, xv := range row {
					row[j] = fmaF(F(F(xv-m)*rs), g[j], be[j])
				}
			}
			storeRow2(out, r, row)
			vec{mean}.set(r, float64(m))
			vec{rstd}.set(r, float64(rs))
		}
	})
}

// LayerNormBackward computes the gradients of layer norm over rows of x ([M, D]) with saved
// mean and rstd ([M]) and optional weight ([D]), in torch's CPU formulation:
// dx = rstd*dy*w + b*x + c with b = (db*mean - ds)*rstd^3/D, c = -b*mean - db*rstd/D,
// ds = sum(dy*x*w), db = sum(dy*w).
func LayerNormBackward(gin, gw, gb *Tensor, gout, x, mean, rstd Tensor, w *Tensor) error {
	if gout.Dim() != 2 || x.Dim() != 2 || gout.Sizes[0] != x.Sizes[0] || gout.Sizes[1] != x.Sizes[1] {
		return fmt.Errorf("grad_output %v and input %v must be the same 2-D shape", gout.Sizes, x.Sizes)
	}
	M, D := x.Sizes[0], x.Sizes[1]
	if err := checkVecs(M, &mean, &rstd); err != nil {
		return err
	}
	if err := checkVecs(D, w, gw, gb); err != nil {
		return err
	}
	if gin != nil {
		if err := checkMD("grad_input", *gin, M, D); err != nil {
			return err
		}
	}
	for _, t := range []Tensor{gout, x} {
		if !t.DType.IsFloat() {
			return fmt.Errorf("unsupported dtype %v", t.DType)
		}
	}
	if x.DType == Float64 {
		layerNormBwd[float64](gin, gw, gb, gout, x, mean, rstd, w)
	} else {
		layerNormBwd[float32](gin, gw, gb, gout, x, mean, rstd, w)
	}
	return nil
}

func layerNormBwd[F gemmFloat](gin, gw, gb *Tensor, gout, x, mean, rstd Tensor, w *Tensor) {
	M, D := x.Sizes[0], x.Sizes[1]
	if D > 0 && M > 0 && lnBF16Rows(&x, &gout, gin) {
		layerNormBwdBF16(gin, gw, gb, gout, x, f32s(loadVec[F](&mean, M, 0)), f32s(loadVec[F](&rstd, M, 0)),
			f32s(loadVec[F](w, D, 1)))
		return
	}
	if D > 0 && M > 0 && reducedRows(x, gout) && (gin == nil || reducedRows(*gin)) {
		// the same float32 arithmetic (C rows) on widened operands, grad_input rounded once
		sp := getF32(int(3 * M * D))
		defer putF32(sp)
		buf := *sp
		x32, gout32 := widenRows(x, buf[:M*D]), widenRows(gout, buf[M*D:2*M*D])
		if gin == nil {
			layerNormBwd[F](nil, gw, gb, gout32, x32, mean, rstd, w)
			return
		}
		gin32 := f32RowsTensor(buf[2*M*D:], M, D)
		layerNormBwd[F](&gin32, gw, gb, gout32, x32, mean, rstd, w)
		narrowRows(*gin, gin32)
		return
	}
	if D > 1 && M > 0 && lnAVX2 && rowMajorF32(x, gout) && (gin == nil || rowMajorF32(*gin)) {
		layerNormBwdAVX2(gin, gw, gb, gout, x, mean, rstd, w)
		return
	}
	W := vecWidth[F]()
	g := loadVec[F](w, D, 1)
	mu, rs := loadVec[F](&mean, M, 0), loadVec[F](&rstd, M, 0)
	scale := F(F(1) / F(D))
	cOK := D > 0 && rowMajorF32(x, gout) && (gin == nil || rowMajorF32(*gin))
	var gC []float32
	if w != nil && cOK {
		gC = f32s(g)
	}
	if gin != nil && cOK {
		ParallelFor(M, 8*D, func(lo, hi int64) {
			lnBwdC(at(gout.Ptr, lo*gout.Strides[0]*4), gout.Strides[0], at(x.Ptr, lo*x.Strides[0]*4), x.Strides[0],
				at(gin.Ptr, lo*gin.Strides[0]*4), gin.Strides[0], hi-lo, D, gC, f32s(mu[lo:hi]), f32s(rs[lo:hi]), make([]float32, D))
		})
	} else if gin != nil {
		ParallelFor(M, 8*D, func(lo, hi int64) {
			xb, dy, tmp := make([]F, D), make([]F, D), make([]F, D)
			for r := lo; r < hi; r++ {
				loadRow2(x, r, xb)
				loadRow2(gout, r, dy)
				var ds, db F
				n := int(D)
				_ = n
				if w == nil {
					ds = vecDot(dy, xb, W)
					db = vecSum(dy, W)
				} else {
					for j := range tmp {
						tmp[j] = F(dy[j] * xb[j])
					}
					ds = vecDot(tmp, g, W)
					db = vecDot(dy, g, W)
				}
				a := rs[r]
				b := F(F(F(F(fmaF(db, mu[r], -ds)*a)*a)*a) * scale)
				c := fmaF(-b, mu[r], -F(F(db*a)*scale))
				for j := range dy {
					// the compiler fuses b*x into the add of the first product
					if w == nil {
						dy[j] = F(fmaF(b, xb[j], F(a*dy[j])) + c)
					} else {
						dy[j] = F(fmaF(b, xb[j], F(F(a*dy[j])*g[j])) + c)
					}
				}
				storeRow2(*gin, r, dy)
			}
		})
	}
	if gw != nil || gb != nil {
		// Column sums in row order, parallel over column blocks.
		dw, dbv := make([]F, D), make([]F, D)
		ParallelFor(D, 3*M, func(lo, hi int64) {
			n := hi - lo
			if cOK {
				lnBwdColsC(at(gout.Ptr, lo*4), gout.Strides[0], at(x.Ptr, lo*4), x.Strides[0], M, n, f32s(mu), f32s(rs),
					f32s(dw[lo:hi]), f32s(dbv[lo:hi]))
				return
			}
			xb, dy := make([]F, n), make([]F, n)
			xs, gs := x, gout
			for r := int64(0); r < M; r++ {
				off, s := rowPtr(xs, r)
				loadRowT(xb, at(xs.Ptr, off+lo*s), s, xs.DType)
				off, s = rowPtr(gs, r)
				loadRowT(dy, at(gs.Ptr, off+lo*s), s, gs.DType)
				a := rs[r]
				bb := F(-a * mu[r])
				for j := range xb {
					dw[lo+int64(j)] = fmaF(dy[j], fmaF(a, xb[j], bb), dw[lo+int64(j)])
					dbv[lo+int64(j)] = F(dbv[lo+int64(j)] + dy[j])
				}
			}
		})
		if gw != nil {
			storeRowT(gw.Ptr, gw.Strides[0]*int64(gw.DType.Size()), gw.DType, dw)
		}
		if gb != nil {
			storeRowT(gb.Ptr, gb.Strides[0]*int64(gb.DType.Size()), gb.DType, dbv)
		}
	}
}

// lnBwdBlocks is the most row blocks the AVX2 backward splits its weight and bias
// gradients into: each block sums its rows in float32 lanes, the blocks are summed in
// float64 in order. The blocks depend on M only, so any number of workers gives the same
// bits.
const lnBwdBlocks = 32

// layerNormBwdAVX2 is layerNormBwd on row-major float32 operands with the AVX2 rows.
func layerNormBwdAVX2(gin, gw, gb *Tensor, gout, x, mean, rstd Tensor, w *Tensor) {
	M, D := x.Sizes[0], x.Sizes[1]
	var gC []float32
	if w != nil {
		gC = loadVec[float32](w, D, 1)
	}
	mu, rs := loadVec[float32](&mean, M, 0), loadVec[float32](&rstd, M, 0)
	rb := (M + lnBwdBlocks - 1) / lnBwdBlocks
	nb := (M + rb - 1) / rb
	var pw, pb []float32
	if gw != nil || gb != nil {
		sp := getF32(int(2 * nb * D))
		defer putF32(sp)
		pw, pb = (*sp)[:nb*D], (*sp)[nb*D:2*nb*D]
	}
	var ginP unsafe.Pointer
	var ginS int64
	if gin != nil {
		ginP, ginS = gin.Ptr, gin.Strides[0]
	}
	ParallelFor(nb, rb*D*8, func(lo, hi int64) {
		for blk := lo; blk < hi; blk++ {
			r0 := blk * rb
			n := min(rb, M-r0)
			var pdw, pdb []float32
			if pw != nil {
				pdw, pdb = pw[blk*D:(blk+1)*D], pb[blk*D:(blk+1)*D]
			}
			var o unsafe.Pointer
			if ginP != nil {
				o = at(ginP, r0*ginS*4)
			}
			lnBwdAVX2(at(gout.Ptr, r0*gout.Strides[0]*4), gout.Strides[0], at(x.Ptr, r0*x.Strides[0]*4), x.Strides[0], o, ginS,
				n, D, gC, mu[r0:r0+n], rs[r0:r0+n], pdw, pdb)
		}
	})
	if pw == nil {
		return
	}
	sum := make([]float32, D)
	if gw != nil {
		lnColSumAVX2(pw, nb, D, sum)
		storeRowT(gw.Ptr, gw.Strides[0]*int64(gw.DType.Size()), gw.DType, sum)
	}
	if gb != nil {
		lnColSumAVX2(pb, nb, D, sum)
		storeRowT(gb.Ptr, gb.Strides[0]*int64(gb.DType.Size()), gb.DType, sum)
	}
}
