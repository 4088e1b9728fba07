//go:build cgo && !noblas

package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// TestF32SmallMatchesBLAS: the small kernel agrees with OpenBLAS to float32 rounding (each
// within a few ulps of the float64 sum's scale) for every layout, odd tile edges and k up
// to its bound, writes nothing past n in C's padded rows, and takes the intended shapes.
func TestF32SmallMatchesBLAS(t *testing.T) {
	if !f32SmallCPU {
		t.Skip("no AVX2+FMA")
	}
	defer setF32Dot(false)()
	r := rand.New(rand.NewSource(7))
	for si, sh := range [][3]int{{64, 64, 16}, {64, 16, 64}, {64, 64, 63}, {16, 64, 64}, {5, 9, 3}, {7, 23, 31},
		{4, 8, 1}, {13, 17, 256}, {33, 40, 100}, {6, 130, 7}, {64, 128, 64}, {10, 64, 64}, {64, 10, 64},
		{128, 64, 64}, {23, 37, 300}, {9, 19, 777}, {8, 8, 1100}, {1024, 64, 256}, {1000, 256, 64}} {
		m, n, k := sh[0], sh[1], sh[2]
		if !useF32Small(m, n, k) {
			t.Fatalf("%v: not taken by the small kernel", sh)
		}
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			ta, tb := tr[0], tr[1]
			// Leading dimensions above the minimum, so row padding is skipped correctly.
			lda, ldb, ldc := k+3, n+5, n+2
			if ta {
				lda = m + 3
			}
			if tb {
				ldb = k + 5
			}
			arows, brows := m, k
			if ta {
				arows = k
			}
			if tb {
				brows = n
			}
			a, b := randF32(r, arows*lda), randF32(r, brows*ldb)
			want, got := make([]float32, m*ldc), make([]float32, m*ldc)
			for i := range got {
				got[i], want[i] = 42, 42
			}
			// alpha/beta: C = alpha*AB + beta*C as sgemm has it, C starting at 42 where read.
			alpha, beta := float32(1), float32(0)
			switch si % 3 {
			case 1:
				alpha, beta = 1, 1
			case 2:
				alpha, beta = 0.5, -2
			}
			blasGemmSerial(ta, tb, m, n, k, alpha, unsafe.Pointer(&a[0]), lda, unsafe.Pointer(&b[0]), ldb, beta,
				unsafe.Pointer(&want[0]), ldc)
			f32SmallGemm(ta, tb, m, n, k, alpha, unsafe.Pointer(&a[0]), lda, unsafe.Pointer(&b[0]), ldb, beta,
				unsafe.Pointer(&got[0]), ldc, nil)
			for i := range want {
				if i%ldc >= n {
					if got[i] != 42 {
						t.Fatalf("%v ta=%v tb=%v: wrote padding element %d", sh, ta, tb, i)
					}
					continue
				}
				row, col := i/ldc, i%ldc
				var ref, scale float64
				for kk := 0; kk < k; kk++ {
					var av, bv float32
					if ta {
						av = a[kk*lda+row]
					} else {
						av = a[row*lda+kk]
					}
					if tb {
						bv = b[col*ldb+kk]
					} else {
						bv = b[kk*ldb+col]
					}
					ref += float64(av) * float64(bv)
					scale += math.Abs(float64(av) * float64(bv))
				}
				ref = float64(alpha)*ref + float64(beta)*42
				scale = math.Abs(float64(alpha))*scale + math.Abs(float64(beta))*42
				// The worst-case bound of one chain per 256 values of k plus the blocks'
				// additions (OpenBLAS: of its own blocking, bounded by k).
				tol := float64(min(k, 256)+k/256+2) * 6e-8 * scale
				if math.Abs(float64(got[i])-ref) > tol || math.Abs(float64(want[i])-ref) > float64(k+2)*6e-8*scale {
					t.Fatalf("%v ta=%v tb=%v: element (%d, %d): %v, OpenBLAS %v, float64 %v", sh, ta, tb, row, col,
						got[i], want[i], ref)
				}
			}
		}
	}
	for _, sh := range [][3]int{{2, 8, 8}, {8, 4, 8}, {8, 8, 0}, {8, 8, 5000}, {256, 256, 300}, {64, 64, 1024}, {1024, 512, 64},
		{64, 256, 1024}} {
		if useF32Small(sh[0], sh[1], sh[2]) {
			t.Errorf("%v: taken by the small kernel", sh)
		}
	}
}

// TestF32SmallWorkersSameBits: BatchedGemm over attention's layout (a transposed K) takes
// the small kernel and gives the same bits on 1 and 2 workers (each batch is one call
// whatever the split), and agrees with OpenBLAS to rounding.
func TestF32SmallWorkersSameBits(t *testing.T) {
	if !f32SmallCPU {
		t.Skip("no AVX2+FMA")
	}
	defer setF32Dot(false)()
	defer func(v bool) { f32SmallOn = v }(f32SmallOn)
	r := rand.New(rand.NewSource(9))
	const B, M, K, N = 8, 64, 16, 64
	a, b := randF32(r, B*M*K), randF32(r, B*K*N)
	A := f32Tensor(a, []int64{B, M, K}, []int64{M * K, K, 1})
	Bt := f32Tensor(b, []int64{B, K, N}, []int64{K * N, 1, K}) // k^T: a transposed view
	outs := [3][]float32{make([]float32, B*M*N), make([]float32, B*M*N), make([]float32, B*M*N)}
	for i, w := range []int{1, 2, 0} {
		f32SmallOn = w != 0
		prev := SetThreads(max(w, 1))
		err := BatchedGemm(f32Tensor(outs[i], []int64{B, M, N}, []int64{M * N, N, 1}), A, Bt, nil, 1, 0)
		SetThreads(prev)
		if err != nil {
			t.Fatal(err)
		}
	}
	diff := 0
	for i := range outs[0] {
		if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
			t.Fatalf("element %d: 1 worker %v, 2 workers %v", i, outs[0][i], outs[1][i])
		}
		if d := math.Abs(float64(outs[0][i] - outs[2][i])); d > 1e-5*(1+math.Abs(float64(outs[2][i]))) {
			t.Fatalf("element %d: small kernel %v, OpenBLAS %v", i, outs[0][i], outs[2][i])
		}
		if outs[0][i] != outs[2][i] {
			diff++
		}
	}
	if diff == 0 {
		t.Fatal("identical to OpenBLAS everywhere: the small kernel did not run")
	}
}

// TestF32SmallMidRoute: the MLP's products as its compiled step runs them (addmm with a
// broadcast bias and a transposed weight; the weight gradients with a transposed
// activation, the batch as k), plus k past one block, go through BatchedGemm to the small
// kernel (the counter), split by columns and by rows over 2 workers with the same bits as
// 1 worker, and agree with OpenBLAS to rounding without being identical everywhere.
func TestF32SmallMidRoute(t *testing.T) {
	if !f32SmallCPU {
		t.Skip("no AVX2+FMA")
	}
	defer setF32Dot(false)()
	defer func(v bool, s float64) { f32SmallOn, f32SmallSplitMin = v, s }(f32SmallOn, f32SmallSplitMin)
	r := rand.New(rand.NewSource(11))
	type cas struct {
		ta, tb, bias bool
		m, n, k      int
		alpha, beta  float64
	}
	for _, cs := range []cas{
		{false, true, true, 64, 128, 64, 1, 1}, {false, true, true, 64, 64, 128, 1, 1}, {false, true, true, 64, 10, 64, 1, 1},
		{false, false, false, 64, 64, 10, 1, 0}, {true, false, false, 10, 64, 64, 1, 0}, {true, false, false, 64, 128, 64, 1, 0},
		{true, false, false, 128, 64, 64, 1, 0}, {false, false, true, 40, 72, 600, 0.5, -1.5}, {true, true, false, 33, 70, 300, 2, 0},
	} {
		m, n, k := cs.m, cs.n, cs.k
		a, b, bias := randF32(r, m*k), randF32(r, k*n), randF32(r, n)
		A := f32Tensor(a, []int64{1, int64(m), int64(k)}, []int64{int64(m * k), int64(k), 1})
		if cs.ta {
			A = f32Tensor(a, []int64{1, int64(m), int64(k)}, []int64{int64(m * k), 1, int64(m)})
		}
		B := f32Tensor(b, []int64{1, int64(k), int64(n)}, []int64{int64(k * n), int64(n), 1})
		if cs.tb {
			B = f32Tensor(b, []int64{1, int64(k), int64(n)}, []int64{int64(k * n), 1, int64(k)})
		}
		var self *Tensor
		if cs.bias {
			s := f32Tensor(bias, []int64{1, int64(m), int64(n)}, []int64{0, 0, 1})
			self = &s
		}
		var outs [4][]float32
		for i, mode := range []struct {
			on      bool
			w       int
			splitAt float64
		}{{true, 1, 0}, {true, 2, 0}, {true, 2, blasSplitMin}, {false, 1, 0}} {
			f32SmallOn, f32SmallSplitMin = mode.on, mode.splitAt
			outs[i] = make([]float32, m*n)
			prev := SetThreads(mode.w)
			before := f32SmallCalls.Load()
			err := BatchedGemm(f32Tensor(outs[i], []int64{1, int64(m), int64(n)}, []int64{int64(m * n), int64(n), 1}),
				A, B, self, cs.alpha, cs.beta)
			SetThreads(prev)
			if err != nil {
				t.Fatal(err)
			}
			if took := f32SmallCalls.Load() > before; took != mode.on {
				t.Fatalf("%+v mode %+v: small kernel taken %v", cs, mode, took)
			}
		}
		diff := 0
		for i := range outs[0] {
			for j := 1; j < 3; j++ {
				if math.Float32bits(outs[0][i]) != math.Float32bits(outs[j][i]) {
					t.Fatalf("%+v element %d: 1 worker %v, 2 workers (mode %d) %v", cs, i, outs[0][i], j, outs[j][i])
				}
			}
			if d := math.Abs(float64(outs[0][i] - outs[3][i])); d > 2e-5*math.Sqrt(float64(k))*(1+math.Abs(float64(outs[3][i]))) {
				t.Fatalf("%+v element %d: small kernel %v, OpenBLAS %v", cs, i, outs[0][i], outs[3][i])
			}
			if outs[0][i] != outs[3][i] {
				diff++
			}
		}
		if diff == 0 && k > 16 {
			t.Errorf("%+v: identical to OpenBLAS everywhere", cs)
		}
	}
}

// TestF32SmallBiasFused: a float32 addmm whose self is a row broadcast (a Linear layer's
// bias) runs with the bias in the small kernel's epilogue (the counter), and gives the
// same bits as the same product with self materialised in every row (copied into out,
// then read back with beta), on 1 and 2 workers, for every layout, partial strips (n % 16
// from 1 to 15), long k (packed B strips) and alpha/beta. Self as a column broadcast or
// overlapping out keeps the copy.
func TestF32SmallBiasFused(t *testing.T) {
	if !f32SmallCPU {
		t.Skip("no AVX2+FMA")
	}
	defer setF32Dot(false)()
	defer func(s float64) { f32SmallSplitMin = s }(f32SmallSplitMin)
	r := rand.New(rand.NewSource(13))
	for ci, sh := range [][3]int{{64, 128, 64}, {64, 64, 128}, {64, 10, 64}, {7, 9, 5}, {13, 33, 300}, {40, 24, 1},
		{6, 130, 7}, {70, 8, 129}, {5, 31, 520}} {
		m, n, k := sh[0], sh[1], sh[2]
		for li := 0; li < 4; li++ {
			ta, tb := li&1 != 0, li&2 != 0
			alpha, beta := 1.0, 1.0
			switch (ci + li) % 3 {
			case 1:
				alpha, beta = 0.5, -2
			case 2:
				alpha, beta = -1.25, 0.75
			}
			a, b, bias := randF32(r, m*k), randF32(r, k*n), randF32(r, n)
			A := f32Tensor(a, []int64{1, int64(m), int64(k)}, []int64{int64(m * k), int64(k), 1})
			if ta {
				A = f32Tensor(a, []int64{1, int64(m), int64(k)}, []int64{int64(m * k), 1, int64(m)})
			}
			B := f32Tensor(b, []int64{1, int64(k), int64(n)}, []int64{int64(k * n), int64(n), 1})
			if tb {
				B = f32Tensor(b, []int64{1, int64(k), int64(n)}, []int64{int64(k * n), 1, int64(k)})
			}
			full := make([]float32, m*n)
			for i := range full {
				full[i] = bias[i%n]
			}
			row := f32Tensor(bias, []int64{1, int64(m), int64(n)}, []int64{0, 0, 1})
			mat := f32Tensor(full, []int64{1, int64(m), int64(n)}, []int64{int64(m * n), int64(n), 1})
			var outs [3][]float32
			for i, mode := range []struct {
				self  Tensor
				w     int
				fused bool
			}{{mat, 1, false}, {row, 1, true}, {row, 2, true}} {
				f32SmallSplitMin = 0
				outs[i] = make([]float32, m*n)
				prev := SetThreads(mode.w)
				before := f32SmallBiasCalls.Load()
				err := BatchedGemm(f32Tensor(outs[i], []int64{1, int64(m), int64(n)}, []int64{int64(m * n), int64(n), 1}),
					A, B, &mode.self, alpha, beta)
				SetThreads(prev)
				if err != nil {
					t.Fatal(err)
				}
				if took := f32SmallBiasCalls.Load() > before; took != mode.fused {
					t.Fatalf("%v ta=%v tb=%v mode %d: fused bias %v", sh, ta, tb, i, took)
				}
			}
			for i := range outs[0] {
				for j := 1; j < 3; j++ {
					if math.Float32bits(outs[0][i]) != math.Float32bits(outs[j][i]) {
						t.Fatalf("%v ta=%v tb=%v element %d: self copied %v, fused bias (mode %d) %v", sh, ta, tb, i,
							outs[0][i], j, outs[j][i])
					}
				}
			}
		}
	}
	// A column broadcast is not a bias row: copied, then read with beta.
	m, n, k := 16, 16, 16
	a, b, col := randF32(r, m*k), randF32(r, k*n), randF32(r, m)
	out := make([]float32, m*n)
	before := f32SmallBiasCalls.Load()
	self := f32Tensor(col, []int64{1, int64(m), int64(n)}, []int64{0, 1, 0})
	if err := BatchedGemm(f32Tensor(out, []int64{1, int64(m), int64(n)}, []int64{int64(m * n), int64(n), 1}),
		f32Tensor(a, []int64{1, int64(m), int64(k)}, []int64{int64(m * k), int64(k), 1}),
		f32Tensor(b, []int64{1, int64(k), int64(n)}, []int64{int64(k * n), int64(n), 1}), &self, 1, 1); err != nil {
		t.Fatal(err)
	}
	if f32SmallBiasCalls.Load() != before {
		t.Fatal("column broadcast taken as a bias row")
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for kk := 0; kk < k; kk++ {
				s += float64(a[i*k+kk]) * float64(b[kk*n+j])
			}
			if d := math.Abs(float64(out[i*n+j]) - s - float64(col[i])); d > 1e-5 {
				t.Fatalf("column broadcast (%d, %d): %v, want %v", i, j, out[i*n+j], s+float64(col[i]))
			}
		}
	}
}
