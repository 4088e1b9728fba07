package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// CTC loss (hpex CTCLoss, hpu::ctc_loss_custom): the forward (alpha) recursion over the
// blank-extended target l' (length 2*S+1) in log space, one batch element per worker
// task, and its backward with the beta recursion, as torch's ctc_loss defines them.
// Operands are contiguous: log_probs [T,N,C] float32, targets [N,Smax] int64 (padded),
// input/target lengths [N] int64; log_alpha [N,T,2*Smax+1] float32; nll [N] float32.

type ctcShape struct {
	T, N, C, Smax int
}

func ctcCheck(lp, targets, inLen, tgtLen Tensor) (ctcShape, error) {
	if lp.DType != Float32 || lp.Dim() != 3 || !lp.IsContiguous() {
		return ctcShape{}, fmt.Errorf("ctc_loss: log_probs must be a contiguous float32 [T, N, C] tensor")
	}
	sh := ctcShape{T: int(lp.Sizes[0]), N: int(lp.Sizes[1]), C: int(lp.Sizes[2])}
	if targets.DType != Int64 || targets.Dim() != 2 || int(targets.Sizes[0]) != sh.N || !targets.IsContiguous() {
		return ctcShape{}, fmt.Errorf("ctc_loss: targets must be a contiguous int64 [N, S] tensor")
	}
	sh.Smax = int(targets.Sizes[1])
	for _, t := range []Tensor{inLen, tgtLen} {
		if t.DType != Int64 || t.Numel() != int64(sh.N) || !t.IsContiguous() {
			return ctcShape{}, fmt.Errorf("ctc_loss: lengths must be int64 tensors of %d elements", sh.N)
		}
	}
	return sh, nil
}

// ctcSeq is one batch element's view of the operands.
type ctcSeq struct {
	sh     ctcShape
	lp     []float32 // the whole [T,N,C]
	n      int
	tgt    []int64
	Tn, Sn int
	blank  int
}

func (q ctcSeq) label(s int) int {
	if s%2 == 0 {
		return q.blank
	}
	return int(q.tgt[s/2])
}

func (q ctcSeq) logp(t, c int) float64 {
	return float64(q.lp[(t*q.sh.N+q.n)*q.sh.C+c])
}

// canSkip: l'(s) may follow l'(s-2) directly (a label differing from the one before it).
func (q ctcSeq) canSkip(s int) bool {
	return s >= 2 && s%2 == 1 && q.label(s) != q.label(s-2)
}

func ctcSeqs(sh ctcShape, lp, targets, inLen, tgtLen Tensor, blank int) ([]ctcSeq, error) {
	lps := unsafe.Slice((*float32)(lp.Ptr), sh.T*sh.N*sh.C)
	tg := unsafe.Slice((*int64)(targets.Ptr), sh.N*sh.Smax)
	il := unsafe.Slice((*int64)(inLen.Ptr), sh.N)
	tl := unsafe.Slice((*int64)(tgtLen.Ptr), sh.N)
	if blank < 0 || blank >= sh.C {
		return nil, fmt.Errorf("ctc_loss: blank must be in label range")
	}
	out := make([]ctcSeq, sh.N)
	for n := range out {
		if il[n] < 0 || int(il[n]) > sh.T {
			return nil, fmt.Errorf("ctc_loss: Expected input_lengths to have value at most %d, but got value %d", sh.T, il[n])
		}
		if tl[n] < 0 || int(tl[n]) > sh.Smax {
			return nil, fmt.Errorf("ctc_loss: Expected tensor to have size at least %d at dimension 1, but got size %d", tl[n], sh.Smax)
		}
		q := ctcSeq{sh: sh, lp: lps, n: n, tgt: tg[n*sh.Smax : (n+1)*sh.Smax], Tn: int(il[n]), Sn: int(tl[n]), blank: blank}
		for s := 0; s < q.Sn; s++ {
			if c := q.tgt[s]; c < 0 || int(c) >= sh.C {
				return nil, fmt.Errorf("ctc_loss: target index %d is out of bounds for %d classes", c, sh.C)
			}
		}
		out[n] = q
	}
	return out, nil
}

// CTCForward writes each element's negative log likelihood into nll and its log alpha
// table into alpha (entries past its lengths are -inf).
func CTCForward(nll, alpha, lp, targets, inLen, tgtLen Tensor, blank int) error {
	sh, err := ctcCheck(lp, targets, inLen, tgtLen)
	if err != nil {
		return err
	}
	W := 2*sh.Smax + 1
	if nll.DType != Float32 || nll.Numel() != int64(sh.N) || alpha.DType != Float32 || alpha.Numel() != int64(sh.N*sh.T*W) {
		return fmt.Errorf("ctc_loss: outputs must be float32 [N] and [N, T, 2S+1]")
	}
	seqs, err := ctcSeqs(sh, lp, targets, inLen, tgtLen, blank)
	if err != nil {
		return err
	}
	out := unsafe.Slice((*float32)(nll.Ptr), sh.N)
	al := unsafe.Slice((*float32)(alpha.Ptr), sh.N*sh.T*W)
	ParallelFor(int64(sh.N), int64(sh.T*W)*8, func(lo, hi int64) {
		for n := int(lo); n < int(hi); n++ {
			out[n] = float32(ctcAlpha(seqs[n], al[n*sh.T*W:(n+1)*sh.T*W], W))
		}
	})
	return nil
}

// ctcExp and ctcLog are expf/logf (correctly rounded float32 results): the CTC recursions
// run in float32 with torch's CPU kernel's operation order, so results match it to the
// last bit or two rather than only to float32 tolerance.
func ctcExp(x float32) float32 { return float32(math.Exp(float64(x))) }
func ctcLog(x float32) float32 { return float32(math.Log(float64(x))) }

var ctcNegInf = float32(math.Inf(-1))

// ctcLSE3 is log(exp(a-m) + exp(b-m) + exp(c-m)) + m with m the largest (0 when all are
// -inf), summed in that order as torch does.
func ctcLSE3(a, b, c float32) float32 {
	m := max(a, b, c)
	if m == ctcNegInf {
		m = 0
	}
	return ctcLog(ctcExp(a-m)+ctcExp(b-m)+ctcExp(c-m)) + m
}

// ctcAlpha fills one element's log alpha rows and returns its nll (float32 arithmetic).
func ctcAlpha(q ctcSeq, al []float32, W int) float64 {
	for i := range al {
		al[i] = ctcNegInf
	}
	L := 2*q.Sn + 1
	if q.Tn == 0 {
		if q.Sn == 0 {
			return 0
		}
		return math.Inf(1)
	}
	al[0] = float32(q.logp(0, q.blank))
	if L > 1 {
		al[1] = float32(q.logp(0, q.label(1)))
	}
	for t := 1; t < q.Tn; t++ {
		prev, cur := al[(t-1)*W:], al[t*W:]
		for s := 0; s < L; s++ {
			la2, la3 := ctcNegInf, ctcNegInf
			if s >= 1 {
				la2 = prev[s-1]
			}
			if q.canSkip(s) {
				la3 = prev[s-2]
			}
			cur[s] = ctcLSE3(prev[s], la2, la3) + float32(q.logp(t, q.label(s)))
		}
	}
	return float64(ctcNLL(q, al, W))
}

// CTCBackward writes d loss / d log_probs into grad ([T,N,C] float32): per element n,
// scale[n] * (exp(lp) - exp(log(sum over s with l'(s)=c of alpha*beta) + nll - lp)) for
// t < input length, 0 beyond; an infinite nll gives 0 when zeroInfinity.
// The nll of each element is read off its alpha table (the bridge's backward gets the
// reduced loss, which no longer holds it).
func CTCBackward(grad, scale, lp, targets, inLen, tgtLen, alpha Tensor, blank int, zeroInfinity bool) error {
	sh, err := ctcCheck(lp, targets, inLen, tgtLen)
	if err != nil {
		return err
	}
	W := 2*sh.Smax + 1
	if grad.DType != Float32 || grad.Numel() != lp.Numel() || scale.DType != Float32 || scale.Numel() != int64(sh.N) ||
		alpha.DType != Float32 || alpha.Numel() != int64(sh.N*sh.T*W) {
		return fmt.Errorf("ctc_loss_backward: expected float32 grad [T,N,C], scale [N], alpha [N,T,2S+1]")
	}
	seqs, err := ctcSeqs(sh, lp, targets, inLen, tgtLen, blank)
	if err != nil {
		return err
	}
	gr := unsafe.Slice((*float32)(grad.Ptr), sh.T*sh.N*sh.C)
	sc := unsafe.Slice((*float32)(scale.Ptr), sh.N)
	al := unsafe.Slice((*float32)(alpha.Ptr), sh.N*sh.T*W)
	ParallelFor(int64(sh.N), int64(sh.T*(W+sh.C))*8, func(lo, hi int64) {
		for n := int(lo); n < int(hi); n++ {
			a := al[n*sh.T*W : (n+1)*sh.T*W]
			ctcGrad(seqs[n], gr, float64(sc[n]), float64(ctcNLL(seqs[n], a, W)), a, W, zeroInfinity)
		}
	})
	return nil
}

func ctcGrad(q ctcSeq, gr []float32, scale, nll float64, al []float32, W int, zeroInfinity bool) {
	sh := q.sh
	row := func(t int) []float32 { return gr[(t*sh.N+q.n)*sh.C : (t*sh.N+q.n+1)*sh.C] }
	nll32, gs := float32(nll), float32(scale)
	for t := 0; t < sh.T; t++ {
		r := row(t)
		fill := ctcNegInf // torch's grad starts at -inf: the log-sum of alpha*beta per class
		if t >= q.Tn || (zeroInfinity && math.IsInf(nll, 1)) {
			fill = 0
		}
		for c := range r {
			r[c] = fill
		}
	}
	if q.Tn == 0 || (zeroInfinity && math.IsInf(nll, 1)) {
		return
	}
	L := 2*q.Sn + 1
	next := make([]float32, L)
	cur := make([]float32, L)
	for s := range next {
		next[s] = ctcNegInf
	}
	// The last time step: beta is the log-prob of the last two states.
	T1 := q.Tn - 1
	r := row(T1)
	next[L-1] = float32(q.logp(T1, q.blank))
	r[q.blank] = al[T1*W+L-1] + next[L-1]
	if q.Sn > 0 {
		c := q.label(L - 2)
		next[L-2] = float32(q.logp(T1, c))
		r[c] = al[T1*W+L-2] + next[L-2]
	}
	for t := q.Tn - 2; t >= 0; t-- {
		r := row(t)
		for s := L - 1; s >= 0; s-- {
			lb2, lb3 := ctcNegInf, ctcNegInf
			if s < L-1 {
				lb2 = next[s+1]
			}
			if s+2 < L && q.canSkip(s+2) {
				lb3 = next[s+2]
			}
			c := q.label(s)
			b := ctcLSE3(next[s], lb2, lb3) + float32(q.logp(t, c))
			cur[s] = b
			lab := al[t*W+s] + b
			if lcab := r[c]; lcab == ctcNegInf {
				r[c] = lab
			} else {
				m := max(lcab, lab)
				r[c] = ctcLog(ctcExp(lcab-m)+ctcExp(lab-m)) + m
			}
		}
		next, cur = cur, next
	}
	for t := 0; t < q.Tn; t++ {
		r := row(t)
		for c := range r {
			lp := float32(q.logp(t, c))
			// alpha and beta both include lp(t, l'(s)): one is divided out.
			r[c] = (ctcExp(lp) - ctcExp(r[c]+nll32-lp)) * gs
		}
	}
}

// ctcNLL is -log p(target | input) from an alpha table: its last two entries at the last
// time step of the element (torch's float32 formula).
func ctcNLL(q ctcSeq, al []float32, W int) float32 {
	if q.Tn == 0 {
		if q.Sn == 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	L := 2*q.Sn + 1
	l1 := al[(q.Tn-1)*W+L-1]
	if L == 1 {
		return -l1
	}
	l2 := al[(q.Tn-1)*W+L-2]
	m := max(l1, l2)
	if m == ctcNegInf {
		m = 0
	}
	return -(ctcLog(ctcExp(l1-m)+ctcExp(l2-m)) + m)
}
