//go:build cgo && !noblas

package kernels

import (
	"math"
	"math/rand"
	"sync"
	"testing"
	"unsafe"
)

// TestBLASThreadedMatchesSerial: a product large enough for OpenBLAS's own threads agrees
// with one single-threaded call (to rounding: which kernel edge handles an element
// differs), also while other goroutines make single-threaded calls, and OpenBLAS is
// single-threaded again afterwards.
func TestBLASThreadedMatchesSerial(t *testing.T) {
	if Workers() < 2 {
		t.Skip("needs 2 workers")
	}
	defer setF32Dot(false)() // OpenBLAS's own paths, whatever the CPU
	const n = 512            // n^3 = blasThreadedMin
	r := rand.New(rand.NewSource(3))
	x, y := randF32(r, n*n), randF32(r, n*n)
	want := make([]float32, n*n)
	blasGemmSerial(false, true, n, n, n, float32(1), unsafe.Pointer(&x[0]), n, unsafe.Pointer(&y[0]), n, 0, unsafe.Pointer(&want[0]), n)
	got := make([]float32, n*n)
	if !blasGemmThreaded(Workers(), false, true, n, n, n, float32(1), unsafe.Pointer(&x[0]), n, unsafe.Pointer(&y[0]), n, 0, unsafe.Pointer(&got[0]), n) {
		t.Fatal("a 512^3 product with nothing else in flight did not take OpenBLAS's threads")
	}
	closeF32(t, got, want, 1e-4) // k=512 sums of terms up to ~1: cancellation
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			out := make([]float32, n*n)
			small := make([]float32, 64*64)
			for it := 0; it < 3; it++ {
				if g%2 == 0 {
					blasGemm(false, true, n, n, n, float32(1), unsafe.Pointer(&x[0]), n, unsafe.Pointer(&y[0]), n, 0, unsafe.Pointer(&out[0]), n)
					for i := range out {
						if math.Abs(float64(out[i]-want[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
							t.Errorf("goroutine %d: element %d: %v, want %v", g, i, out[i], want[i])
							return
						}
					}
					continue
				}
				blasGemmSerial(false, false, 64, 64, 64, float32(1), unsafe.Pointer(&x[0]), 64, unsafe.Pointer(&y[0]), 64, 0, unsafe.Pointer(&small[0]), 64)
			}
		}(g)
	}
	wg.Wait()
	blasMu.RLock()
	defer blasMu.RUnlock()
	if th := blasThreads(); th != 1 {
		t.Fatalf("OpenBLAS left at %d threads", th)
	}
}

// TestSerialBLASKeepsProductsOffThreads: after SerialBLAS (lazy mode) even the largest
// product runs on hpusim's split.
func TestSerialBLASKeepsProductsOffThreads(t *testing.T) {
	SerialBLAS()
	defer blasThreadsOff.Store(false)
	const n = 512
	x, y, out := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	if blasGemmThreaded(2, false, false, n, n, n, float32(1), unsafe.Pointer(&x[0]), n, unsafe.Pointer(&y[0]), n, 0, unsafe.Pointer(&out[0]), n) {
		t.Fatal("a product ran on OpenBLAS's threads after SerialBLAS")
	}
}
