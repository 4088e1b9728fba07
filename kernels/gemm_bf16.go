package kernels

import "unsafe"

// Half-precision (bfloat16, float16) GEMM and the conversion primitives it shares with
// the conv, copy and elementwise kernels. Operands are widened to float32 once per call
// into pooled scratch buffers (in parallel, streaming through memory in the operand's own
// layout, so a transposed view converts as fast as a contiguous one and is handed to
// sgemm as transposed), sgemm accumulates in float32, and the epilogue rounds each
// result once to nearest-even on store, exactly as the generic path did.

// bf16ToF32s widens len(dst) contiguous bfloat16 values.
func bf16ToF32s(dst []float32, src []uint16) {
	src = src[:len(dst)]
	if len(dst) >= cgoConvMin {
		bf16ToF32Bulk(dst, src)
		return
	}
	bf16ToF32Go(dst, src)
}

func bf16ToF32Go(dst []float32, src []uint16) {
	src = src[:len(dst)]
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		s := src[i : i+4 : i+4]
		d := dst[i : i+4 : i+4]
		d0 := uint32(s[0]) << 16
		d1 := uint32(s[1]) << 16
		d2 := uint32(s[2]) << 16
		d3 := uint32(s[3]) << 16
		d[0] = *(*float32)(unsafe.Pointer(&d0))
		d[1] = *(*float32)(unsafe.Pointer(&d1))
		d[2] = *(*float32)(unsafe.Pointer(&d2))
		d[3] = *(*float32)(unsafe.Pointer(&d3))
	}
	for ; i < len(dst); i++ {
		dst[i] = BF16ToF32(src[i])
	}
}

// f32ToBF16s rounds len(dst) float32 values to bfloat16 (nearest-even, NaN quieted to
// 0x7fc0), bit-exact with F32ToBF16.
func f32ToBF16s(dst []uint16, src []float32) {
	src = src[:len(dst)]
	if len(dst) >= cgoConvMin {
		f32ToBF16Bulk(dst, src)
		return
	}
	f32ToBF16Go(dst, src)
}

func f32ToBF16Go(dst []uint16, src []float32) {
	src = src[:len(dst)]
	u := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(src))), len(src))
	dst = dst[:len(u)]
	for i, x := range u {
		r := uint16((x + 0x7fff + ((x >> 16) & 1)) >> 16)
		if x&0x7fffffff > 0x7f800000 {
			r = 0x7fc0
		}
		dst[i] = r
	}
}

// loadRowF32 converts n = len(dst) elements of dtype dt at byte stride s into dst, with
// tight loops for the bfloat16/float32 layouts the models use.
func loadRowF32(dst []float32, p unsafe.Pointer, s int64, dt DType) {
	if len(dst) == 0 {
		return
	}
	switch {
	case dt == BFloat16 && s == 2:
		bf16ToF32s(dst, unsafe.Slice((*uint16)(p), len(dst)))
	case dt == Float32 && s == 4:
		copy(dst, unsafe.Slice((*float32)(p), len(dst)))
	case dt == BFloat16:
		for i := range dst {
			dst[i] = BF16ToF32(*(*uint16)(unsafe.Add(p, int64(i)*s)))
		}
	default:
		loadRowT(dst, p, s, dt)
	}
}

// storeRowF32 rounds src into len(src) elements of dtype dt at byte stride s.
func storeRowF32(p unsafe.Pointer, s int64, dt DType, src []float32) {
	if len(src) == 0 {
		return
	}
	switch {
	case dt == BFloat16 && s == 2:
		f32ToBF16s(unsafe.Slice((*uint16)(p), len(src)), src)
	case dt == Float32 && s == 4:
		copy(unsafe.Slice((*float32)(p), len(src)), src)
	case dt == BFloat16:
		for i, v := range src {
			*(*uint16)(unsafe.Add(p, int64(i)*s)) = F32ToBF16(v)
		}
	default:
		storeRowT(p, s, dt, src)
	}
}

// getF32 returns a float32 scratch buffer of length n (operand panels, GEMM results;
// contents undefined); return it with putF32. The buffers come from convolution's free
// list: a sync.Pool is emptied by every garbage collection, and then the next bf16 GEMM
// paid for a fresh zeroed panel (4 MB for a 1024x1024 weight, ~0.2 ms a call).
func getF32(n int) *[]float32 { return convScratch32.get(n) }

func putF32(b *[]float32) { convScratch32.put(b) }

// halfPanel is one batch of an operand widened to float32: a dense buffer plus the
// transposition flag and leading dimension sgemm needs.
type halfPanel struct {
	off   int // offset of batch 0's panel in the buffer; batch stride per = r*c, or 0
	per   int
	ld    int
	trans bool
}

// packHalf widens every batch of the 3-D operand t (B×r×c) into buf, keeping the
// operand's own memory order when one of its matrix dims is contiguous.
func packHalf(t Tensor, buf []float32) halfPanel {
	B, r, c := int(t.Sizes[0]), int(t.Sizes[1]), int(t.Sizes[2])
	sb, sr, sc := t.Strides[0], t.Strides[1], t.Strides[2]
	if c == 1 {
		sc = 1
	}
	if r == 1 {
		sr = int64(max(c, 1))
	}
	hp := halfPanel{per: r * c, ld: max(c, 1)}
	nb := B
	if sb == 0 || B == 1 {
		nb, hp.per = 1, 0 // broadcast batch: convert once
	}
	// Lines: contiguous runs of length ln, nl per batch, line stride ls, element stride es.
	ln, nl, ls, es := c, r, sr, sc
	if sc != 1 && sr == 1 {
		ln, nl, ls, es = r, c, sc, sr
		hp.trans, hp.ld = true, max(r, 1)
	}
	esz := int64(t.DType.Size())
	if t.DType == BFloat16 && es == 1 && (ls == int64(ln) || nl == 1) && (nb == 1 || sb == int64(nl*ln)) {
		n := nb * nl * ln
		widenFlat(buf[:n], unsafe.Slice((*uint16)(t.Ptr), n))
		return hp
	}
	total := int64(nb * nl)
	ParallelFor(total, int64(ln), func(lo, hi int64) {
		for li := lo; li < hi; li++ {
			bi, l := li/int64(nl), li%int64(nl)
			dst := buf[(bi*int64(nl)+l)*int64(ln) : (bi*int64(nl)+l+1)*int64(ln)]
			loadRowF32(dst, at(t.Ptr, (bi*sb+l*ls)*esz), es*esz, t.DType)
		}
	})
	return hp
}

// bgemmHalf is BatchedGemm for bfloat16/float16 operands (same contract).
func bgemmHalf(out, a, b Tensor, self *Tensor, alpha, beta float64) {
	B, M, K, N := int(a.Sizes[0]), int(a.Sizes[1]), int(a.Sizes[2]), int(b.Sizes[2])
	if B == 0 || M == 0 || N == 0 {
		return
	}
	if K > 0 && useBF16Dot(a, b) && gbDirect(out, a, b, self, K) {
		bgemmBF16Blocked(out, a, b, self, alpha, beta, true, nil) // gemm_bf16_blocked.go
		return
	}
	cb := getF32(B * M * N)
	defer putF32(cb)
	cbuf := *cb
	if K == 0 {
		clear(cbuf)
	} else if useBF16Dot(a, b) {
		bgemmBF16Blocked(out, a, b, self, alpha, beta, false, cbuf)
	} else if useB2(a, b) {
		bgemmB2(a, b, cbuf) // gemm_bf16_avx2.go
	} else {
		ab := getF32(B * M * K)
		defer putF32(ab)
		bb := getF32(B * K * N)
		defer putF32(bb)
		pa := packHalf(a, *ab)
		pb := packHalf(b, *bb)
		for bi := 0; bi < B; bi++ {
			blasGemm(pa.trans, pb.trans, M, N, K, float32(1), unsafe.Pointer(&(*ab)[bi*pa.per]), pa.ld,
				unsafe.Pointer(&(*bb)[bi*pb.per]), pb.ld, 0, unsafe.Pointer(&cbuf[bi*M*N]), N)
		}
	}
	// Epilogue: out = alpha*C + beta*self, rounded once into out's dtype.
	oes := int64(out.DType.Size())
	if self != nil || alpha != 1 {
		var ses int64
		if self != nil {
			ses = int64(self.DType.Size())
		}
		al, be := float32(alpha), float32(beta)
		ParallelFor(int64(B*M), int64(N), func(lo, hi int64) {
			tp := getF32(N)
			defer putF32(tp)
			tmp := *tp
			for ri := lo; ri < hi; ri++ {
				bi, i := ri/int64(M), ri%int64(M)
				crow := cbuf[ri*int64(N) : (ri+1)*int64(N)]
				if self == nil {
					for j := range crow {
						crow[j] = al * crow[j]
					}
					continue
				}
				loadRowF32(tmp, at(self.Ptr, (bi*self.Strides[0]+i*self.Strides[1])*ses), self.Strides[2]*ses, self.DType)
				for j := range tmp {
					tmp[j] = al*crow[j] + be*tmp[j]
				}
				copy(crow, tmp)
			}
		})
	}
	if out.DType == BFloat16 && denseBMN(out) {
		convertFlat(unsafe.Slice((*uint16)(out.Ptr), B*M*N), cbuf)
		return
	}
	ParallelFor(int64(B*M), int64(N), func(lo, hi int64) {
		for ri := lo; ri < hi; ri++ {
			bi, i := ri/int64(M), ri%int64(M)
			storeRowF32(at(out.Ptr, (bi*out.Strides[0]+i*out.Strides[1])*oes), out.Strides[2]*oes, out.DType,
				cbuf[ri*int64(N):(ri+1)*int64(N)])
		}
	})
}

// denseBMN reports whether the 3-D t is laid out exactly as a contiguous B×M×N array.
func denseBMN(t Tensor) bool {
	want := int64(1)
	for d := 2; d >= 0; d-- {
		if t.Sizes[d] != 1 && t.Strides[d] != want {
			return false
		}
		want *= t.Sizes[d]
	}
	return true
}

// convertFlat rounds src into dst (same length), split across the workers.
func convertFlat(dst []uint16, src []float32) {
	if len(dst) <= 1<<17 {
		f32ToBF16s(dst, src)
		return
	}
	ParallelFor(int64(len(dst)), 1, func(lo, hi int64) {
		f32ToBF16s(dst[lo:hi], src[lo:hi])
	})
}

// widenFlat widens src into dst (same length), split across the workers.
func widenFlat(dst []float32, src []uint16) {
	if len(dst) <= 1<<17 {
		bf16ToF32s(dst, src)
		return
	}
	ParallelFor(int64(len(dst)), 1, func(lo, hi int64) {
		bf16ToF32s(dst[lo:hi], src[lo:hi])
	})
}
