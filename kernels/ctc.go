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

func logAdd(a, b float64) float64 {
	if math.IsInf(a, -1) {
		return b
	}
	if math.IsInf(b, -1) {
		return a
	}
	m := math.Max(a, b)
	return m + math.Log(math.Exp(a-m)+math.Exp(b-m))
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

// ctcAlpha fills one element's log alpha rows (float64 arithmetic) and returns its nll.
func ctcAlpha(q ctcSeq, al []float32, W int) float64 {
	ninf := float32(math.Inf(-1))
	for i := range al {
		al[i] = ninf
	}
	L := 2*q.Sn + 1
	if q.Tn == 0 {
		if q.Sn == 0 {
			return 0
		}
		return math.Inf(1)
	}
	prev := make([]float64, L)
	cur := make([]float64, L)
	for s := range prev {
		prev[s] = math.Inf(-1)
	}
	prev[0] = q.logp(0, q.blank)
	if L > 1 {
		prev[1] = q.logp(0, q.label(1))
	}
	for s := 0; s < L; s++ {
		al[s] = float32(prev[s])
	}
	for t := 1; t < q.Tn; t++ {
		for s := 0; s < L; s++ {
			a := prev[s]
			if s >= 1 {
				a = logAdd(a, prev[s-1])
			}
			if q.canSkip(s) {
				a = logAdd(a, prev[s-2])
			}
			cur[s] = a + q.logp(t, q.label(s))
			al[t*W+s] = float32(cur[s])
		}
		prev, cur = cur, prev
	}
	ll := prev[L-1]
	if L > 1 {
		ll = logAdd(ll, prev[L-2])
	}
	return -ll
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
			ctcGrad(seqs[n], gr, float64(sc[n]), ctcNLL(seqs[n], a, W), a, W, zeroInfinity)
		}
	})
	return nil
}

func ctcGrad(q ctcSeq, gr []float32, scale, nll float64, al []float32, W int, zeroInfinity bool) {
	sh := q.sh
	row := func(t int) []float32 { return gr[(t*sh.N+q.n)*sh.C : (t*sh.N+q.n+1)*sh.C] }
	inf := math.IsInf(nll, 1)
	for t := 0; t < sh.T; t++ {
		r := row(t)
		for c := range r {
			r[c] = 0
		}
		if t >= q.Tn || (inf && zeroInfinity) {
			continue
		}
		if inf { // torch: exp(lp) - exp(-inf) ... = nan-free: the gradient of an impossible alignment
			for c := range r {
				r[c] = float32(math.Exp(q.logp(t, c)) * scale)
			}
		}
	}
	if inf || q.Tn == 0 {
		return
	}
	L := 2*q.Sn + 1
	next := make([]float64, L)
	cur := make([]float64, L)
	lcab := make([]float64, sh.C)
	for t := q.Tn - 1; t >= 0; t-- {
		for s := 0; s < L; s++ {
			var b float64
			if t == q.Tn-1 {
				b = math.Inf(-1)
				if s >= L-2 {
					b = q.logp(t, q.label(s))
				}
			} else {
				b = next[s]
				if s+1 < L {
					b = logAdd(b, next[s+1])
				}
				if s+2 < L && q.canSkip(s+2) {
					b = logAdd(b, next[s+2])
				}
				b += q.logp(t, q.label(s))
			}
			cur[s] = b
		}
		for c := range lcab {
			lcab[c] = math.Inf(-1)
		}
		for s := 0; s < L; s++ {
			c := q.label(s)
			lcab[c] = logAdd(lcab[c], float64(al[t*W+s])+cur[s])
		}
		r := row(t)
		for c := range r {
			lpv := q.logp(t, c)
			// alpha and beta both include lp(t, l'(s)): one is divided out.
			r[c] = float32((math.Exp(lpv) - math.Exp(lcab[c]+nll-lpv)) * scale)
		}
		next, cur = cur, next
	}
}

// ctcNLL is -log p(target | input) from an alpha table: its last two entries at the last
// time step of the element.
func ctcNLL(q ctcSeq, al []float32, W int) float64 {
	if q.Tn == 0 {
		if q.Sn == 0 {
			return 0
		}
		return math.Inf(1)
	}
	L := 2*q.Sn + 1
	ll := float64(al[(q.Tn-1)*W+L-1])
	if L > 1 {
		ll = logAdd(ll, float64(al[(q.Tn-1)*W+L-2]))
	}
	return -ll
}
