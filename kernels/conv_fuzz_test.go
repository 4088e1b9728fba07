package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// layout4 is a dense 4-D tensor over p with its dims stored in the order perm (outermost
// first): perm {0,1,2,3} is contiguous NCHW, {0,2,3,1} channels-last.
func layout4(p []float32, s [4]int, perm [4]int) Tensor {
	var st [4]int64
	acc := int64(1)
	for i := 3; i >= 0; i-- {
		st[perm[i]] = acc
		acc *= int64(s[perm[i]])
	}
	ptr := unsafe.Pointer(nil)
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	return Tensor{Ptr: ptr, DType: Float32, Sizes: []int64{int64(s[0]), int64(s[1]), int64(s[2]), int64(s[3])},
		Strides: st[:]}
}

// fromLayout reads the NCHW-ordered values of a layout4 buffer.
func fromLayout(p []float32, s [4]int, perm [4]int) []float32 {
	t := layout4(p, s, perm)
	out := make([]float32, len(p))
	i := 0
	for a := 0; a < s[0]; a++ {
		for b := 0; b < s[1]; b++ {
			for c := 0; c < s[2]; c++ {
				for d := 0; d < s[3]; d++ {
					off := int64(a)*t.Strides[0] + int64(b)*t.Strides[1] + int64(c)*t.Strides[2] + int64(d)*t.Strides[3]
					out[i] = p[off]
					i++
				}
			}
		}
	}
	return out
}

// toLayout stores NCHW-ordered values v into a layout4 buffer.
func toLayout(v []float32, s [4]int, perm [4]int) []float32 {
	p := make([]float32, len(v))
	t := layout4(p, s, perm)
	i := 0
	for a := 0; a < s[0]; a++ {
		for b := 0; b < s[1]; b++ {
			for c := 0; c < s[2]; c++ {
				for d := 0; d < s[3]; d++ {
					off := int64(a)*t.Strides[0] + int64(b)*t.Strides[1] + int64(c)*t.Strides[2] + int64(d)*t.Strides[3]
					p[off] = v[i]
					i++
				}
			}
		}
	}
	return p
}

var fuzzPerms = [...][4]int{{0, 1, 2, 3}, {0, 2, 3, 1}, {1, 0, 2, 3}, {3, 2, 1, 0}}

// checkConvGeometry runs one convolution (forward and all gradients) at the geometry the
// fuzzer picked, with input and output in the picked layouts, against the naive loop; the
// gradients are checked by the adjoint identities <gy, conv(x, w)> = <gx, x> = <gw, w>.
// Any geometry must either be rejected with an error or computed right: never a panic.
func checkConvGeometry(t *testing.T, n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, lay uint8) {
	N, C, H, W := int(n%3), int(c%6)+1, int(h%10), int(w%10)
	KH, KW := int(kh%8)+1, int(kw%8)+1
	G := int(groups%3) + 1
	C *= G
	O := (int(o%3) + 1) * G
	p := ConvParams{StrideH: int(sh%3) + 1, StrideW: int(sw%3) + 1, PadH: int(ph % 4), PadW: int(pw % 4),
		DilH: int(dh%2) + 1, DilW: int(dw%2) + 1, Groups: G}
	OH := (H+2*p.PadH-p.DilH*(KH-1)-1)/p.StrideH + 1
	OW := (W+2*p.PadW-p.DilW*(KW-1)-1)/p.StrideW + 1
	if OH <= 0 || OW <= 0 {
		return // torch rejects these before any kernel runs
	}
	perm := fuzzPerms[int(lay)%len(fuzzPerms)]
	operm := fuzzPerms[int(lay/4)%len(fuzzPerms)]
	r := rand.New(rand.NewSource(int64(n) + int64(w)*7))
	xs, ws, ys := [4]int{N, C, H, W}, [4]int{O, C / G, KH, KW}, [4]int{N, O, OH, OW}
	x := randF32(r, N*C*H*W)
	wt := randF32(r, O*C/G*KH*KW)
	want, _, _ := naiveConv(x, wt, nil, N, C, H, W, O, KH, KW, p)
	ybuf := make([]float32, len(want))
	xbuf := toLayout(x, xs, perm)
	err := Conv2dForward(layout4(ybuf, ys, operm), layout4(xbuf, xs, perm), contig4(wt, ws), nil, p)
	if N > 0 && (H == 0 || W == 0) {
		if err == nil {
			t.Fatalf("forward %v: want torch's error for an empty plane", xs)
		}
		return
	}
	if err != nil {
		t.Fatalf("forward %v %v %+v: %v", xs, ws, p, err)
	}
	closeF32(t, fromLayout(ybuf, ys, operm), want, 1e-4)

	gy := randF32(r, len(want))
	gx, gw, gb := make([]float32, len(x)), make([]float32, len(wt)), make([]float32, O)
	gxt, gwt := layout4(gx, xs, perm), contig4(gw, ws)
	gbt := f32Tensor(gb, []int64{int64(O)}, []int64{1})
	if err := Conv2dBackward(&gxt, &gwt, &gbt, layout4(toLayout(gy, ys, operm), ys, operm), layout4(xbuf, xs, perm),
		contig4(wt, ws), p); err != nil {
		t.Fatalf("backward %v %v %+v: %v", xs, ws, p, err)
	}
	dot := func(a, b []float32) (s, m float64) {
		for i := range a {
			s += float64(a[i]) * float64(b[i])
			m += math.Abs(float64(a[i]) * float64(b[i]))
		}
		return s, m
	}
	l, scale := dot(gy, want)
	lx, _ := dot(fromLayout(gx, xs, perm), x)
	lw, _ := dot(gw, wt)
	tol := 1e-4 * (1 + scale)
	if math.Abs(l-lx) > tol || math.Abs(l-lw) > tol {
		t.Fatalf("%v %v %+v: <gy,y>=%v <gx,x>=%v <gw,w>=%v", xs, ws, p, l, lx, lw)
	}
	var sgy float64
	for i := range gy {
		sgy += float64(gy[i])
	}
	var sgb float64
	for _, v := range gb {
		sgb += float64(v)
	}
	if math.Abs(sgy-sgb) > 1e-3*(1+math.Abs(sgy)) {
		t.Fatalf("bias gradient sums to %v, want %v", sgb, sgy)
	}
}

// FuzzConv2dGeometry drives the convolution kernels with arbitrary small geometries,
// including kernels wider than the padded input (the ConvNeXt depthwise 7x7 on a 2x2 map
// that once sliced out of range), strides, dilations, groups and permuted layouts.
func FuzzConv2dGeometry(f *testing.F) {
	f.Add(uint8(2), uint8(3), uint8(2), uint8(2), uint8(0), uint8(6), uint8(6), uint8(0), uint8(0), uint8(3),
		uint8(3), uint8(0), uint8(0), uint8(2), uint8(1)) // depthwise 7x7, pad 3, 2x2, channels-last
	f.Add(uint8(1), uint8(2), uint8(5), uint8(1), uint8(1), uint8(2), uint8(7), uint8(1), uint8(2), uint8(1),
		uint8(3), uint8(1), uint8(1), uint8(0), uint8(0))
	f.Add(uint8(2), uint8(1), uint8(9), uint8(9), uint8(2), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0),
		uint8(0), uint8(0), uint8(0), uint8(1), uint8(5))
	f.Add(uint8(0), uint8(1), uint8(4), uint8(4), uint8(0), uint8(2), uint8(2), uint8(0), uint8(0), uint8(1),
		uint8(1), uint8(0), uint8(0), uint8(0), uint8(0)) // zero samples
	f.Fuzz(checkConvGeometry)
}
