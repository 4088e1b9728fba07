package kernels

import (
	"math/rand"
	"syscall"
	"testing"
	"unsafe"
)

// cpuTime is the process's user+system CPU time: on a loaded machine the wall time of a
// benchmark swings with the other load, its CPU time much less.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)
}

// reportCPU adds the CPU time per op (all threads) since t0 as metric cpu-ns/op.
func reportCPU(b *testing.B, t0 int64) {
	b.ReportMetric(float64(cpuTime()-t0)/float64(b.N), "cpu-ns/op")
}

// Kernel-only times of the elementwise ops at the reference models' shapes (transformer
// [16,4,64,64] attention, [16,64,256] MLP, CNN [64,16,28,28]).

func BenchmarkEWModel(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	att := []int64{16, 4, 64, 64}
	mlp := []int64{16, 64, 256}
	cnn := []int64{64, 16, 28, 28}
	one := float64(2)
	scal := func(sizes []int64) Tensor {
		return Tensor{Ptr: unsafe.Pointer(&one), DType: Float64, Sizes: sizes, Strides: make([]int64, len(sizes))}
	}
	mask := make([]uint8, 64*64)
	for i := range mask {
		mask[i] = uint8(r.Intn(2))
	}
	bmask := Tensor{Ptr: unsafe.Pointer(&mask[0]), DType: Bool, Sizes: att, Strides: []int64{0, 0, 64, 1}}
	cases := []struct {
		name  string
		op    string
		sizes []int64
		ins   func(s []int64) []Tensor
		p     []float64
	}{
		{"mul", "mul", att, func(s []int64) []Tensor {
			return []Tensor{benchTensor(r, Float32, s...), benchTensor(r, Float32, s...)}
		}, nil},
		{"mulScalar", "mul", att, func(s []int64) []Tensor { return []Tensor{benchTensor(r, Float32, s...), scal(s)} }, nil},
		{"add", "add", att, func(s []int64) []Tensor {
			return []Tensor{benchTensor(r, Float32, s...), benchTensor(r, Float32, s...)}
		}, []float64{1}},
		{"maskedFill", "where", att, func(s []int64) []Tensor { return []Tensor{bmask, scal(s), benchTensor(r, Float32, s...)} }, nil},
		{"lerp", "lerp", mlp, func(s []int64) []Tensor {
			return []Tensor{benchTensor(r, Float32, s...), benchTensor(r, Float32, s...), scal(s)}
		}, nil},
		{"addcdiv", "addcdiv", mlp, func(s []int64) []Tensor {
			return []Tensor{benchTensor(r, Float32, s...), benchTensor(r, Float32, s...), benchTensor(r, Float32, s...)}
		}, []float64{-0.1}},
		{"relu", "relu", cnn, func(s []int64) []Tensor { return []Tensor{benchTensor(r, Float32, s...)} }, nil},
		{"thresholdBwd", "threshold_backward", cnn, func(s []int64) []Tensor {
			return []Tensor{benchTensor(r, Float32, s...), benchTensor(r, Float32, s...)}
		}, []float64{0}},
		{"gelu", "gelu", mlp, func(s []int64) []Tensor { return []Tensor{benchTensor(r, Float32, s...)} }, []float64{0}},
		{"geluTanh", "gelu", mlp, func(s []int64) []Tensor { return []Tensor{benchTensor(r, Float32, s...)} }, []float64{1}},
		{"geluBwd", "gelu_backward", mlp, func(s []int64) []Tensor {
			return []Tensor{benchTensor(r, Float32, s...), benchTensor(r, Float32, s...)}
		}, []float64{0}},
		{"sigmoid", "sigmoid", mlp, func(s []int64) []Tensor { return []Tensor{benchTensor(r, Float32, s...)} }, nil},
		{"tanh", "tanh", mlp, func(s []int64) []Tensor { return []Tensor{benchTensor(r, Float32, s...)} }, nil},
		{"silu", "silu", mlp, func(s []int64) []Tensor { return []Tensor{benchTensor(r, Float32, s...)} }, nil},
		{"exp", "exp", mlp, func(s []int64) []Tensor { return []Tensor{benchTensor(r, Float32, s...)} }, nil},
		{"erf", "erf", mlp, func(s []int64) []Tensor { return []Tensor{benchTensor(r, Float32, s...)} }, nil},
	}
	for _, c := range cases {
		ins := c.ins(c.sizes)
		o := benchTensor(r, Float32, c.sizes...)
		p := append(c.p, 0, 0, 0, 0)
		b.Run(c.name, func(b *testing.B) {
			n := int64(1)
			for _, s := range c.sizes {
				n *= s
			}
			b.SetBytes(4 * n)
			t0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if err := Elementwise(EWOps[c.op], Float32, o, ins, p); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, t0)
		})
	}
}

// BenchmarkCopyPermuted is clone() of the transformer's head split: [16,4,64,16] permuted
// to [16,64,4,16] (rows of 16 contiguous floats), and the reverse.
func BenchmarkCopyPermuted(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	src := benchTensor(r, Float32, 16, 4, 64, 16)
	perm := Tensor{Ptr: src.Ptr, DType: Float32, Sizes: []int64{16, 64, 4, 16}, Strides: []int64{4096, 16, 1024, 1}}
	dst := benchTensor(r, Float32, 16, 64, 4, 16)
	qkv := benchTensor(r, Float32, 16, 64, 192)
	heads := Tensor{Ptr: qkv.Ptr, DType: Float32, Sizes: []int64{16, 4, 64, 16}, Strides: []int64{12288, 16, 192, 1}}
	dst2 := benchTensor(r, Float32, 16, 4, 64, 16)
	tr := Tensor{Ptr: src.Ptr, DType: Float32, Sizes: []int64{16, 64, 64}, Strides: []int64{4096, 1, 64}}
	dst3 := benchTensor(r, Float32, 16, 64, 64)
	for _, c := range []struct {
		name     string
		dst, src Tensor
	}{{"perm0213", dst, perm}, {"qkvHeads", dst2, heads}, {"transpose", dst3, tr}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 * c.dst.Numel())
			t0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if err := Copy(c.dst, c.src); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, t0)
		})
	}
}

func BenchmarkRandomModel(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	t := benchTensor(r, Float32, 16, 4, 64, 64)
	s := Stream{Seed: 1, Offset: 2}
	b.Run("bernoulli", func(b *testing.B) {
		t0 := cpuTime()
		for i := 0; i < b.N; i++ {
			if err := Bernoulli(t, nil, s, 0.9); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, t0)
	})
	mask := make([]uint8, t.Numel())
	mt := Tensor{Ptr: unsafe.Pointer(&mask[0]), DType: Bool, Sizes: t.Sizes, Strides: t.Strides}
	o := benchTensor(r, Float32, 16, 4, 64, 64)
	b.Run("dropout", func(b *testing.B) {
		t0 := cpuTime()
		for i := 0; i < b.N; i++ {
			if err := Dropout(o, mt, t, s, 0.1); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, t0)
	})
}

func BenchmarkPhiloxBlocks(b *testing.B) {
	w := make([]uint32, 4*rndBatch)
	s := Stream{Seed: 1, Offset: 2}
	b.SetBytes(int64(len(w) * 4))
	for i := 0; i < b.N; i++ {
		philoxBlocks(w, s, uint64(i))
	}
}

// BenchmarkEWBroadcastRows: short rows (a bias of 64 broadcast over 1024 rows) go to the
// kernel one row per call.
func BenchmarkEWBroadcastRows(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	x := benchTensor(r, Float32, 1024, 64)
	bias := benchTensor(r, Float32, 64)
	bias = Tensor{Ptr: bias.Ptr, DType: Float32, Sizes: []int64{1024, 64}, Strides: []int64{0, 1}}
	o := benchTensor(r, Float32, 1024, 64)
	for _, op := range []string{"add", "mul"} {
		b.Run(op, func(b *testing.B) {
			t0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if err := Elementwise(EWOps[op], Float32, o, []Tensor{x, bias}, []float64{1}); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, t0)
		})
	}
}
