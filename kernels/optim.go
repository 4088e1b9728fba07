package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Multi-tensor optimizer kernels (hpex.optimizers): one call updates every parameter of a
// group. The tensors are cut into chunks claimed by the workers; each chunk is computed in
// float32 (bfloat16 operands are widened into per-chunk buffers and rounded back once), as
// the bridge's TPC kernels compute in float32 whatever the storage dtype.

// optChunk is the elements one worker takes at a time: small enough to balance a group of
// uneven tensors over the workers, large enough that claiming costs nothing.
const optChunk = 16 * 1024

// optList is one operand role (weights, grads, exp_avg, ...) over the group's tensors.
type optList []Tensor

// checkOptLists verifies that every list holds n contiguous float32/bfloat16 tensors and
// that tensor i has the same element count in every list.
func checkOptLists(name string, lists ...optList) error {
	if len(lists) == 0 {
		return nil
	}
	n := len(lists[0])
	for li, l := range lists {
		if len(l) != n {
			return fmt.Errorf("%s: operand list %d has %d tensors, expected %d", name, li, len(l), n)
		}
		for i, t := range l {
			if t.DType != Float32 && t.DType != BFloat16 {
				return fmt.Errorf("%s: tensor %d of list %d has dtype %v; float32 and bfloat16 are supported", name, i, li, t.DType)
			}
			if !t.IsContiguous() {
				return fmt.Errorf("%s: tensor %d of list %d is not contiguous", name, i, li)
			}
			if t.Numel() != lists[0][i].Numel() {
				return fmt.Errorf("%s: tensor %d of list %d has %d elements, expected %d", name, i, li, t.Numel(), lists[0][i].Numel())
			}
		}
	}
	return nil
}

// optPart is one chunk: elements [lo, hi) of tensor ti.
type optPart struct {
	ti     int
	lo, hi int64
}

func optParts(l optList) []optPart {
	var parts []optPart
	for i, t := range l {
		n := t.Numel()
		for lo := int64(0); lo < n; lo += optChunk {
			parts = append(parts, optPart{i, lo, min(lo+optChunk, n)})
		}
	}
	return parts
}

// chunkIO gives float32 views of one chunk of several operands: float32 storage is used
// in place, bfloat16 is widened into a scratch buffer and narrowed back by flush.
type chunkIO struct {
	bufs [][]float32
}

func newChunkIO(k int) *chunkIO {
	c := &chunkIO{bufs: make([][]float32, k)}
	return c
}

// view returns operand k's elements [lo, hi) of t as float32.
func (c *chunkIO) view(k int, t Tensor, lo, hi int64) []float32 {
	n := int(hi - lo)
	if t.DType == Float32 {
		return unsafe.Slice((*float32)(at(t.Ptr, lo*4)), n)
	}
	if cap(c.bufs[k]) < n {
		c.bufs[k] = make([]float32, optChunk)
	}
	b := c.bufs[k][:n]
	bf16ToF32Bulk(b, unsafe.Slice((*uint16)(at(t.Ptr, lo*2)), n))
	return b
}

// flush writes a bfloat16 operand's chunk back, rounding once.
func (c *chunkIO) flush(t Tensor, lo, hi int64, v []float32) {
	if t.DType == BFloat16 {
		f32ToBF16Bulk(unsafe.Slice((*uint16)(at(t.Ptr, lo*2)), int(hi-lo)), v)
	}
}

// forChunks runs fn over every chunk of the lists' tensors on the workers; fn gets the
// chunk and a per-part scratch of k operand buffers.
func forChunks(l optList, k int, fn func(io *chunkIO, p optPart)) {
	parts := optParts(l)
	if len(parts) == 0 {
		return
	}
	if len(parts) == 1 {
		fn(newChunkIO(k), parts[0])
		return
	}
	w := min(Workers(), len(parts))
	// Each worker walks its own stride of parts, so the scratch buffers are per worker.
	RunParts(w, func(wi int) {
		io := newChunkIO(k)
		for i := wi; i < len(parts); i += w {
			fn(io, parts[i])
		}
	})
}

// AdamWParams are the scalars of one FusedAdamW step.
type AdamWParams struct {
	Beta1, Beta2, Eps float64
	HasWeightDecay    bool
}

// AdamW updates weights w, moments m and v from grads g in place, per the bridge:
// m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; w = w*wdf (when HasWeightDecay);
// w += neg_step*m/(sqrt(v)+eps). negStep (-lr*sqrt(1-b2^t)/(1-b1^t), or -lr without bias
// correction) and wdf (1 - lr*weight_decay) are one-element tensors read when the kernel
// runs, so a lazy graph takes each step's values without recompiling.
func AdamW(negStep, wdFactor Tensor, w, g, m, v []Tensor, p AdamWParams) error {
	if err := checkOptLists("optimizer_adamw", w, g, m, v); err != nil {
		return err
	}
	k, err := newAdamWConsts(negStep, wdFactor, p)
	if err != nil {
		return err
	}
	forChunks(w, 4, func(io *chunkIO, pt optPart) {
		wt, gt, mt, vt := w[pt.ti], g[pt.ti], m[pt.ti], v[pt.ti]
		ws := io.view(0, wt, pt.lo, pt.hi)
		gs := io.view(1, gt, pt.lo, pt.hi)
		ms := io.view(2, mt, pt.lo, pt.hi)
		vs := io.view(3, vt, pt.lo, pt.hi)
		k.chunk(ws, gs, ms, vs)
		io.flush(wt, pt.lo, pt.hi, ws)
		io.flush(mt, pt.lo, pt.hi, ms)
		io.flush(vt, pt.lo, pt.hi, vs)
	})
	return nil
}

// adamwConsts are one step's AdamW factors in float32.
type adamwConsts struct {
	b1, b2, c1, c2, eps, ns, wdf float32
	decay                        bool
}

func newAdamWConsts(negStep, wdFactor Tensor, p AdamWParams) (adamwConsts, error) {
	nsv, err := loadScalar(negStep)
	if err != nil {
		return adamwConsts{}, fmt.Errorf("optimizer_adamw: neg_step: %v", err)
	}
	wdv, err := loadScalar(wdFactor)
	if err != nil {
		return adamwConsts{}, fmt.Errorf("optimizer_adamw: weight_decay: %v", err)
	}
	b1, b2 := float32(p.Beta1), float32(p.Beta2)
	return adamwConsts{b1: b1, b2: b2, c1: 1 - b1, c2: 1 - b2, eps: float32(p.Eps), ns: float32(nsv),
		wdf: float32(wdv), decay: p.HasWeightDecay}, nil
}

// moments updates the moments only (the fp8 path's second pass).
func (k adamwConsts) moments(gs, ms, vs []float32) {
	ms, vs = ms[:len(gs)], vs[:len(gs)]
	for i, gi := range gs {
		ms[i] = k.b1*ms[i] + k.c1*gi
		vs[i] = k.b2*vs[i] + k.c2*(gi*gi)
	}
}

// chunk updates the moments and the weights of one chunk.
func (k adamwConsts) chunk(ws, gs, ms, vs []float32) {
	gs, ms, vs = gs[:len(ws)], ms[:len(ws)], vs[:len(ws)]
	for i := range ws {
		gi := gs[i]
		mi := k.b1*ms[i] + k.c1*gi
		vi := k.b2*vs[i] + k.c2*(gi*gi)
		ms[i], vs[i] = mi, vi
		wi := ws[i]
		if k.decay {
			wi *= k.wdf
		}
		ws[i] = wi + k.ns*(mi/(float32(math.Sqrt(float64(vi)))+k.eps))
	}
}

// SGDParams are the scalars of one FusedSGD step (torch.optim.SGD semantics).
type SGDParams struct {
	WeightDecay, Dampening float64
	Nesterov               bool
}

// SGD updates weights w from grads g, and momentum buffers buf when mom is given. The
// learning rate, the momentum and the step number (epoch) are one-element tensors read
// when the kernel runs; at epoch 0 a buffer takes the (decayed) gradient as it is, as
// torch.optim.SGD's first step does.
func SGD(lrT Tensor, momT, epochT *Tensor, w, g, buf []Tensor, p SGDParams) error {
	lists := []optList{w, g}
	if momT != nil {
		lists = append(lists, buf)
	}
	if err := checkOptLists("optimizer_sgd", lists...); err != nil {
		return err
	}
	lrv, err := loadScalar(lrT)
	if err != nil {
		return fmt.Errorf("optimizer_sgd: learning_rate: %v", err)
	}
	var momv float64
	first := false
	if momT != nil {
		if momv, err = loadScalar(*momT); err != nil {
			return fmt.Errorf("optimizer_sgd_momentum: mom: %v", err)
		}
		ep, err := loadScalar(*epochT)
		if err != nil {
			return fmt.Errorf("optimizer_sgd_momentum: epoch_num: %v", err)
		}
		first = ep == 0
	}
	lr, wd, mom, damp := float32(lrv), float32(p.WeightDecay), float32(momv), float32(1-p.Dampening)
	forChunks(w, 3, func(io *chunkIO, pt optPart) {
		ws := io.view(0, w[pt.ti], pt.lo, pt.hi)
		gs := io.view(1, g[pt.ti], pt.lo, pt.hi)[:len(ws)]
		var bs []float32
		if momT != nil {
			bs = io.view(2, buf[pt.ti], pt.lo, pt.hi)[:len(ws)]
		}
		for i := range ws {
			d := gs[i]
			if wd != 0 {
				d += wd * ws[i]
			}
			if bs != nil {
				b := d
				if !first {
					b = mom*bs[i] + damp*d
				}
				bs[i] = b
				if p.Nesterov {
					d += mom * b
				} else {
					d = b
				}
			}
			ws[i] -= lr * d
		}
		io.flush(w[pt.ti], pt.lo, pt.hi, ws)
		if bs != nil {
			io.flush(buf[pt.ti], pt.lo, pt.hi, bs)
		}
	})
	return nil
}

// Adagrad updates weights w and squared-gradient sums s from grads g with torch.optim.Adagrad's
// arithmetic; CLR is lr/(1+(step-1)*lr_decay).
func Adagrad(w, g, s []Tensor, clr, wd, eps float64) error {
	if err := checkOptLists("fused_adagrad", w, g, s); err != nil {
		return err
	}
	lr, wd32, eps32 := float32(clr), float32(wd), float32(eps)
	forChunks(w, 3, func(io *chunkIO, pt optPart) {
		ws := io.view(0, w[pt.ti], pt.lo, pt.hi)
		gs := io.view(1, g[pt.ti], pt.lo, pt.hi)[:len(ws)]
		ss := io.view(2, s[pt.ti], pt.lo, pt.hi)[:len(ws)]
		for i := range ws {
			d := gs[i]
			if wd32 != 0 {
				d += wd32 * ws[i]
			}
			si := ss[i] + d*d
			ss[i] = si
			ws[i] -= lr * (d / (float32(math.Sqrt(float64(si))) + eps32))
		}
		io.flush(w[pt.ti], pt.lo, pt.hi, ws)
		io.flush(s[pt.ti], pt.lo, pt.hi, ss)
	})
	return nil
}

// sumSquares returns each tensor's sum of squares (float64 per chunk, summed in chunk
// order, so the result does not depend on the worker count).
func sumSquares(l optList) []float64 {
	parts := optParts(l)
	part := make([]float64, len(parts))
	ParallelFor(int64(len(parts)), optChunk, func(lo, hi int64) {
		io := newChunkIO(1)
		for pi := lo; pi < hi; pi++ {
			pt := parts[pi]
			xs := io.view(0, l[pt.ti], pt.lo, pt.hi)
			var a0, a1, a2, a3 float64
			i := 0
			for ; i+4 <= len(xs); i += 4 {
				x0, x1, x2, x3 := float64(xs[i]), float64(xs[i+1]), float64(xs[i+2]), float64(xs[i+3])
				a0 += x0 * x0
				a1 += x1 * x1
				a2 += x2 * x2
				a3 += x3 * x3
			}
			for ; i < len(xs); i++ {
				a0 += float64(xs[i]) * float64(xs[i])
			}
			part[pi] = (a0 + a1) + (a2 + a3)
		}
	})
	out := make([]float64, len(l))
	for pi, pt := range parts {
		out[pt.ti] += part[pi]
	}
	return out
}

// storeScalar writes v into element 0 of a one-element float tensor.
func storeScalar(t Tensor, v float64) error {
	if t.Numel() != 1 {
		return fmt.Errorf("expected a one-element output, got %d elements", t.Numel())
	}
	switch t.DType {
	case Float32:
		*(*float32)(t.Ptr) = float32(v)
	case BFloat16:
		*(*uint16)(t.Ptr) = F32ToBF16(float32(v))
	case Float64:
		*(*float64)(t.Ptr) = v
	default:
		return fmt.Errorf("unsupported output dtype %v", t.DType)
	}
	return nil
}

// loadScalar reads element 0 of a one-element float tensor.
func loadScalar(t Tensor) (float64, error) {
	if t.Numel() != 1 {
		return 0, fmt.Errorf("expected a one-element tensor, got %d elements", t.Numel())
	}
	switch t.DType {
	case Float32:
		return float64(*(*float32)(t.Ptr)), nil
	case BFloat16:
		return float64(BF16ToF32(*(*uint16)(t.Ptr))), nil
	case Float64:
		return *(*float64)(t.Ptr), nil
	case Int32:
		return float64(*(*int32)(t.Ptr)), nil
	case Int64:
		return float64(*(*int64)(t.Ptr)), nil
	}
	return 0, fmt.Errorf("unsupported scalar dtype %v", t.DType)
}

// scaleInPlace multiplies every element of every tensor by s.
func scaleInPlace(l optList, s float32) {
	forChunks(l, 1, func(io *chunkIO, pt optPart) {
		xs := io.view(0, l[pt.ti], pt.lo, pt.hi)
		for i := range xs {
			xs[i] *= s
		}
		io.flush(l[pt.ti], pt.lo, pt.hi, xs)
	})
}

// LambNorm writes LAMB's gradient clip divisor into out (one element): the global L2 norm
// of gs over maxNorm when it exceeds maxNorm, else 1.
func LambNorm(out Tensor, gs []Tensor, maxNorm float64) error {
	if err := checkOptLists("optimizer_lamb_fused_norm", gs); err != nil {
		return err
	}
	total := 0.0
	for _, s := range sumSquares(gs) {
		total += s
	}
	norm, clip := math.Sqrt(total), 1.0
	if norm > maxNorm {
		clip = norm / maxNorm
	}
	return storeScalar(out, clip)
}

// ClipNorm is clip_grad_norm_ with norm type 2: it writes the total norm of gs into out
// and multiplies every gradient by min(maxNorm/(total+1e-6), 1) in place (always, as
// torch does, even when the factor is 1).
func ClipNorm(out, maxNormT Tensor, gs []Tensor) error {
	if err := checkOptLists("fused_clip_norm", gs); err != nil {
		return err
	}
	maxNorm, err := loadScalar(maxNormT)
	if err != nil {
		return fmt.Errorf("fused_clip_norm: max_norm: %v", err)
	}
	total := 0.0
	for _, s := range sumSquares(gs) {
		total += s
	}
	// torch computes the norm and the factor in the gradients' dtype.
	norm := float32(math.Sqrt(total))
	if out.DType == BFloat16 {
		norm = RoundBF16(norm)
	}
	coef := float32(maxNorm) / (norm + 1e-6)
	if out.DType == BFloat16 {
		coef = RoundBF16(coef)
	}
	coef = min(coef, 1)
	scaleInPlace(gs, coef)
	return storeScalar(out, float64(norm))
}

// Lars rewrites grads in place with the LARS trust ratio: for skip[i] != 0,
// trust = eeta*||w||/(||g|| + wd*||w|| + eps) (1 when either norm is 0) and
// g = (g + wd*w)*trust*lr; otherwise g = g*lr.
func Lars(lrT Tensor, w, g []Tensor, skip []int64, eeta, wd, eps float64) error {
	if err := checkOptLists("optimizer_lars", w, g); err != nil {
		return err
	}
	lr, err := loadScalar(lrT)
	if err != nil {
		return fmt.Errorf("optimizer_lars: lr: %v", err)
	}
	if len(skip) != len(w) {
		return fmt.Errorf("optimizer_lars: %d skip masks for %d tensors", len(skip), len(w))
	}
	wn, gn := sumSquares(w), sumSquares(g)
	scale := make([]float32, len(w))
	decay := make([]float32, len(w))
	for i := range w {
		scale[i] = float32(lr)
		if skip[i] != 0 {
			a, b := math.Sqrt(wn[i]), math.Sqrt(gn[i])
			trust := 1.0
			if a > 0 && b > 0 {
				trust = eeta * a / (b + wd*a + eps)
			}
			scale[i] = float32(trust * lr)
			decay[i] = float32(wd)
		}
	}
	forChunks(w, 2, func(io *chunkIO, pt optPart) {
		ws := io.view(0, w[pt.ti], pt.lo, pt.hi)
		gs := io.view(1, g[pt.ti], pt.lo, pt.hi)[:len(ws)]
		s, d := scale[pt.ti], decay[pt.ti]
		for i := range gs {
			gs[i] = (gs[i] + d*ws[i]) * s
		}
		io.flush(g[pt.ti], pt.lo, pt.hi, gs)
	})
	return nil
}

// ResourceApplyMomentum is TensorFlow's momentum update on already-scaled gradients d:
// buf = momentum*buf - d; w = w + buf.
func ResourceApplyMomentum(w, buf, d []Tensor, momentum float64) error {
	if err := checkOptLists("optimizer_resource_apply_momentum", w, buf, d); err != nil {
		return err
	}
	mom := float32(momentum)
	forChunks(w, 3, func(io *chunkIO, pt optPart) {
		ws := io.view(0, w[pt.ti], pt.lo, pt.hi)
		bs := io.view(1, buf[pt.ti], pt.lo, pt.hi)[:len(ws)]
		ds := io.view(2, d[pt.ti], pt.lo, pt.hi)[:len(ws)]
		for i := range ws {
			b := mom*bs[i] - ds[i]
			bs[i] = b
			ws[i] += b
		}
		io.flush(w[pt.ti], pt.lo, pt.hi, ws)
		io.flush(buf[pt.ti], pt.lo, pt.hi, bs)
	})
	return nil
}

// EMA updates ema = decay*ema + (1-decay)*model over every tensor pair.
func EMA(decayT Tensor, ema, model []Tensor) error {
	if err := checkOptLists("optimizer_ema", ema, model); err != nil {
		return err
	}
	decay, err := loadScalar(decayT)
	if err != nil {
		return fmt.Errorf("optimizer_ema: decay: %v", err)
	}
	d, c := float32(decay), float32(1-decay)
	forChunks(ema, 2, func(io *chunkIO, pt optPart) {
		es := io.view(0, ema[pt.ti], pt.lo, pt.hi)
		ms := io.view(1, model[pt.ti], pt.lo, pt.hi)[:len(es)]
		for i := range es {
			es[i] = d*es[i] + c*ms[i]
		}
		io.flush(ema[pt.ti], pt.lo, pt.hi, es)
	})
	return nil
}
