package kernels

import (
	"slices"
	"unsafe"
)

// masked_fill's select, out = mask ? value : self, as one pass over the bits: where's
// generic loop widens each operand to float32 and narrows the result again, which for a
// select only costs time. maskedFillFast serves Elementwise("where", [mask, scalar,
// self]) when it can keep the results where's: self in the output's dtype (its elements
// copied unchanged, as torch's CPU masked_fill copies them; the widening loop would
// quiet a NaN's payload), the value converted exactly as the generic loop converts it
// (to float32, then rounded to the output's dtype), and a layout with a contiguous
// inner block common to the output, self and the mask (the mask may broadcast along
// the outer dims, as the transformer's [T,T] causal mask does over batch and heads).

// maskedFillMinInner is the shortest contiguous inner block worth the fast loop.
const maskedFillMinInner = 16

func maskedFillFast(out Tensor, ins []Tensor, cdt DType) bool {
	if noMaskedFillFast || len(ins) != 3 {
		return false
	}
	mask, val, self := ins[0], ins[1], ins[2]
	es := int64(out.DType.Size())
	if mask.DType != Bool || self.DType != out.DType || (out.DType != Float32 && out.DType != BFloat16) ||
		(cdt != Float32 && cdt != out.DType) || !val.DType.IsFloat() || val.Ptr == nil {
		return false
	}
	nd := len(out.Sizes)
	for d := 0; d < nd; d++ {
		if val.Strides[d] != 0 && out.Sizes[d] > 1 {
			return false // not a scalar
		}
		if out.Sizes[d] == 0 {
			return true
		}
	}
	// the contiguous inner block: trailing dims where all three run densely in step
	inner, d := int64(1), nd-1
	for ; d >= 0; d-- {
		sz := out.Sizes[d]
		if sz == 1 {
			continue
		}
		if out.Strides[d] != inner || self.Strides[d] != inner || mask.Strides[d] != inner {
			break
		}
		inner *= sz
	}
	if inner < maskedFillMinInner {
		return false
	}
	outer := make([]int64, 0, d+1) // the remaining dims, with the three strides
	ost, sst, mst := make([]int64, 0, d+1), make([]int64, 0, d+1), make([]int64, 0, d+1)
	for k := 0; k <= d; k++ {
		if out.Sizes[k] == 1 {
			continue
		}
		if out.Strides[k] == 0 {
			return false
		}
		outer = append(outer, out.Sizes[k])
		ost, sst, mst = append(ost, out.Strides[k]), append(sst, self.Strides[k]), append(mst, mask.Strides[k])
	}
	// in place (self is the output) or apart; a partial overlap goes the generic way
	if out.Ptr != self.Ptr || !slices.Equal(out.Strides, self.Strides) {
		if overlaps(out, self) {
			return false
		}
	}
	if overlaps(out, mask) {
		return false
	}
	// the value as the generic loop makes it: float32, then the output's rounding
	v := scalarF32(val.DType, val.Ptr)
	var bits uint32
	if out.DType == BFloat16 {
		bits = uint32(F32ToBF16(v))
	} else {
		bits = *(*uint32)(unsafe.Pointer(&v))
	}
	nOuter := int64(1)
	for _, s := range outer {
		nOuter *= s
	}
	// parts: blocks of at most maskedFillChunk elements of one outer index
	chunks := (inner + maskedFillChunk - 1) / maskedFillChunk
	ParallelFor(nOuter*chunks, min(inner, maskedFillChunk), func(lo, hi int64) {
		for p := lo; p < hi; p++ {
			o, c := p/chunks, p%chunks
			var oo, so, mo int64
			for k := len(outer) - 1; k >= 0; k-- {
				i := o % outer[k]
				o /= outer[k]
				oo, so, mo = oo+i*ost[k], so+i*sst[k], mo+i*mst[k]
			}
			b := c * maskedFillChunk
			n := min(maskedFillChunk, inner-b)
			maskedFillRun(at(out.Ptr, (oo+b)*es), at(self.Ptr, (so+b)*es), at(mask.Ptr, mo+b), n, es, bits)
		}
	})
	return true
}

const maskedFillChunk = 16384

// maskedFillGo is the loop without C: o[i] = m[i] ? bits : s[i] for n elements of es bytes.
func maskedFillGo(o, s, m unsafe.Pointer, n, es int64, bits uint32) {
	mk := unsafe.Slice((*uint8)(m), n)
	if es == 2 {
		dst, src, v := unsafe.Slice((*uint16)(o), n), unsafe.Slice((*uint16)(s), n), uint16(bits)
		for i, c := range mk {
			if c != 0 {
				dst[i] = v
			} else {
				dst[i] = src[i]
			}
		}
		return
	}
	dst, src := unsafe.Slice((*uint32)(o), n), unsafe.Slice((*uint32)(s), n)
	for i, c := range mk {
		if c != 0 {
			dst[i] = bits
		} else {
			dst[i] = src[i]
		}
	}
}

// noMaskedFillFast sends every where to the generic loop (tests compare the two).
var noMaskedFillFast bool
