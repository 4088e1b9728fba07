package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Scaled dot-product attention in tiles (flash-attention style): the score matrix is never
// materialised; each worker holds one attBr x attBc tile of scores at a time and an online
// softmax (running row max and sum) rescales the output rows as key blocks stream by. The
// forward saves only the row logsumexp; the backward recomputes the probabilities from it.
// Layout [B, H, L|S, D]; grouped-query attention maps query head h to key/value head
// h / (Hq/Hkv). Arithmetic in float32 (bfloat16 operands are widened per tile; the results
// are rounded once), products on the GEMM micro-kernels.

const (
	attBr = 96 // query rows per tile (a multiple of the products' 12-row blocks)
	attBc = 96 // key columns per tile (a multiple of 12 and 32: keys are rows of dK and dV)
	// attBrFused is the query rows per block of the fused forward loop (a multiple of 12).
	attBrFused = 192
)

// AttnParams are an attention call's attributes.
type AttnParams struct {
	Scale    float64
	Causal   bool    // keep key j <= query i (top-left aligned, as torch)
	DropoutP float64 // probability of dropping a probability
	Drop     Stream  // the dropout mask's Philox stream (element index ((b*Hq+h)*L+i)*S+j)
	// Fast is the bridge's softmax_mode="fast": a reduced-precision softmax, emulated by
	// rounding the exponentials (the unnormalised probabilities) to bfloat16 before they
	// meet V in the forward and the gradients in the backward.
	Fast bool
}

type attShape struct {
	B, Hq, Hkv, L, S, D, Dv int64
}

func attCheck(q, k, v Tensor, mask *Tensor) (attShape, error) {
	var sh attShape
	for _, t := range []Tensor{q, k, v} {
		if t.Dim() != 4 {
			return sh, fmt.Errorf("attention: expected 4-D [B, H, S, D] operands")
		}
		if t.DType != Float32 && t.DType != BFloat16 {
			return sh, fmt.Errorf("attention: dtype %v; float32 and bfloat16 are supported", t.DType)
		}
	}
	sh = attShape{B: q.Sizes[0], Hq: q.Sizes[1], L: q.Sizes[2], D: q.Sizes[3], Hkv: k.Sizes[1], S: k.Sizes[2], Dv: v.Sizes[3]}
	if k.Sizes[0] != sh.B || v.Sizes[0] != sh.B || v.Sizes[1] != sh.Hkv || v.Sizes[2] != sh.S || k.Sizes[3] != sh.D {
		return sh, fmt.Errorf("attention: q %v, k %v and v %v do not match", q.Sizes, k.Sizes, v.Sizes)
	}
	if sh.Hkv == 0 || sh.Hq%sh.Hkv != 0 {
		return sh, fmt.Errorf("attention: %d query heads are not a multiple of %d key/value heads", sh.Hq, sh.Hkv)
	}
	if mask != nil {
		m := *mask
		if m.Dim() != 4 || m.Sizes[0] != sh.B || m.Sizes[1] != sh.Hq || m.Sizes[2] != sh.L || m.Sizes[3] != sh.S {
			return sh, fmt.Errorf("attention: mask %v is not [B, Hq, L, S] (expand it first)", m.Sizes)
		}
		if m.DType != Bool && m.DType != Float32 && m.DType != BFloat16 {
			return sh, fmt.Errorf("attention: mask dtype %v; bool, float32 and bfloat16 are supported", m.DType)
		}
	}
	return sh, nil
}

// attLoad widens rows [r0, r0+n) of head (b, h) of t ([B,H,R,C]) into dst (n x C, contiguous).
func attLoad(dst []float32, t Tensor, b, h, r0, n int64) {
	C := t.Sizes[3]
	es := int64(t.DType.Size())
	base := (b*t.Strides[0] + h*t.Strides[1]) * es
	for r := int64(0); r < n; r++ {
		p := at(t.Ptr, base+(r0+r)*t.Strides[2]*es)
		row := dst[r*C : (r+1)*C]
		loadRowF32(row, p, t.Strides[3]*es, t.DType)
	}
}

// attStore rounds rows of src (n x C) into rows [r0, r0+n) of head (b, h) of t.
func attStore(t Tensor, b, h, r0, n int64, src []float32) {
	C := t.Sizes[3]
	es := int64(t.DType.Size())
	base := (b*t.Strides[0] + h*t.Strides[1]) * es
	for r := int64(0); r < n; r++ {
		storeRowF32(at(t.Ptr, base+(r0+r)*t.Strides[2]*es), t.Strides[3]*es, t.DType, src[r*C:(r+1)*C])
	}
}

func f32p(s []float32) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }

var negInf = float32(math.Inf(-1))

// attBias applies the mask and the causal limit to a score tile s (rows x cols, query rows
// from i0, key columns from j0): masked-out scores become -inf, a float mask is added.
func attBias(s []float32, rows, cols, i0, j0 int64, b, h int64, mask *Tensor, causal bool) {
	if mask != nil {
		m := *mask
		es := int64(m.DType.Size())
		base := (b*m.Strides[0] + h*m.Strides[1]) * es
		sj := m.Strides[3] * es
		for r := int64(0); r < rows; r++ {
			p := at(m.Ptr, base+(i0+r)*m.Strides[2]*es+j0*sj)
			row := s[r*cols : (r+1)*cols]
			switch m.DType {
			case Bool:
				for j := range row {
					if *(*uint8)(unsafe.Add(p, int64(j)*sj)) == 0 {
						row[j] = negInf
					}
				}
			case Float32:
				for j := range row {
					row[j] += *(*float32)(unsafe.Add(p, int64(j)*sj))
				}
			case BFloat16:
				for j := range row {
					row[j] += BF16ToF32(*(*uint16)(unsafe.Add(p, int64(j)*sj)))
				}
			}
		}
	}
	if causal && j0+cols-1 > i0 {
		for r := int64(0); r < rows; r++ {
			first := i0 + r + 1 - j0 // first masked column of this row
			if first < 0 {
				first = 0
			}
			for j := first; j < cols; j++ {
				s[r*cols+j] = negInf
			}
		}
	}
}

// attDropScale multiplies the probabilities tile p by keep/(1-p) (0 for a dropped one).
func attDropScale(pt []float32, rows, cols, i0, j0, bh int64, sh attShape, prm AttnParams) {
	thr := uint32(math.Min(prm.DropoutP*4294967296.0, 4294967295.0))
	sc := float32(1 / (1 - prm.DropoutP))
	for r := int64(0); r < rows; r++ {
		idx0 := (bh*sh.L+i0+r)*sh.S + j0
		var w [4]uint32
		blk := int64(-1)
		row := pt[r*cols : (r+1)*cols]
		for j := range row {
			idx := idx0 + int64(j)
			if idx>>2 != blk {
				blk = idx >> 2
				w = prm.Drop.Block(uint64(blk))
			}
			if w[idx&3] < thr {
				row[j] = 0
			} else {
				row[j] *= sc
			}
		}
	}
}

// kvBlocks is the number of key blocks query rows [i0, i0+rows) may see.
func kvBlocks(sh attShape, i0, rows int64, causal bool) int64 {
	S := sh.S
	if causal {
		S = min(S, i0+rows)
	}
	return (S + attBc - 1) / attBc
}

// attRows is rows [r0, r0+n) of head (b, h) of t as float32 rows with a leading
// dimension: the tensor's own memory when it is float32 with unit column stride (no copy),
// else widened into buf.
func attRows(t Tensor, b, h, r0, n int64, buf []float32) (unsafe.Pointer, int64) {
	if attInPlace(t) {
		return at(t.Ptr, (b*t.Strides[0]+h*t.Strides[1]+r0*t.Strides[2])*4), t.Strides[2]
	}
	attLoad(buf, t, b, h, r0, n)
	return f32p(buf), t.Sizes[3]
}

// attFuseOff turns the fused C block loops off (tests compare them with the Go loops).
var attFuseOff bool

// attInPlace: attRows reads t's rows in place (float32, unit column stride).
func attInPlace(t Tensor) bool { return t.DType == Float32 && t.Strides[3] == 1 }

// attPackT writes head (b, h) of t ([B,H,S,C]) transposed, key block by key block: block
// kb of dst is C x attBc, element (c, jj) = t[j0+jj][c], zero past S. These are the B
// operands of Q K^T and dO V^T; each is packed once per head, not once per query block.
func attPackT(dst []float32, t Tensor, b, h int64, tmp []float32) {
	S, C := t.Sizes[2], t.Sizes[3]
	for kb := int64(0); kb*attBc < S; kb++ {
		blk := dst[kb*C*attBc : (kb+1)*C*attBc]
		j0 := kb * attBc
		cols := min(attBc, S-j0)
		if cols < attBc {
			clear(blk)
		}
		for jj := int64(0); jj < cols; jj++ {
			attLoad(tmp[:C], t, b, h, j0+jj, 1)
			for c, x := range tmp[:C] {
				blk[int64(c)*attBc+jj] = x
			}
		}
	}
}

// attPackHeads packs K^T (and, when vt is not nil, V^T) blocks of every key/value head.
func attPackHeads(kt, vt []float32, k, v Tensor, sh attShape) {
	kBlocks := (sh.S + attBc - 1) / attBc
	D, Dv := sh.D, sh.Dv
	ParallelFor(sh.B*sh.Hkv, sh.S*(D+Dv), func(lo, hi int64) {
		tmp := make([]float32, max(D, Dv))
		for u := lo; u < hi; u++ {
			b, hk := u/sh.Hkv, u%sh.Hkv
			attPackT(kt[u*kBlocks*D*attBc:(u+1)*kBlocks*D*attBc], k, b, hk, tmp)
			if vt != nil {
				attPackT(vt[u*kBlocks*Dv*attBc:(u+1)*kBlocks*Dv*attBc], v, b, hk, tmp)
			}
		}
	})
}

// attKinds are the causal kinds of the products (attNoCausal without the causal limit).
func attKinds(causal bool) (qk, qByK, kByQ attCausalKind) {
	if causal {
		return attQueryKey, attQueryByKey, attKeyByQuery
	}
	return attNoCausal, attNoCausal, attNoCausal
}

// AttentionForward writes out [B,Hq,L,Dv] and, per query row (float32 [B,Hq,L]), the
// scores' max mx and the inverse of the softmax sum linv (the bridge's m and linv); a row
// with every key masked gets mx = -inf, linv = 0 and an output of 0.
func AttentionForward(out, mxT, linvT, q, k, v Tensor, mask *Tensor, prm AttnParams) error {
	sh, err := attCheck(q, k, v, mask)
	if err != nil {
		return err
	}
	if out.Dim() != 4 || out.Sizes[0] != sh.B || out.Sizes[1] != sh.Hq || out.Sizes[2] != sh.L || out.Sizes[3] != sh.Dv {
		return fmt.Errorf("attention: output shapes do not match")
	}
	for _, t := range []Tensor{mxT, linvT} {
		if t.DType != Float32 || t.Numel() != sh.B*sh.Hq*sh.L || !t.IsContiguous() {
			return fmt.Errorf("attention: row statistics must be contiguous float32 [B, Hq, L]")
		}
	}
	mxS, linvS := f32Of(mxT), f32Of(linvT)
	kBlocks := (sh.S + attBc - 1) / attBc
	// Without a mask, dropout or the fast softmax a query block's key loop runs in one C
	// call (the same operations as the loop below), on blocks of attBrFused rows: K and V
	// stream through the cache once per query block, so taller blocks halve that traffic
	// (a row's arithmetic does not depend on the block height: its products run in 12-row
	// panels either way).
	fused := attFused() && !attFuseOff && mask == nil && prm.DropoutP == 0 && !prm.Fast && kBlocks > 0
	br := int64(attBr)
	if fused {
		br = attBrFused
	}
	qBlocks := (sh.L + br - 1) / br
	group := sh.Hq / sh.Hkv
	D, Dv := sh.D, sh.Dv
	heads := sh.B * sh.Hkv
	ktBuf := getF32(int(heads * kBlocks * D * attBc))
	defer putF32(ktBuf)
	kt := *ktBuf
	attPackHeads(kt, nil, k, v, sh)
	// V is read as it lies when it is float32 rows, else widened once per head.
	vDirect := attInPlace(v)
	var vw []float32
	if !vDirect {
		vwBuf := getF32(int(heads * sh.S * Dv))
		defer putF32(vwBuf)
		vw = *vwBuf
		ParallelFor(heads, sh.S*Dv, func(lo, hi int64) {
			for u := lo; u < hi; u++ {
				attLoad(vw[u*sh.S*Dv:(u+1)*sh.S*Dv], v, u/sh.Hkv, u%sh.Hkv, 0, sh.S)
			}
		})
	}
	kindQK, kindQByK, _ := attKinds(prm.Causal)
	nbh := sh.B * sh.Hq
	RunParts(int(nbh*qBlocks), func(pi int) {
		// Parts claimed in order: under the causal limit the query blocks that see the
		// most keys come first, so the last parts the workers pick up are the short ones.
		qb := qBlocks - 1 - int64(pi)/nbh
		bh := int64(pi) % nbh
		b, h := bh/sh.Hq, bh%sh.Hq
		hk := h / group
		u := b*sh.Hkv + hk
		sp := getF32(int(br*D + br*attBc + attSlack + br*Dv + 3*br))
		defer putF32(sp)
		buf := *sp
		qt, buf := buf[:br*D], buf[br*D:]
		st, buf := buf[:br*attBc+attSlack], buf[br*attBc+attSlack:]
		ot, buf := buf[:br*Dv], buf[br*Dv:]
		m, l, alpha := buf[:br], buf[br:2*br], buf[2*br:3*br]
		i0 := qb * br
		rows := min(br, sh.L-i0)
		qp, ldq := attRows(q, b, h, i0, rows, qt)
		clear(ot[:rows*Dv])
		for r := range m[:rows] {
			m[r], l[r] = negInf, 0
		}
		if fused {
			var vb unsafe.Pointer
			ldv := Dv
			if vDirect {
				vb, ldv = at(v.Ptr, (b*v.Strides[0]+hk*v.Strides[1])*4), v.Strides[2]
			} else {
				vb = f32p(vw[u*sh.S*Dv:])
			}
			attFwdQBlock(rows, i0, sh.S, D, Dv, qp, ldq, kt[u*kBlocks*D*attBc:], vb, ldv, float32(prm.Scale), prm.Causal,
				st, ot, m, l, alpha)
		}
		nkb := kvBlocks(sh, i0, rows, prm.Causal)
		if fused {
			nkb = 0
		}
		for kb := int64(0); kb < nkb; kb++ {
			j0 := kb * attBc
			cols := min(attBc, sh.S-j0)
			s := st[:rows*cols]
			attGemm(rows, cols, D, qp, ldq, 1, f32p(kt[(u*kBlocks+kb)*D*attBc:]), attBc, f32p(s), cols,
				float32(prm.Scale), false, nil, kindQK, i0-j0)
			attBias(s, rows, cols, i0, j0, b, h, mask, prm.Causal)
			attOnlineSoftmax(s, rows, cols, m, l, alpha)
			if prm.Fast {
				roundBF16InPlace(s)
			}
			if prm.DropoutP > 0 {
				attDropScale(s, rows, cols, i0, j0, bh, sh, prm)
			}
			var vp unsafe.Pointer
			ldv := Dv
			if vDirect {
				vp, ldv = at(v.Ptr, (b*v.Strides[0]+hk*v.Strides[1]+j0*v.Strides[2])*4), v.Strides[2]
			} else {
				vp = f32p(vw[(u*sh.S+j0)*Dv:])
			}
			// O = alpha O + P V: the running output rescaled to the new row max in the
			// product's epilogue.
			attGemm(rows, Dv, cols, f32p(s), cols, 1, vp, ldv, f32p(ot), Dv, 1, true, alpha[:rows], kindQByK, i0-j0)
		}
		for r := int64(0); r < rows; r++ {
			o := ot[r*Dv : (r+1)*Dv]
			if l[r] == 0 || m[r] == negInf {
				clear(o)
				mxS[bh*sh.L+i0+r], linvS[bh*sh.L+i0+r] = negInf, 0
				continue
			}
			inv := 1 / l[r]
			for j := range o {
				o[j] *= inv
			}
			mxS[bh*sh.L+i0+r], linvS[bh*sh.L+i0+r] = m[r], inv
		}
		attStore(out, b, h, i0, rows, ot[:rows*Dv])
	})
	return nil
}

// AttentionBackward writes dq, dk, dv from the output gradient dout, the forward's
// operands, its output out and its row statistics mx and linv; the probabilities are
// recomputed as exp(s - lse) with lse = mx - log(linv), dropout regenerated from the same
// stream. Work is split over (batch, key/value head, key blocks): each part owns its dk
// and dv rows and sums its own dq, the parts' dq added in a fixed order at the end.
func AttentionBackward(dq, dk, dv, dout, q, k, v, out, mxT, linvT Tensor, mask *Tensor, prm AttnParams) error {
	sh, err := attCheck(q, k, v, mask)
	if err != nil {
		return err
	}
	for _, t := range []Tensor{dq, dk, dv, dout, out} {
		if t.Dim() != 4 {
			return fmt.Errorf("attention backward: expected 4-D gradients")
		}
	}
	for _, t := range []Tensor{mxT, linvT} {
		if t.DType != Float32 || t.Numel() != sh.B*sh.Hq*sh.L || !t.IsContiguous() {
			return fmt.Errorf("attention backward: row statistics must be contiguous float32 [B, Hq, L]")
		}
	}
	mxS, linvS := f32Of(mxT), f32Of(linvT)
	lseS := make([]float32, len(mxS))
	// A row whose scores carry a huge additive mask (transformers' finfo.min on a padding
	// query row) has |m| so large that m + log(l) rounds to m: its probabilities would come
	// out 1 instead of 1/l. Such rows take exp(s - m) * linv, as the forward did (rowScale
	// holds their linv); the rest keep exp(s - lse).
	var rowScale []float32
	for i, m := range mxS {
		lseS[i] = negInf
		if m == negInf || linvS[i] <= 0 {
			continue
		}
		lseS[i] = m - float32(math.Log(float64(linvS[i])))
		if linvS[i] != 1 && lseS[i] == m {
			if rowScale == nil {
				rowScale = make([]float32, len(mxS))
				for j := range rowScale {
					rowScale[j] = 1
				}
			}
			lseS[i], rowScale[i] = m, linvS[i]
		}
	}
	scaled := rowScale != nil
	D, Dv := sh.D, sh.Dv
	group := sh.Hq / sh.Hkv
	// delta = rowsum(dout * out), per query row.
	delta := make([]float32, sh.B*sh.Hq*sh.L)
	ParallelFor(sh.B*sh.Hq, sh.L*Dv, func(lo, hi int64) {
		a := make([]float32, Dv)
		c := make([]float32, Dv)
		for bh := lo; bh < hi; bh++ {
			b, h := bh/sh.Hq, bh%sh.Hq
			for i := int64(0); i < sh.L; i++ {
				attLoad(a, dout, b, h, i, 1)
				attLoad(c, out, b, h, i, 1)
				var s float64
				for j := range a {
					s += float64(a[j]) * float64(c[j])
				}
				delta[bh*sh.L+i] = float32(s)
			}
		}
	})
	units := sh.B * sh.Hkv
	kBlocks := (sh.S + attBc - 1) / attBc
	if kBlocks == 0 || units == 0 {
		return nil // no keys: the Python side zero-fills the gradients
	}
	ktBuf, vtBuf := getF32(int(units*kBlocks*D*attBc)), getF32(int(units*kBlocks*Dv*attBc))
	defer putF32(ktBuf)
	defer putF32(vtBuf)
	ktAll, vtAll := *ktBuf, *vtBuf
	attPackHeads(ktAll, vtAll, k, v, sh)
	// Each (batch, key/value head) is cut into nch parts of interleaved key blocks when
	// there are too few heads to keep the workers busy (interleaved, so that under the
	// causal limit every part gets early and late keys alike).
	w := int64(Workers())
	nch := int64(1)
	if units < 2*w {
		nch = min(kBlocks, (2*w+units-1)/units)
	}
	parts := units * nch
	qBlocks := (sh.L + attBr - 1) / attBr
	kindQK, kindQByK, kindKByQ := attKinds(prm.Causal)
	// Without a mask, dropout or the fast softmax, and with q and dout float32 rows read in
	// place, a key block's pass over a head's query blocks runs in one C call (the same
	// operations as the loop below).
	fused := attFused() && !attFuseOff && mask == nil && prm.DropoutP == 0 && !prm.Fast && attInPlace(q) && attInPlace(dout) &&
		!scaled
	dqAcc := make([][]float32, parts)
	RunParts(int(parts), func(pi int) {
		unit, ch := int64(pi)/nch, int64(pi)%nch
		b, hk := unit/sh.Hkv, unit%sh.Hkv
		acc := make([]float32, group*sh.L*D)
		dqAcc[pi] = acc
		kt := make([]float32, attBc*D)
		dkt, dvt := make([]float32, attBc*D), make([]float32, attBc*Dv)
		qt, dot := make([]float32, attBr*D), make([]float32, attBr*Dv)
		pt, dpt := make([]float32, attBr*attBc+attSlack), make([]float32, attBr*attBc+attSlack)
		var pdt []float32
		if prm.DropoutP > 0 {
			pdt = make([]float32, attBr*attBc+attSlack)
		}
		for kb := ch; kb < kBlocks; kb += nch {
			j0 := kb * attBc
			cols := min(attBc, sh.S-j0)
			kp, ldk := attRows(k, b, hk, j0, cols, kt)
			ktb, vtb := f32p(ktAll[(unit*kBlocks+kb)*D*attBc:]), f32p(vtAll[(unit*kBlocks+kb)*Dv*attBc:])
			clear(dkt[:cols*D])
			clear(dvt[:cols*Dv])
			for g := int64(0); g < group; g++ {
				h := hk*group + g
				bh := b*sh.Hq + h
				if fused {
					qp, ldq := attRows(q, b, h, 0, sh.L, nil)
					dop, lddo := attRows(dout, b, h, 0, sh.L, nil)
					attBwdKBlock(sh.L, j0, cols, D, Dv, qp, ldq, dop, lddo, ktb, vtb, kp, ldk, lseS[bh*sh.L:(bh+1)*sh.L],
						delta[bh*sh.L:(bh+1)*sh.L], float32(prm.Scale), prm.Causal, acc[g*sh.L*D:], dkt, dvt, pt, dpt)
					continue
				}
				for qb := int64(0); qb < qBlocks; qb++ {
					i0 := qb * attBr
					rows := min(attBr, sh.L-i0)
					if prm.Causal && j0 > i0+rows-1 {
						continue // every score of the tile is masked
					}
					off := i0 - j0
					qp, ldq := attRows(q, b, h, i0, rows, qt)
					dop, lddo := attRows(dout, b, h, i0, rows, dot)
					p := pt[:rows*cols]
					attGemm(rows, cols, D, qp, ldq, 1, ktb, attBc, f32p(p), cols, float32(prm.Scale), false, nil, kindQK, off)
					attBias(p, rows, cols, i0, j0, b, h, mask, prm.Causal)
					attProbs(p, rows, cols, lseS[bh*sh.L+i0:bh*sh.L+i0+rows])
					if scaled {
						for r, f := range rowScale[bh*sh.L+i0 : bh*sh.L+i0+rows] {
							if f != 1 {
								for j := range p[int64(r)*cols : int64(r+1)*cols] {
									p[int64(r)*cols+int64(j)] *= f
								}
							}
						}
					}
					if prm.Fast {
						roundBF16InPlace(p)
					}
					dp := dpt[:rows*cols]
					attGemm(rows, cols, Dv, dop, lddo, 1, vtb, attBc, f32p(dp), cols, 1, false, nil, kindQK, off)
					pv := p
					if prm.DropoutP > 0 {
						// dV takes the dropped, rescaled probabilities; dP flows back through
						// the same mask and scale.
						pv = pdt[:rows*cols]
						copy(pv, p)
						attDropScale(pv, rows, cols, i0, j0, bh, sh, prm)
						attDropScale(dp, rows, cols, i0, j0, bh, sh, prm)
					}
					// dV += P^T dO, dQ += scale dS K, dK += scale dS^T Q (dS = P (dP - delta)).
					attGemm(cols, Dv, rows, f32p(pv), 1, cols, dop, lddo, f32p(dvt), Dv, 1, true, nil, kindKByQ, off)
					attDS(p, dp, rows, cols, delta[bh*sh.L+i0:bh*sh.L+i0+rows])
					attGemm(rows, D, cols, f32p(p), cols, 1, kp, ldk, f32p(acc[(g*sh.L+i0)*D:]), D, float32(prm.Scale),
						true, nil, kindQByK, off)
					attGemm(cols, D, rows, f32p(p), 1, cols, qp, ldq, f32p(dkt), D, float32(prm.Scale), true, nil, kindKByQ, off)
				}
			}
			attStore(dk, b, hk, j0, cols, dkt[:cols*D])
			attStore(dv, b, hk, j0, cols, dvt[:cols*Dv])
		}
	})
	// dq: the key chunks' partial sums, added in chunk order.
	ParallelFor(units, int64(group)*sh.L*D*nch, func(lo, hi int64) {
		for unit := lo; unit < hi; unit++ {
			b, hk := unit/sh.Hkv, unit%sh.Hkv
			sum := dqAcc[unit*nch]
			for ch := int64(1); ch < nch; ch++ {
				o := dqAcc[unit*nch+ch]
				for i := range sum {
					sum[i] += o[i]
				}
			}
			for g := int64(0); g < group; g++ {
				attStore(dq, b, hk*group+g, 0, sh.L, sum[g*sh.L*D:(g+1)*sh.L*D])
			}
		}
	})
	return nil
}

// AttentionDropoutMask writes the keep mask (bool [B,Hq,L,S], true = kept) that an attention
// call with this stream and probability applies.
func AttentionDropoutMask(dm Tensor, prm AttnParams) error {
	if dm.Dim() != 4 || dm.DType != Bool || !dm.IsContiguous() {
		return fmt.Errorf("attention dropout mask: expected a contiguous bool [B, Hq, L, S] tensor")
	}
	sh := attShape{B: dm.Sizes[0], Hq: dm.Sizes[1], L: dm.Sizes[2], S: dm.Sizes[3]}
	rows := sh.B * sh.Hq * sh.L
	ParallelFor(rows, sh.S*4, func(lo, hi int64) {
		buf := make([]float32, sh.S)
		for r := lo; r < hi; r++ {
			for j := range buf {
				buf[j] = 1
			}
			attDropScale(buf, 1, sh.S, r%sh.L, 0, r/sh.L, sh, prm)
			out := unsafe.Slice((*uint8)(at(dm.Ptr, r*sh.S)), sh.S)
			for j, x := range buf {
				out[j] = 0
				if x != 0 {
					out[j] = 1
				}
			}
		}
	})
	return nil
}

// roundBF16InPlace rounds each value to the nearest bfloat16 (ties to even).
func roundBF16InPlace(x []float32) {
	for i, v := range x {
		x[i] = BF16ToF32(F32ToBF16(v))
	}
}
