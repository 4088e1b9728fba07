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
	for _, sh := range [][3]int{{64, 64, 16}, {64, 16, 64}, {64, 64, 63}, {16, 64, 64}, {5, 9, 3}, {7, 23, 31},
		{4, 8, 1}, {13, 17, 256}, {33, 40, 100}, {6, 130, 7}} {
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
			blasGemmSerial(ta, tb, m, n, k, float32(1), unsafe.Pointer(&a[0]), lda, unsafe.Pointer(&b[0]), ldb, 0,
				unsafe.Pointer(&want[0]), ldc)
			f32SmallGemm(ta, tb, m, n, k, unsafe.Pointer(&a[0]), lda, unsafe.Pointer(&b[0]), ldb, unsafe.Pointer(&got[0]), ldc)
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
				tol := float64(k) * 6e-8 * scale
				if math.Abs(float64(got[i])-ref) > tol || math.Abs(float64(want[i])-ref) > tol {
					t.Fatalf("%v ta=%v tb=%v: element (%d, %d): %v, OpenBLAS %v, float64 %v", sh, ta, tb, row, col,
						got[i], want[i], ref)
				}
			}
		}
	}
	for _, sh := range [][3]int{{2, 8, 8}, {8, 4, 8}, {8, 8, 0}, {8, 8, 300}, {64, 64, 64 + 1}, {64, 64, 128}} {
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
