package kernels

import (
	"bytes"
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// maskedFillFast must give where's generic results bit for bit (self's elements copied,
// the value rounded as the generic loop rounds it) for every layout it takes, and leave
// the others to the generic loop.
func TestMaskedFillFastMatchesWhere(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	type layout struct {
		name             string
		sizes            []int64
		selfSt, maskSt   []int64 // element strides; self's buffer is dense over its own strides
		selfLen, maskLen int64
		inPlace, fast    bool
	}
	cases := []layout{
		{"attention", []int64{16, 4, 64, 64}, []int64{16384, 4096, 64, 1}, []int64{0, 0, 64, 1}, 262144, 4096, false, true},
		{"attention_inplace", []int64{16, 4, 64, 64}, []int64{16384, 4096, 64, 1}, []int64{0, 0, 64, 1}, 262144, 4096, true, true},
		{"full_mask", []int64{3, 5, 37}, []int64{185, 37, 1}, []int64{185, 37, 1}, 555, 555, false, true},
		{"odd_rows", []int64{7, 3, 17}, []int64{51, 17, 1}, []int64{0, 17, 1}, 357, 51, false, true},
		{"row_mask", []int64{9, 100}, []int64{100, 1}, []int64{0, 1}, 900, 100, true, true},
		{"big_inner", []int64{2, 40000}, []int64{40000, 1}, []int64{40000, 1}, 80000, 80000, false, true},
		{"col_mask", []int64{50, 30}, []int64{30, 1}, []int64{1, 0}, 1500, 50, false, false},
		{"transposed_self", []int64{40, 30}, []int64{1, 40}, []int64{30, 1}, 1200, 1200, false, false},
		{"short_inner", []int64{64, 8}, []int64{8, 1}, []int64{0, 1}, 512, 8, false, false},
	}
	values := []float64{math.Inf(-1), 0, 1.0 / 3, -7.25e30, math.NaN()}
	for _, dt := range []DType{Float32, BFloat16} {
		es := int64(dt.Size())
		for _, c := range cases {
			for _, v := range values {
				nd := len(c.sizes)
				selfBuf := make([]byte, c.selfLen*es)
				for i := int64(0); i < c.selfLen; i++ {
					x := float32(r.NormFloat64())
					if i%97 == 5 {
						x = float32(math.NaN())
					}
					if dt == BFloat16 {
						*(*uint16)(unsafe.Pointer(&selfBuf[i*2])) = F32ToBF16(x)
					} else {
						*(*float32)(unsafe.Pointer(&selfBuf[i*4])) = x
					}
				}
				maskBuf := make([]byte, c.maskLen)
				for i := range maskBuf {
					if r.Intn(3) == 0 {
						maskBuf[i] = 1
					}
				}
				val := v
				mask := Tensor{Ptr: unsafe.Pointer(&maskBuf[0]), DType: Bool, Sizes: c.sizes, Strides: c.maskSt}
				scalar := Tensor{Ptr: unsafe.Pointer(&val), DType: Float64, Sizes: c.sizes, Strides: make([]int64, nd)}
				run := func(generic bool) ([]byte, bool) {
					self := make([]byte, len(selfBuf))
					copy(self, selfBuf)
					st := Tensor{Ptr: unsafe.Pointer(&self[0]), DType: dt, Sizes: c.sizes, Strides: c.selfSt}
					out := st
					var ob []byte
					if !c.inPlace {
						ob = make([]byte, c.selfLen*es)
						out = Tensor{Ptr: unsafe.Pointer(&ob[0]), DType: dt, Sizes: c.sizes, Strides: c.selfSt}
					} else {
						ob = self
					}
					noMaskedFillFast = generic
					defer func() { noMaskedFillFast = false }()
					took := !generic && maskedFillFast(out, []Tensor{mask, scalar, st}, Float32)
					if !took {
						if err := Elementwise(EWOps["where"], Float32, out, []Tensor{mask, scalar, st}, nil); err != nil {
							t.Fatal(err)
						}
					}
					return ob, took
				}
				want, _ := run(true)
				got, took := run(false)
				if took != c.fast {
					t.Fatalf("%v %s: fast path taken %v, want %v", dt, c.name, took, c.fast)
				}
				if !bytes.Equal(got, want) {
					// the generic loop quiets NaNs (the fast path copies self's bits): equal
					// as numbers, NaN where NaN
					for i := int64(0); i < int64(len(got))/es; i++ {
						var a, b float32
						if dt == BFloat16 {
							a, b = BF16ToF32(*(*uint16)(unsafe.Pointer(&got[i*2]))), BF16ToF32(*(*uint16)(unsafe.Pointer(&want[i*2])))
						} else {
							a, b = *(*float32)(unsafe.Pointer(&got[i*4])), *(*float32)(unsafe.Pointer(&want[i*4]))
						}
						if a != b && !(a != a && b != b) {
							t.Fatalf("%v %s value %v: element %d fast %v, generic %v", dt, c.name, v, i, a, b)
						}
					}
				}
			}
		}
	}
}

// Elementwise("where") takes the fast path on a zero-size output and on a partial overlap
// of the output and self leaves it to the generic loop.
func TestMaskedFillFastEdges(t *testing.T) {
	val := 2.0
	empty := Tensor{DType: Float32, Sizes: []int64{0, 64}, Strides: []int64{64, 1}}
	mask := Tensor{DType: Bool, Sizes: []int64{0, 64}, Strides: []int64{64, 1}}
	sc := Tensor{Ptr: unsafe.Pointer(&val), DType: Float64, Sizes: []int64{0, 64}, Strides: []int64{0, 0}}
	if err := Elementwise(EWOps["where"], Float32, empty, []Tensor{mask, sc, empty}, nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, 200)
	mb := make([]uint8, 100)
	self := Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: Float32, Sizes: []int64{100}, Strides: []int64{1}}
	out := Tensor{Ptr: unsafe.Pointer(&buf[50]), DType: Float32, Sizes: []int64{100}, Strides: []int64{1}}
	m := Tensor{Ptr: unsafe.Pointer(&mb[0]), DType: Bool, Sizes: []int64{100}, Strides: []int64{1}}
	s1 := Tensor{Ptr: unsafe.Pointer(&val), DType: Float64, Sizes: []int64{100}, Strides: []int64{0}}
	if maskedFillFast(out, []Tensor{m, s1, self}, Float32) {
		t.Fatal("fast path took a partially overlapping output")
	}
}
