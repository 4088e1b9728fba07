package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// chanView addresses a [N, C, S] tensor channel by channel.
type chanView struct{ t Tensor }

func (v chanView) es() int64 { return int64(v.t.DType.Size()) }

// loadChan loads channel c ([N, S] elements) into dst, row n at dst[n*S:].
func (v chanView) loadChan(c int64, dst []float64) {
	N, S := v.t.Sizes[0], v.t.Sizes[2]
	for n := int64(0); n < N; n++ {
		loadRowT(dst[n*S:(n+1)*S], at(v.t.Ptr, (n*v.t.Strides[0]+c*v.t.Strides[1])*v.es()), v.t.Strides[2]*v.es(), v.t.DType)
	}
}

func (v chanView) storeChan(c int64, src []float64) {
	N, S := v.t.Sizes[0], v.t.Sizes[2]
	for n := int64(0); n < N; n++ {
		storeRowT(at(v.t.Ptr, (n*v.t.Strides[0]+c*v.t.Strides[1])*v.es()), v.t.Strides[2]*v.es(), v.t.DType, src[n*S:(n+1)*S])
	}
}

// vec is an optional 1-D per-channel tensor.
type vec struct{ t *Tensor }

func (v vec) get(c int64, def float64) float64 {
	if v.t == nil {
		return def
	}
	var b [1]float64
	loadRowT(b[:], at(v.t.Ptr, c*v.t.Strides[0]*int64(v.t.DType.Size())), 0, v.t.DType)
	return b[0]
}

func (v vec) set(c int64, x float64) {
	if v.t == nil || v.t.Numel() == 0 {
		return
	}
	storeRowT(at(v.t.Ptr, c*v.t.Strides[0]*int64(v.t.DType.Size())), 0, v.t.DType, []float64{x})
}

func checkVecs(C int64, vs ...*Tensor) error {
	for _, v := range vs {
		if v == nil {
			continue
		}
		if !v.DType.IsFloat() {
			return fmt.Errorf("unsupported dtype %v", v.DType)
		}
		if v.Numel() == 0 {
			continue
		}
		if v.Dim() != 1 || v.Sizes[0] != C {
			return fmt.Errorf("per-channel tensor of shape %v, expected [%d]", v.Sizes, C)
		}
	}
	return nil
}

func checkNCS(ts ...Tensor) error {
	for _, t := range ts {
		if t.Dim() != 3 || !t.DType.IsFloat() {
			return fmt.Errorf("expected 3-D float tensors, got %v %v", t.Sizes, t.DType)
		}
		for i := range t.Sizes {
			if t.Sizes[i] != ts[0].Sizes[i] {
				return fmt.Errorf("shape mismatch %v vs %v", t.Sizes, ts[0].Sizes)
			}
		}
	}
	return nil
}

// BatchNormForward normalises x ([N, C, S]) per channel. Training: batch statistics,
// saved as (mean, 1/sqrt(var+eps)), and running stats (if given) updated with momentum and
// the unbiased variance. Eval: running statistics. Optional tensors may be nil; empty save
// tensors are skipped.
func BatchNormForward(out Tensor, saveMean, saveInvstd *Tensor, x Tensor, w, b, rm, rv *Tensor,
	training bool, momentum, eps float64) error {
	if err := checkNCS(out, x); err != nil {
		return err
	}
	C := x.Sizes[1]
	if err := checkVecs(C, saveMean, saveInvstd, w, b, rm, rv); err != nil {
		return err
	}
	if !training && (rm == nil || rv == nil) {
		return fmt.Errorf("running_mean and running_var must be defined in evaluation mode")
	}
	N, S := x.Sizes[0], x.Sizes[2]
	cnt := N * S
	xv, ov := chanView{x}, chanView{out}
	statDT := x.DType // the dtype torch computes the batch statistics in
	if saveMean != nil {
		statDT = saveMean.DType
	}
	if statDT == Float64 || x.DType == Float64 {
		statDT = Float64
	}
	fast := x.DType == Float32 && out.DType == Float32 && x.Strides[2] == 1 && out.Strides[2] == 1
	// bfloat16 channels in C: the float32 fast path's sums on the exactly widened values
	bf16 := x.DType == BFloat16 && out.DType == BFloat16 && x.Strides[2] == 1 && out.Strides[2] == 1 && haveCNorm && !noCNorm
	// scaleShift is channel c's float32 scale and shift (as float64s): from the batch
	// statistics, which sum(mean, sq) gives as the sum of x (mean 0, sq false) and of
	// (x-mean)^2 (sq true), when training; from the running ones otherwise.
	scaleShift := func(c int64, moments func() (mean, ss float64)) (float64, float64) {
		var mean, invstd float64
		if training {
			var ss float64
			mean, ss = moments()
			mean, invstd = batchNormStats(c, mean, ss, cnt, statDT, eps, momentum, saveMean, saveInvstd, rm, rv)
		} else {
			mean = vec{rm}.get(c, 0)
			invstd = 1 / math.Sqrt(vec{rv}.get(c, 0)+eps)
		}
		s32 := float32(vec{w}.get(c, 1) * invstd)
		h32 := float32(vec{b}.get(c, 0)) - float32(float32(mean)*s32)
		return float64(s32), float64(h32)
	}
	ParallelFor(C, 2*cnt+1, func(lo, hi int64) {
		var buf []float64
		if !fast && !bf16 {
			buf = make([]float64, cnt)
		}
		for c := lo; c < hi; c++ {
			if bf16 {
				xb, ob := at(x.Ptr, c*x.Strides[1]*2), at(out.Ptr, c*out.Strides[1]*2)
				sd, hd := scaleShift(c, func() (float64, float64) {
					if bnBF16Vec {
						return bnMomentsBF16V(xb, x.Strides[0], N, S) // one pass, float32 lanes
					}
					m := bnSumBF16C(xb, x.Strides[0], N, S, 0, false) / float64(cnt)
					return m, bnSumBF16C(xb, x.Strides[0], N, S, m, true)
				})
				if bnBF16Vec {
					bnApplyBF16V(xb, x.Strides[0], ob, out.Strides[0], N, S, sd, hd)
				} else {
					bnApplyBF16C(xb, x.Strides[0], ob, out.Strides[0], N, S, sd, hd)
				}
				continue
			}
			if fast {
				// float32 rows read in place; the float64 statistics, 16 partial sums
				// per pass (an add chain per element would dominate)
				xr := f32Rows{x, c}
				or := f32Rows{out, c}
				if bnF32Vec && cnt > 0 {
					// AVX-512: one pass of float32-lane moments, one FMA pass (bn_f32_cgo.go)
					sd, hd := scaleShift(c, func() (float64, float64) { return bnMomentsF32V(xr.base(), x.Strides[0], N, S) })
					bnApplyF32V(xr.base(), x.Strides[0], or.base(), out.Strides[0], N, S, sd, hd)
					continue
				}
				sd, hd := scaleShift(c, func() (float64, float64) {
					m := xr.sum(0, false) / float64(cnt)
					return m, xr.sum(m, true)
				})
				if haveCNorm && !noCNorm {
					bnApplyC(xr.base(), x.Strides[0], or.base(), out.Strides[0], N, S, sd, hd)
					continue
				}
				for n := int64(0); n < N; n++ {
					xs, os := xr.row(n), or.row(n)
					for i, v := range xs {
						os[i] = float32(float64(v)*sd + hd) // torch: fmadd (the product is exact)
					}
				}
				continue
			}
			xv.loadChan(c, buf)
			var mean, invstd float64
			if training {
				s := 0.0
				for _, v := range buf {
					s += v
				}
				mean = s / float64(cnt)
				ss := 0.0
				for _, v := range buf {
					ss += (v - mean) * (v - mean)
				}
				mean, invstd = batchNormStats(c, mean, ss, cnt, statDT, eps, momentum, saveMean, saveInvstd, rm, rv)
			} else {
				mean = vec{rm}.get(c, 0)
				invstd = 1 / math.Sqrt(vec{rv}.get(c, 0)+eps)
			}
			scale := vec{w}.get(c, 1) * invstd
			shift := vec{b}.get(c, 0) - mean*scale
			if useF32(x.DType) {
				s32 := float32(scale)
				h32 := float32(vec{b}.get(c, 0)) - float32(float32(mean)*s32)
				for i, v := range buf {
					buf[i] = float64(float32(math.FMA(v, float64(s32), float64(h32)))) // torch: fmadd
				}
			} else {
				for i, v := range buf {
					buf[i] = v*scale + shift
				}
			}
			ov.storeChan(c, buf)
		}
	})
	return nil
}

// f32Rows is channel c of a float32 [N, C, S] tensor with contiguous rows.
type f32Rows struct {
	t Tensor
	c int64
}

func (r f32Rows) row(n int64) []float32 {
	return unsafe.Slice((*float32)(at(r.t.Ptr, (n*r.t.Strides[0]+r.c*r.t.Strides[1])*4)), r.t.Sizes[2])
}

// sum is the channel's sum of x (sq: of (x-mean)^2) in float64, 16 partial sums (bnLanes).
// base is the channel's first row; rows are Strides[0] floats apart.
func (r f32Rows) base() unsafe.Pointer { return at(r.t.Ptr, r.c*r.t.Strides[1]*4) }

func (r f32Rows) sum(mean float64, sq bool) float64 {
	if haveCNorm && !noCNorm {
		return bnSumC(r.base(), r.t.Strides[0], r.t.Sizes[0], r.t.Sizes[2], mean, sq)
	}
	var a bnLanes
	for n := int64(0); n < r.t.Sizes[0]; n++ {
		row := r.row(n)
		for i, v := range row {
			d := float64(v)
			if sq {
				d = (d - mean) * (d - mean)
			}
			a.add(i, len(row), d)
		}
	}
	return a.total()
}

// bnLanes are the 16 float64 partial sums of a batch-norm statistic (the C loops' order,
// layernorm_cgo.go): element i of a row of length s goes to lane i%16 if it lies in one of
// the row's whole 16-blocks, else to lane 0; the total adds lanes j, 4+j, 8+j, 12+j as
// (a+b)+(c+d) for each j < 4, then those four the same way.
type bnLanes [16]float64

func (a *bnLanes) add(i, s int, v float64) {
	if i < s/16*16 {
		a[i%16] += v
	} else {
		a[0] += v
	}
}

func (a *bnLanes) total() float64 {
	var t [4]float64
	for j := range t {
		t[j] = (a[j] + a[4+j]) + (a[8+j] + a[12+j])
	}
	return (t[0] + t[1]) + (t[2] + t[3])
}

// batchNormStats saves channel c's batch statistics and updates the running ones from the
// float64 mean and sum of squared deviations ss; it returns the mean and invstd the output
// is normalised with.
func batchNormStats(c int64, mean, ss float64, cnt int64, statDT DType, eps, momentum float64,
	saveMean, saveInvstd, rm, rv *Tensor) (float64, float64) {
	invstd := 1 / math.Sqrt(ss/float64(cnt)+eps)
	unbiased := math.NaN()
	if cnt > 1 {
		unbiased = ss / float64(cnt-1)
	}
	if statDT != Float64 {
		// see BatchNormForward: statistics rounded to the saved dtype
		mean = float64(roundTo(statDT, float32(mean)))
		vs := roundTo(statDT, float32(ss))
		v := float64(reducedDiv(statDT, vs, cnt))
		invstd = float64(roundTo(statDT, float32(1/math.Sqrt(v+eps))))
		if cnt > 1 {
			unbiased = float64(reducedDiv(statDT, vs, cnt-1))
		}
	}
	vec{saveMean}.set(c, mean)
	vec{saveInvstd}.set(c, invstd)
	if rm != nil {
		vec{rm}.set(c, momentum*mean+(1-momentum)*vec{rm}.get(c, 0))
	}
	if rv != nil {
		vec{rv}.set(c, momentum*unbiased+(1-momentum)*vec{rv}.get(c, 0))
	}
	return mean, invstd
}

// BatchNormBackward computes the selected gradients of BatchNormForward.
func BatchNormBackward(gin, gw, gb *Tensor, gout, x Tensor, w, rm, rv, saveMean, saveInvstd *Tensor,
	training bool, eps float64) error {
	if err := checkNCS(gout, x); err != nil {
		return err
	}
	if gin != nil {
		if err := checkNCS(*gin, x); err != nil {
			return err
		}
	}
	C := x.Sizes[1]
	if err := checkVecs(C, gw, gb, w, rm, rv, saveMean, saveInvstd); err != nil {
		return err
	}
	if training && (saveMean == nil || saveInvstd == nil) {
		return fmt.Errorf("save_mean and save_invstd are required in training mode")
	}
	if !training && (rm == nil || rv == nil) {
		return fmt.Errorf("running_mean and running_var are required in evaluation mode")
	}
	N, S := x.Sizes[0], x.Sizes[2]
	cnt := N * S
	xv, gv := chanView{x}, chanView{gout}
	fast := x.DType == Float32 && gout.DType == Float32 && x.Strides[2] == 1 && gout.Strides[2] == 1 &&
		(gin == nil || (gin.DType == Float32 && gin.Strides[2] == 1))
	// bfloat16 channels in C: the float32 fast path's sums on the exactly widened values
	bf16 := x.DType == BFloat16 && gout.DType == BFloat16 && x.Strides[2] == 1 && gout.Strides[2] == 1 &&
		(gin == nil || (gin.DType == BFloat16 && gin.Strides[2] == 1)) && haveCNorm && !noCNorm
	ParallelFor(C, 4*cnt+1, func(lo, hi int64) {
		var xb, gb2 []float64
		if !fast && !bf16 {
			xb, gb2 = make([]float64, cnt), make([]float64, cnt)
		}
		for c := lo; c < hi; c++ {
			var mean, invstd float64
			if training {
				mean, invstd = vec{saveMean}.get(c, 0), vec{saveInvstd}.get(c, 0)
			} else {
				mean, invstd = vec{rm}.get(c, 0), 1/math.Sqrt(vec{rv}.get(c, 0)+eps)
			}
			if bf16 {
				xp, gp := at(x.Ptr, c*x.Strides[1]*2), at(gout.Ptr, c*gout.Strides[1]*2)
				sumsF, applyF := bnBwdSumsBF16C, bnBwdApplyBF16C
				if bnBF16Vec {
					sumsF, applyF = bnBwdSumsBF16V, bnBwdApplyBF16V
				}
				sum, dotp := sumsF(xp, x.Strides[0], gp, gout.Strides[0], N, S, mean)
				vec{gw}.set(c, dotp*invstd)
				vec{gb}.set(c, sum)
				if gin == nil {
					continue
				}
				k := dotp * invstd * invstd / float64(cnt)
				gm := sum / float64(cnt)
				applyF(xp, x.Strides[0], gp, gout.Strides[0], at(gin.Ptr, c*gin.Strides[1]*2), gin.Strides[0], N, S,
					mean, gm, k, invstd, vec{w}.get(c, 1), training)
				continue
			}
			if fast {
				// float32 rows in place, float64 math, 16 partial sums per statistic
				xr, gr := f32Rows{x, c}, f32Rows{gout, c}
				var sum, dotp float64
				cN := haveCNorm && !noCNorm
				if bnF32Vec {
					// AVX-512 float32 lanes, as torch's kernel (bn_f32_cgo.go)
					sum, dotp = bnBwdSumsF32V(xr.base(), x.Strides[0], gr.base(), gout.Strides[0], N, S, mean)
					vec{gw}.set(c, dotp*invstd)
					vec{gb}.set(c, sum)
					if gin != nil {
						bnBwdApplyF32V(xr.base(), x.Strides[0], gr.base(), gout.Strides[0], f32Rows{*gin, c}.base(), gin.Strides[0],
							N, S, mean, sum/float64(cnt), dotp*invstd*invstd/float64(cnt), invstd, vec{w}.get(c, 1), training)
					}
					continue
				}
				if cN {
					sum, dotp = bnBwdSumsC(xr.base(), x.Strides[0], gr.base(), gout.Strides[0], N, S, mean)
				} else {
					var sl, dl bnLanes
					for n := int64(0); n < N; n++ {
						xs, gs := xr.row(n), gr.row(n)
						gs = gs[:len(xs)]
						for i, xv := range xs {
							g := float64(gs[i])
							sl.add(i, len(xs), g)
							dl.add(i, len(xs), (float64(xv)-mean)*g)
						}
					}
					sum, dotp = sl.total(), dl.total()
				}
				vec{gw}.set(c, dotp*invstd)
				vec{gb}.set(c, sum)
				if gin == nil {
					continue
				}
				wc := vec{w}.get(c, 1)
				ir := f32Rows{*gin, c}
				if cN {
					k := dotp * invstd * invstd / float64(cnt)
					gm := sum / float64(cnt)
					bnBwdApplyC(xr.base(), x.Strides[0], gr.base(), gout.Strides[0], ir.base(), gin.Strides[0], N, S,
						mean, gm, k, invstd, wc, training)
				} else if training {
					k := dotp * invstd * invstd / float64(cnt)
					gm := sum / float64(cnt)
					for n := int64(0); n < N; n++ {
						xs, gs, os := xr.row(n), gr.row(n), ir.row(n)
						gs, os = gs[:len(xs)], os[:len(xs)]
						for i, xv := range xs {
							os[i] = float32((float64(gs[i]) - gm - (float64(xv)-mean)*k) * invstd * wc)
						}
					}
				} else {
					for n := int64(0); n < N; n++ {
						gs, os := gr.row(n), ir.row(n)
						os = os[:len(gs)]
						for i, g := range gs {
							os[i] = float32(float64(g) * invstd * wc)
						}
					}
				}
				continue
			}
			xv.loadChan(c, xb)
			gv.loadChan(c, gb2)
			sum, dotp := 0.0, 0.0
			for i, g := range gb2 {
				sum += g
				dotp += (xb[i] - mean) * g
			}
			vec{gw}.set(c, dotp*invstd)
			vec{gb}.set(c, sum)
			if gin == nil {
				continue
			}
			wc := vec{w}.get(c, 1)
			if training {
				k := dotp * invstd * invstd / float64(cnt)
				gm := sum / float64(cnt)
				for i, g := range gb2 {
					gb2[i] = (g - gm - (xb[i]-mean)*k) * invstd * wc
				}
			} else {
				for i, g := range gb2 {
					gb2[i] = g * invstd * wc
				}
			}
			chanView{*gin}.storeChan(c, gb2)
		}
	})
	return nil
}

// reducedDiv is a / n for a value of a reduced (or float32) dtype and an integer count,
// as torch's scalar operator does it: n converted to the dtype, the quotient rounded.
func reducedDiv(dt DType, a float32, n int64) float32 {
	return roundTo(dt, a/roundTo(dt, float32(n)))
}
