package kernels

import (
	"fmt"
	"math"
)

// Group normalisation of x viewed as [N, C, HxW] (contiguous rows per channel), G groups
// of D = C/G channels, with torch's CPU rounding (see layernorm.go).

func checkGroupNorm(x Tensor, G int64) (N, C, S int64, err error) {
	if x.Dim() != 3 || !x.DType.IsFloat() {
		return 0, 0, 0, fmt.Errorf("expected a 3-D float [N, C, HxW] input, got %v %v", x.Sizes, x.DType)
	}
	N, C, S = x.Sizes[0], x.Sizes[1], x.Sizes[2]
	if G <= 0 || C%G != 0 {
		return 0, 0, 0, fmt.Errorf("%d channels are not divisible into %d groups", C, G)
	}
	return N, C, S, nil
}

// GroupNormForward writes out = group-normalised x with optional per-channel weight and
// bias ([C]) and the per-(n, g) mean and rstd ([N*G]).
func GroupNormForward(out, mean, rstd Tensor, x Tensor, w, b *Tensor, G int64, eps float64) error {
	N, C, _, err := checkGroupNorm(x, G)
	if err != nil {
		return err
	}
	if err := checkNCS(out, x); err != nil {
		return err
	}
	if err := checkVecs(N*G, &mean, &rstd); err != nil {
		return err
	}
	if err := checkVecs(C, w, b); err != nil {
		return err
	}
	if x.DType == Float64 {
		groupNormFwd[float64](out, mean, rstd, x, w, b, G, eps)
	} else {
		groupNormFwd[float32](out, mean, rstd, x, w, b, G, eps)
	}
	return nil
}

func groupNormFwd[F gemmFloat](out, mean, rstd Tensor, x Tensor, w, b *Tensor, G int64, eps float64) {
	N, C, S := x.Sizes[0], x.Sizes[1], x.Sizes[2]
	D := C / G
	g, be := loadVec[F](w, C, 1), loadVec[F](b, C, 0)
	xv, ov := chanView{x}, chanView{out}
	es, oes := xv.es(), ov.es()
	ParallelFor(N*G, 4*D*S+1, func(lo, hi int64) {
		buf := make([]F, D*S)
		for i := lo; i < hi; i++ {
			n, gi := i/G, i%G
			for j := int64(0); j < D; j++ {
				c := gi*D + j
				loadRowT(buf[j*S:(j+1)*S], at(x.Ptr, (n*x.Strides[0]+c*x.Strides[1])*es), x.Strides[2]*es, x.DType)
			}
			m, v := moments(buf)
			if v < 0 {
				v = 0
			}
			// eps stays double here: rstd = 1 / sqrt(double(var) + eps), rounded once.
			rs := F(1 / math.Sqrt(float64(v)+eps))
			for j := int64(0); j < D; j++ {
				c := gi*D + j
				row := buf[j*S : (j+1)*S]
				if w == nil && b == nil {
					for k, xv := range row {
						row[k] = F(F(xv-m) * rs)
					}
				} else {
					scale := F(rs * g[c])
					bias := fmaF(-scale, m, be[c])
					for k, xv := range row {
						row[k] = fmaF(scale, xv, bias)
					}
				}
				storeRowT(at(out.Ptr, (n*out.Strides[0]+c*out.Strides[1])*oes), out.Strides[2]*oes, out.DType, row)
			}
			vec{&mean}.set(i, float64(m))
			vec{&rstd}.set(i, float64(rs))
		}
	})
}

// GroupNormBackward computes the selected gradients of GroupNormForward from the saved
// mean and rstd ([N*G]) and optional weight ([C]).
func GroupNormBackward(gin, gw, gb *Tensor, gout, x, mean, rstd Tensor, w *Tensor, G int64) error {
	N, C, _, err := checkGroupNorm(x, G)
	if err != nil {
		return err
	}
	if err := checkNCS(gout, x); err != nil {
		return err
	}
	if gin != nil {
		if err := checkNCS(*gin, x); err != nil {
			return err
		}
	}
	if err := checkVecs(N*G, &mean, &rstd); err != nil {
		return err
	}
	if err := checkVecs(C, w, gw, gb); err != nil {
		return err
	}
	if x.DType == Float64 {
		groupNormBwd[float64](gin, gw, gb, gout, x, mean, rstd, w, G)
	} else {
		groupNormBwd[float32](gin, gw, gb, gout, x, mean, rstd, w, G)
	}
	return nil
}

func groupNormBwd[F gemmFloat](gin, gw, gb *Tensor, gout, x, mean, rstd Tensor, w *Tensor, G int64) {
	N, C, S := x.Sizes[0], x.Sizes[1], x.Sizes[2]
	D := C / G
	W := vecWidth[F]()
	reduced := x.DType != Float32 && x.DType != Float64
	g := loadVec[F](w, C, 1)
	mu, rs := loadVec[F](&mean, N*G, 0), loadVec[F](&rstd, N*G, 0)
	xv, gv := chanView{x}, chanView{gout}
	// Per (n, c): ds = sum(dy*x), db = sum(dy) over HxW.
	ds, db := make([]F, N*C), make([]F, N*C)
	ParallelFor(N*C, 4*S+1, func(lo, hi int64) {
		xb, dy := make([]F, S), make([]F, S)
		for i := lo; i < hi; i++ {
			n, c := i/C, i%C
			loadRowT(xb, at(x.Ptr, (n*x.Strides[0]+c*x.Strides[1])*xv.es()), x.Strides[2]*xv.es(), x.DType)
			loadRowT(dy, at(gout.Ptr, (n*gout.Strides[0]+c*gout.Strides[1])*gv.es()), gout.Strides[2]*gv.es(), gout.DType)
			if reduced {
				ds[i], db[i] = reducedDsDb(dy, xb, W)
			} else {
				ds[i] = vecReduce(int(S), W, func(k int) F { return F(dy[k] * xb[k]) },
					func(k int) (F, F) { return dy[k], xb[k] })
				db[i] = vecReduce(int(S), W, func(k int) F { return dy[k] }, nil)
			}
		}
	})
	if gin != nil {
		s := F(F(1) / F(D*S))
		d := D / int64(W) * int64(W)
		ParallelFor(N*G, 4*D*S+1, func(lo, hi int64) {
			xb, dy := make([]F, S), make([]F, S)
			lanesS, lanesB := make([]F, W), make([]F, W)
			for i := lo; i < hi; i++ {
				n, gi := i/G, i%G
				base := n*C + gi*D
				for l := range lanesS {
					lanesS[l], lanesB[l] = 0, 0
				}
				for j := int64(0); j < d; j += int64(W) {
					for l := 0; l < W; l++ {
						c := base + j + int64(l)
						lanesS[l] = fmaF(ds[c], g[gi*D+j+int64(l)], lanesS[l])
						lanesB[l] = fmaF(db[c], g[gi*D+j+int64(l)], lanesB[l])
					}
				}
				var dsv, dbv F
				for l := 0; l < W; l++ {
					dsv = F(dsv + lanesS[l])
					dbv = F(dbv + lanesB[l])
				}
				for j := d; j < D; j++ {
					dsv = fmaF(ds[base+j], g[gi*D+j], dsv)
					dbv = fmaF(db[base+j], g[gi*D+j], dbv)
				}
				r, m := rs[i], mu[i]
				c2 := F(F(F(F(fmaF(dbv, m, -dsv)*r)*r)*r) * s)
				c3 := fmaF(-c2, m, -F(F(dbv*r)*s))
				for j := int64(0); j < D; j++ {
					c := gi*D + j
					c1 := F(r * g[c])
					loadRowT(xb, at(x.Ptr, (n*x.Strides[0]+c*x.Strides[1])*xv.es()), x.Strides[2]*xv.es(), x.DType)
					loadRowT(dy, at(gout.Ptr, (n*gout.Strides[0]+c*gout.Strides[1])*gv.es()), gout.Strides[2]*gv.es(), gout.DType)
					for k := range dy {
						dy[k] = F(fmaF(c1, dy[k], F(c2*xb[k])) + c3) // c2*x is the fused addend here
					}
					ges := int64(gin.DType.Size())
					storeRowT(at(gin.Ptr, (n*gin.Strides[0]+c*gin.Strides[1])*ges), gin.Strides[2]*ges, gin.DType, dy)
				}
			}
		})
	}
	if gw != nil || gb != nil {
		dw, dbeta := make([]F, C), make([]F, C)
		for c := int64(0); c < C; c++ {
			gi := c / D
			for n := int64(0); n < N; n++ {
				i := n*G + gi
				t := fmaF(-db[n*C+c], mu[i], ds[n*C+c])
				dw[c] = fmaF(t, rs[i], dw[c])
				dbeta[c] = F(dbeta[c] + db[n*C+c])
			}
		}
		if gw != nil {
			storeRowT(gw.Ptr, gw.Strides[0]*int64(gw.DType.Size()), gw.DType, dw)
		}
		if gb != nil {
			storeRowT(gb.Ptr, gb.Strides[0]*int64(gb.DType.Size()), gb.DType, dbeta)
		}
	}
}

// reducedDsDb is torch's per-channel sum for reduced-precision inputs: blocks of 2W
// elements accumulate into W float lanes (first half then second half), the lanes are
// summed in order, then the tail is added element by element.
func reducedDsDb[F gemmFloat](dy, x []F, W int) (F, F) {
	n := len(dy)
	K := 2 * W
	inner := n / K * K
	var accA, accB [vecW32]F
	as, ab := accA[:W], accB[:W]
	for j := 0; j < inner; j += K {
		for l := 0; l < W; l++ {
			as[l] = fmaF(dy[j+l], x[j+l], as[l])
			as[l] = fmaF(dy[j+W+l], x[j+W+l], as[l])
			ab[l] = F(F(ab[l]+dy[j+l]) + dy[j+W+l])
		}
	}
	var s, b F
	for l := 0; l < W; l++ {
		s = F(s + as[l])
		b = F(b + ab[l])
	}
	for j := inner; j < n; j++ {
		s = fmaF(dy[j], x[j], s)
		b = F(b + dy[j])
	}
	return s, b
}
