package kernels

import (
	"fmt"
	"math"
)

// LAMB (hpex FusedLamb): phase 1 updates the moments and forms the Adam update
// u = m^/(sqrt(v^)+eps) + wd*w with the norms of w and u per tensor; phase 2 applies
// w -= lr*ratio*u with the trust ratio ||w||/||u||. The bridge's two ops
// (optimizer_lamb_phase1/phase2) keep u in tensors between the phases; FusedLamb's own
// step runs both in one call and recomputes u instead of storing it.

// LambParams are the scalars of one FusedLamb step.
type LambParams struct {
	LR, Beta1, Beta2, Beta3, Eps, WeightDecay float64
	BiasCorr1, BiasCorr2                      float64 // 1-b1^t, 1-b2^t (1 without bias correction)
	UseLamb                                   bool
}

// lambConsts are LambParams as the float32 factors the chunk loops use.
type lambConsts struct {
	inv, b1, b2, b3, c2, bc1, bc2, eps, wd float32
}

func newLambConsts(clip float64, p LambParams) lambConsts {
	return lambConsts{inv: float32(1 / clip), b1: float32(p.Beta1), b2: float32(p.Beta2), b3: float32(p.Beta3),
		c2: float32(1 - p.Beta2), bc1: float32(p.BiasCorr1), bc2: float32(p.BiasCorr2), eps: float32(p.Eps),
		wd: float32(p.WeightDecay)}
}

// moments updates ms and vs from the gradients divided by the clip divisor.
func (k lambConsts) moments(gs, ms, vs []float32) {
	ms, vs = ms[:len(gs)], vs[:len(gs)]
	for i := range gs {
		gi := gs[i] * k.inv
		ms[i] = k.b1*ms[i] + k.b3*gi
		vs[i] = k.b2*vs[i] + k.c2*(gi*gi)
	}
}

// update writes the Adam update u of the (new) moments and returns the sums of squares
// of w and u over the chunk.
func (k lambConsts) update(ms, vs, ws, us []float32) (sw, su float64) {
	ms, vs, us = ms[:len(ws)], vs[:len(ws)], us[:len(ws)]
	for i := range ws {
		mh := ms[i] / k.bc1
		vh := vs[i] / k.bc2
		u := mh/(float32(math.Sqrt(float64(vh)))+k.eps) + k.wd*ws[i]
		us[i] = u
		sw += float64(ws[i]) * float64(ws[i])
		su += float64(u) * float64(u)
	}
	return sw, su
}

// lambRatio is the trust ratio ||w||/||u||, applied when wd != 0 or use_lamb (1 when
// either norm is 0).
func lambRatio(wNorm, uNorm float64, wd float64, useLamb bool) float32 {
	if (wd != 0 || useLamb) && wNorm > 0 && uNorm > 0 {
		return float32(wNorm / uNorm)
	}
	return 1
}

// scratch returns operand buffer k of io sized n (a chunk's float32 work space).
func (c *chunkIO) scratch(k, n int) []float32 {
	if cap(c.bufs[k]) < n {
		c.bufs[k] = make([]float32, optChunk)
	}
	return c.bufs[k][:n]
}

// lambPhase1 runs phase 1 over the chunks; keep, when set, receives each chunk's update
// (else it only feeds the norms). It returns the per-tensor norms of w and u.
func lambPhase1(k lambConsts, w, g, m, v []Tensor, keep func(io *chunkIO, pt optPart, us []float32)) (wn, un []float64) {
	parts := optParts(w)
	wsq := make([]float64, len(parts))
	usq := make([]float64, len(parts))
	nw := min(Workers(), max(len(parts), 1))
	RunParts(nw, func(wi int) {
		io := newChunkIO(6) // 0-3 operands, 4 the update, 5 the phase-1 output u
		for pi := wi; pi < len(parts); pi += nw {
			pt := parts[pi]
			ws := io.view(0, w[pt.ti], pt.lo, pt.hi)
			ms := io.view(2, m[pt.ti], pt.lo, pt.hi)
			vs := io.view(3, v[pt.ti], pt.lo, pt.hi)
			k.moments(io.view(1, g[pt.ti], pt.lo, pt.hi)[:len(ws)], ms, vs)
			io.flush(m[pt.ti], pt.lo, pt.hi, ms)
			io.flush(v[pt.ti], pt.lo, pt.hi, vs)
			us := io.scratch(4, len(ws))
			wsq[pi], usq[pi] = k.update(ms, vs, ws, us)
			if keep != nil {
				keep(io, pt, us)
			}
		}
	})
	wn, un = make([]float64, len(w)), make([]float64, len(w))
	for pi, pt := range parts { // summed in chunk order: independent of the worker count
		wn[pt.ti] += wsq[pi]
		un[pt.ti] += usq[pi]
	}
	for i := range wn {
		wn[i], un[i] = math.Sqrt(wn[i]), math.Sqrt(un[i])
	}
	return wn, un
}

// Lamb runs both LAMB phases in one call: gradients are divided by the clip divisor (a
// one-element tensor, LambNorm's output), the moments updated, and w -= lr*ratio*u.
func Lamb(clipT Tensor, w, g, m, v []Tensor, p LambParams) error {
	if err := checkOptLists("optimizer_lamb", w, g, m, v); err != nil {
		return err
	}
	clip, err := loadScalar(clipT)
	if err != nil {
		return fmt.Errorf("optimizer_lamb: clip divisor: %v", err)
	}
	k := newLambConsts(clip, p)
	wn, un := lambPhase1(k, w, g, m, v, nil)
	ratio := make([]float32, len(w))
	for i := range w {
		ratio[i] = lambRatio(wn[i], un[i], p.WeightDecay, p.UseLamb)
	}
	// Phase 2: recompute u from the new moments and the (unchanged) weights, and apply it.
	lr := float32(p.LR)
	forChunks(w, 5, func(io *chunkIO, pt optPart) {
		ws := io.view(0, w[pt.ti], pt.lo, pt.hi)
		us := io.scratch(4, len(ws))
		k.update(io.view(2, m[pt.ti], pt.lo, pt.hi), io.view(3, v[pt.ti], pt.lo, pt.hi), ws, us)
		s := lr * ratio[pt.ti]
		for i := range ws {
			ws[i] -= s * us[i]
		}
		io.flush(w[pt.ti], pt.lo, pt.hi, ws)
	})
	return nil
}

// LambPhase1 is hpu::optimizer_lamb_phase1: the moments m, v and the updates u (same
// shapes as w) are written, and the norms of w and u into the one-element tensors wNorm
// and uNorm. clip, bc1 and bc2 are one-element tensors (the clip divisor, 1-b1^t, 1-b2^t).
func LambPhase1(clipT, bc1T, bc2T Tensor, g, w, m, v, wNorm, uNorm, u []Tensor, p LambParams) error {
	if err := checkOptLists("optimizer_lamb_phase1", w, g, m, v, u); err != nil {
		return err
	}
	if len(wNorm) != len(w) || len(uNorm) != len(w) {
		return fmt.Errorf("optimizer_lamb_phase1: %d weights but %d/%d norm outputs", len(w), len(wNorm), len(uNorm))
	}
	var vals [3]float64
	for i, t := range []Tensor{clipT, bc1T, bc2T} {
		x, err := loadScalar(t)
		if err != nil {
			return fmt.Errorf("optimizer_lamb_phase1: scalar operand %d: %v", i, err)
		}
		vals[i] = x
	}
	p.BiasCorr1, p.BiasCorr2 = vals[1], vals[2]
	k := newLambConsts(vals[0], p)
	wn, un := lambPhase1(k, w, g, m, v, func(io *chunkIO, pt optPart, us []float32) {
		dst := io.view(5, u[pt.ti], pt.lo, pt.hi)
		copy(dst, us)
		io.flush(u[pt.ti], pt.lo, pt.hi, dst)
	})
	for i := range w {
		if err := storeScalar(wNorm[i], wn[i]); err != nil {
			return fmt.Errorf("optimizer_lamb_phase1: out_weight_norms: %v", err)
		}
		if err := storeScalar(uNorm[i], un[i]); err != nil {
			return fmt.Errorf("optimizer_lamb_phase1: out_adam_norms: %v", err)
		}
	}
	return nil
}

// LambPhase2 is hpu::optimizer_lamb_phase2: w += neg_step*ratio*u with the trust ratio
// from the norms phase 1 wrote.
func LambPhase2(negStepT Tensor, w, uNorm, wNorm, u []Tensor, wd float64, useLamb bool) error {
	if err := checkOptLists("optimizer_lamb_phase2", w, u); err != nil {
		return err
	}
	if len(wNorm) != len(w) || len(uNorm) != len(w) {
		return fmt.Errorf("optimizer_lamb_phase2: %d weights but %d/%d norms", len(w), len(wNorm), len(uNorm))
	}
	ns, err := loadScalar(negStepT)
	if err != nil {
		return fmt.Errorf("optimizer_lamb_phase2: neg_step: %v", err)
	}
	scale := make([]float32, len(w))
	for i := range w {
		a, err := loadScalar(wNorm[i])
		if err != nil {
			return fmt.Errorf("optimizer_lamb_phase2: weight_norms: %v", err)
		}
		b, err := loadScalar(uNorm[i])
		if err != nil {
			return fmt.Errorf("optimizer_lamb_phase2: adam_norms: %v", err)
		}
		scale[i] = float32(ns) * lambRatio(a, b, wd, useLamb)
	}
	forChunks(w, 2, func(io *chunkIO, pt optPart) {
		ws := io.view(0, w[pt.ti], pt.lo, pt.hi)
		us := io.view(1, u[pt.ti], pt.lo, pt.hi)[:len(ws)]
		s := scale[pt.ti]
		for i := range ws {
			ws[i] += s * us[i]
		}
		io.flush(w[pt.ti], pt.lo, pt.hi, ws)
	})
	return nil
}
