package kernels

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// gemmProbeShape is one product of the benchmarks or the reference models: m×k @ k×n,
// ta/tb meaning A/B are stored transposed (F.linear's weight is B stored n×k; a weight
// gradient's A is the output gradient's transpose).
type gemmProbeShape struct {
	name    string
	b       int64
	m, k, n int64
	ta, tb  bool
}

var gemmProbeShapes = []gemmProbeShape{
	{"256^3", 1, 256, 256, 256, false, false},
	{"512^3", 1, 512, 512, 512, false, false},
	{"1024^3", 1, 1024, 1024, 1024, false, false},
	{"lin64x1024x1024", 1, 64, 1024, 1024, false, true},
	// The transformer (16x64 tokens, d_model 64, d_ff 256, vocab 128): forward,
	// input gradient (dY @ W) and weight gradient (dY^T @ X).
	{"tf.qkv", 1, 1024, 64, 192, false, true},
	{"tf.proj", 1, 1024, 64, 64, false, true},
	{"tf.ff1", 1, 1024, 64, 256, false, true},
	{"tf.ff2", 1, 1024, 256, 64, false, true},
	{"tf.head", 1, 1024, 64, 128, false, true},
	{"tf.qkv.dx", 1, 1024, 192, 64, false, false},
	{"tf.ff1.dx", 1, 1024, 256, 64, false, false},
	{"tf.ff2.dx", 1, 1024, 64, 256, false, false},
	{"tf.head.dx", 1, 1024, 128, 64, false, false},
	{"tf.qkv.dw", 1, 192, 1024, 64, true, false},
	{"tf.ff1.dw", 1, 256, 1024, 64, true, false},
	{"tf.ff2.dw", 1, 64, 1024, 256, true, false},
	{"tf.head.dw", 1, 128, 1024, 64, true, false},
	{"tf.attn.qk", 64, 64, 16, 64, false, true},
	{"tf.attn.pv", 64, 64, 64, 16, false, false},
	// The MLP (batch 64): 64-128-64-10.
	{"mlp.l1", 1, 64, 64, 128, false, true},
	{"mlp.l2", 1, 64, 128, 64, false, true},
	{"mlp.l2.dx", 1, 64, 64, 128, false, false},
	{"mlp.l1.dw", 1, 128, 64, 64, true, false},
}

// probeF32 is a float32 tensor with t's shape, strides and values.
func probeF32(t Tensor) Tensor {
	n := int64(1)
	for d, s := range t.Sizes {
		n += (s - 1) * t.Strides[d]
	}
	src := unsafe.Slice((*uint16)(t.Ptr), n)
	buf := make([]float32, n)
	for i, v := range src {
		buf[i] = BF16ToF32(v)
	}
	return Tensor{Ptr: unsafe.Pointer(&buf[0]), DType: Float32, Sizes: slices.Clone(t.Sizes), Strides: slices.Clone(t.Strides)}
}

// TestGemmProbe (HPUSIM_GEMM_PROBE=1; HPUSIM_GEMM_PROBE_SHAPES=comma-separated names)
// times bfloat16 and float32 BatchedGemm at each probe shape on 1 and 2 workers,
// alternating the two call by call in rounds, and prints the medians of process CPU time
// and wall time per call and the bf16/f32 speed ratios (>1: bf16 faster).
func TestGemmProbe(t *testing.T) {
	if os.Getenv("HPUSIM_GEMM_PROBE") == "" {
		t.Skip("set HPUSIM_GEMM_PROBE=1")
	}
	want := os.Getenv("HPUSIM_GEMM_PROBE_SHAPES")
	rounds := 9
	if v, err := strconv.Atoi(os.Getenv("HPUSIM_GEMM_PROBE_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	r := rand.New(rand.NewSource(5))
	for _, s := range gemmProbeShapes {
		if want != "" && !slices.Contains(strings.Split(want, ","), s.name) {
			continue
		}
		a := bf16View(r, s.b, s.m, s.k, bf16Layout{trans: s.ta})
		b := bf16View(r, s.b, s.k, s.n, bf16Layout{trans: s.tb})
		out := bf16View(r, s.b, s.m, s.n, bf16Layout{})
		a32, b32, out32 := probeF32(a), probeF32(b), probeF32(out)
		calls := max(1, int(2e7/float64(s.b*s.m*s.n*s.k)))
		for _, w := range []int{1, 2} {
			prev := SetThreads(w)
			var cpu, wall [2][]float64
			for round := 0; round < rounds; round++ {
				ops := [2][3]Tensor{{out, a, b}, {out32, a32, b32}}
				for o := 0; o < 2; o++ {
					i := o ^ (round & 1) // alternate which goes first
					x := ops[i]
					c0, t0 := processCPU(), time.Now()
					for j := 0; j < calls; j++ {
						if err := BatchedGemm(x[0], x[1], x[2], nil, 1, 0); err != nil {
							t.Fatal(err)
						}
					}
					wall[i] = append(wall[i], float64(time.Since(t0).Microseconds())/float64(calls))
					cpu[i] = append(cpu[i], float64((processCPU()-c0).Microseconds())/float64(calls))
				}
			}
			SetThreads(prev)
			med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
			cb, cf, wb, wf := med(cpu[0]), med(cpu[1]), med(wall[0]), med(wall[1])
			fmt.Printf("%-16s w%d  cpu us bf16 %8.1f f32 %8.1f  f32/bf16 %.2f | wall bf16 %8.1f f32 %8.1f  f32/bf16 %.2f\n",
				s.name, w, cb, cf, cf/cb, wb, wf, wf/wb)
		}
	}
}

// threadCPU is the calling thread's CPU time in ns (lock the goroutine to its thread).
func threadCPU() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3 /* CLOCK_THREAD_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// TestGemmB2Stages (HPUSIM_GEMM_PROBE=1) times the AVX2 bf16 kernel's stages on one
// thread at each probe shape: packing A, packing B, the tiles, and the float32 -> bf16
// rounding of the result (medians of rounds, µs per call).
func TestGemmB2Stages(t *testing.T) {
	if os.Getenv("HPUSIM_GEMM_PROBE") == "" || !b2CPU {
		t.Skip("set HPUSIM_GEMM_PROBE=1 (AVX2 machine)")
	}
	want := os.Getenv("HPUSIM_GEMM_PROBE_SHAPES")
	r := rand.New(rand.NewSource(5))
	for _, s := range gemmProbeShapes {
		if want != "" && !slices.Contains(strings.Split(want, ","), s.name) {
			continue
		}
		a := bf16View(r, 1, s.m, s.k, bf16Layout{trans: s.ta})
		b := bf16View(r, 1, s.k, s.n, bf16Layout{trans: s.tb})
		M, K, N := int(s.m), int(s.k), int(s.n)
		mp, np := (M+b2MR-1)/b2MR, (N+b2NR-1)/b2NR
		pa := make([]float32, mp*b2MR*K)
		pb := make([]float32, np*b2NR*K)
		c := make([]float32, M*N)
		o := make([]uint16, M*N)
		calls := max(3, int(1e8/float64(s.m*s.n*s.k)))
		stages := []func(){
			func() { b2PackA(pa, a.Ptr, a.Strides[1], a.Strides[2], K, 0, M) },
			func() { b2PackB(pb, b.Ptr, b.Strides[1], b.Strides[2], K, 0, N) },
			func() { b2Gemm(pa, pb, M, N, K, c, N) },
			func() { f32ToBF16s(o, c) },
		}
		var us [4][]float64
		runtime.LockOSThread()
		for round := 0; round < 9; round++ {
			for i, f := range stages {
				t0 := threadCPU()
				for j := 0; j < calls; j++ {
					f()
				}
				us[i] = append(us[i], float64(threadCPU()-t0)/1e3/float64(calls))
			}
		}
		runtime.UnlockOSThread()
		med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
		g := med(us[2])
		fmt.Printf("%-16s packA %7.1f packB %7.1f tiles %7.1f (%5.1f GFLOP/s) round %6.1f us\n", s.name,
			med(us[0]), med(us[1]), g, 2*float64(M*N*K)/g/1e3, med(us[3]))
	}
}
