package kernels

import (
	"math/rand"
	"testing"
	"unsafe"
)

// Benchmarks of the bfloat16 paths against float32 at the reference models' shapes.

func benchTensor(r *rand.Rand, dt DType, sizes ...int64) Tensor {
	n := int64(1)
	for _, s := range sizes {
		n *= s
	}
	strides := make([]int64, len(sizes))
	st := int64(1)
	for i := len(sizes) - 1; i >= 0; i-- {
		strides[i] = st
		st *= sizes[i]
	}
	var p unsafe.Pointer
	if dt == BFloat16 {
		x := make([]uint16, max(n, 1))
		for i := range x {
			x[i] = F32ToBF16(float32(r.NormFloat64()))
		}
		p = unsafe.Pointer(&x[0])
	} else {
		x := randF32(r, int(max(n, 1)))
		p = unsafe.Pointer(&x[0])
	}
	return Tensor{Ptr: p, DType: dt, Sizes: sizes, Strides: strides}
}

// transposed returns t's last two dims swapped (a view).
func transposed(t Tensor) Tensor {
	d := len(t.Sizes)
	s := append([]int64(nil), t.Sizes...)
	st := append([]int64(nil), t.Strides...)
	s[d-1], s[d-2] = s[d-2], s[d-1]
	st[d-1], st[d-2] = st[d-2], st[d-1]
	return Tensor{Ptr: t.Ptr, DType: t.DType, Sizes: s, Strides: st}
}

var benchDTypes = []struct {
	name string
	dt   DType
}{{"f32", Float32}, {"bf16", BFloat16}}

func BenchmarkGemmDType(b *testing.B) {
	type gcase struct {
		name       string
		B, m, n, k int64
		transB     bool
		bias       bool
	}
	cases := []gcase{
		{"mm256", 1, 256, 256, 256, false, false},
		{"mm512", 1, 512, 512, 512, false, false},
		{"mm1024", 1, 1024, 1024, 1024, false, false},
		{"linear64x1024x1024T", 1, 64, 1024, 1024, true, false},
		{"addmm_cnn64x1568x64T", 1, 64, 64, 1568, true, true},
		{"addmm_tf1024x64x256T", 1, 1024, 256, 64, true, true},
		{"bmm_tf64x64x64x16T", 64, 64, 64, 16, true, false},
	}
	for _, c := range cases {
		for _, d := range benchDTypes {
			r := rand.New(rand.NewSource(1))
			a := benchTensor(r, d.dt, c.B, c.m, c.k)
			var bt Tensor
			if c.transB {
				bt = transposed(benchTensor(r, d.dt, c.B, c.n, c.k))
			} else {
				bt = benchTensor(r, d.dt, c.B, c.k, c.n)
			}
			out := benchTensor(r, d.dt, c.B, c.m, c.n)
			var self *Tensor
			if c.bias {
				s := benchTensor(r, d.dt, c.n)
				self = &Tensor{Ptr: s.Ptr, DType: d.dt, Sizes: []int64{c.B, c.m, c.n}, Strides: []int64{0, 0, 1}}
			}
			b.Run(c.name+"/"+d.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := BatchedGemm(out, a, bt, self, 1, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(c.B*c.m*c.n*c.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

func BenchmarkConvDType(b *testing.B) {
	p := ConvParams{StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, DilH: 1, DilW: 1, Groups: 1}
	for _, c := range []struct {
		name    string
		c, o, h int64
	}{{"conv1_1to16", 1, 16, 28}, {"conv2_16to32", 16, 32, 28}} {
		for _, d := range benchDTypes {
			r := rand.New(rand.NewSource(1))
			in := benchTensor(r, d.dt, 64, c.c, c.h, c.h)
			w := benchTensor(r, d.dt, c.o, c.c, 3, 3)
			bias := benchTensor(r, d.dt, c.o)
			out := benchTensor(r, d.dt, 64, c.o, c.h, c.h)
			gin := benchTensor(r, d.dt, 64, c.c, c.h, c.h)
			gw := benchTensor(r, d.dt, c.o, c.c, 3, 3)
			gb := benchTensor(r, d.dt, c.o)
			b.Run(c.name+"/fwd/"+d.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := Conv2dForward(out, in, w, &bias, p); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(c.name+"/bwd/"+d.name, func(b *testing.B) {
				gi := &gin
				if c.c == 1 {
					gi = nil // the first layer's input needs no gradient
				}
				for i := 0; i < b.N; i++ {
					if err := Conv2dBackward(gi, &gw, &gb, out, in, w, p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkElementwiseDType(b *testing.B) {
	for _, name := range []string{"relu", "add", "mul", "gelu"} {
		op := EWOps[name]
		for _, d := range benchDTypes {
			r := rand.New(rand.NewSource(1))
			out := benchTensor(r, d.dt, 64, 32, 28, 28)
			ins := []Tensor{benchTensor(r, d.dt, 64, 32, 28, 28), benchTensor(r, d.dt, 64, 32, 28, 28)}[:op.NIn]
			var params []float64
			if name == "gelu" {
				params = []float64{0}
			} else if name == "add" {
				params = []float64{1}
			}
			b.Run(name+"/"+d.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := Elementwise(op, Float32, out, ins, params); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkCopyDType(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	f := benchTensor(r, Float32, 64, 32, 28, 28)
	h := benchTensor(r, BFloat16, 64, 32, 28, 28)
	f2 := benchTensor(r, Float32, 64, 32, 28, 28)
	b.Run("f32_to_bf16", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = Copy(h, f)
		}
	})
	b.Run("bf16_to_f32", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = Copy(f2, h)
		}
	})
	b.Run("f32_to_f32", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = Copy(f2, f)
		}
	})
	wt := benchTensor(r, BFloat16, 1024, 1024)
	wf := benchTensor(r, Float32, 1024, 1024)
	b.Run("bf16_to_f32_transposed1024", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = Copy(wf, transposed(wt))
		}
	})
}
