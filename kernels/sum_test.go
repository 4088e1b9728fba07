package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// The fast sum paths (and bfloat16 column sums) must give bit-for-bit the results of the generic loop2d (which
// follows torch's CPU order) for every layout.
func TestSumFastMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	shapes := [][]int64{{1024, 256}, {1024, 192}, {16, 64, 64}, {64, 64}, {7, 5000}, {5000, 7}, {3, 33, 17},
		{300, 40}, {40, 300}, {1, 9}, {2, 3, 4, 5}, {70000}, {129, 9}, {4100, 3}}
	for _, dt := range []DType{Float32, Float64, BFloat16} {
		for _, sh := range shapes {
			nd := len(sh)
			numel := int64(1)
			for _, v := range sh {
				numel *= v
			}
			for trial := 0; trial < 6; trial++ {
				// a random permutation of a contiguous layout, sometimes an expanded dim
				perm := rng.Perm(nd)
				strides := make([]int64, nd)
				st := int64(1)
				for i := nd - 1; i >= 0; i-- {
					strides[perm[i]] = st
					st *= sh[perm[i]]
				}
				if trial == 5 && nd > 1 {
					strides[rng.Intn(nd)] = 0
				}
				red := make([]bool, nd)
				for i := range red {
					red[i] = rng.Intn(2) == 0
				}
				if trial == 0 {
					red[0] = true
					for i := 1; i < nd; i++ {
						red[i] = false
					}
				}
				outSizes := make([]int64, nd)
				nOut := int64(1)
				for i := range sh {
					outSizes[i] = sh[i]
					if red[i] {
						outSizes[i] = 1
					}
					nOut *= outSizes[i]
				}
				es := int64(dt.Size())
				buf := make([]byte, numel*es)
				for i := int64(0); i < numel; i++ {
					v := rng.NormFloat64() * math.Exp(rng.NormFloat64())
					switch dt {
					case BFloat16:
						*(*uint16)(unsafe.Pointer(&buf[i*es])) = F32ToBF16(float32(v))
					case Float32:
						*(*float32)(unsafe.Pointer(&buf[i*es])) = float32(v)
					default:
						*(*float64)(unsafe.Pointer(&buf[i*es])) = v
					}
				}
				in := Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: dt, Sizes: sh, Strides: strides}
				for _, mean := range []bool{false, true} {
					for _, threads := range []int{1, 2} {
						want := runSumBytes(t, in, red, outSizes, nOut, SumOpts{Mean: mean, Threads: threads}, true)
						for _, goOnly := range []bool{false, true} {
							noCSum = goOnly
							got := runSumBytes(t, in, red, outSizes, nOut, SumOpts{Mean: mean, Threads: threads}, false)
							noCSum = false
							for i := range got {
								if got[i] != want[i] {
									t.Fatalf("%v %v strides %v reduced %v mean %v (Go cascade only %v): fast and generic differ",
										dt, sh, strides, red, mean, goOnly)
								}
							}
						}
					}
				}
			}
		}
	}
}

func runSumBytes(t *testing.T, in Tensor, red []bool, outSizes []int64, nOut int64, o SumOpts, generic bool) []byte {
	es := int64(in.DType.Size())
	ob := make([]byte, nOut*es)
	os := make([]int64, len(outSizes))
	st := int64(1)
	for i := len(os) - 1; i >= 0; i-- {
		os[i] = st
		st *= outSizes[i]
	}
	out := Tensor{Ptr: unsafe.Pointer(&ob[0]), DType: in.DType, Sizes: outSizes, Strides: os}
	noFastSum = generic
	defer func() { noFastSum = false }()
	if err := Sum(out, in, red, o); err != nil {
		t.Fatal(err)
	}
	return ob
}
