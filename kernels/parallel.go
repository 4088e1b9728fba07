package kernels

import (
	"fmt"
	"runtime"
	"sync"
)

// Grain is the smallest amount of element work worth a goroutine of its own.
const Grain = 32 * 1024

// KernelPanic carries a panic from a worker goroutine back to the caller's goroutine,
// where the C ABI turns it into an error; a panic must never kill the host process.
type KernelPanic struct{ Value any }

func (p KernelPanic) Error() string { return fmt.Sprintf("kernel panic: %v", p.Value) }

// Workers is how many goroutines a large kernel uses.
func Workers() int { return runtime.GOMAXPROCS(0) }

// ParallelFor runs fn over [0,n) split in contiguous chunks, one per worker, when the
// total work (n*cost elements) is large enough; otherwise inline. A panic in any chunk
// is re-raised in the caller once every chunk has stopped.
func ParallelFor(n int64, cost int64, fn func(lo, hi int64)) {
	if n <= 0 {
		return
	}
	w := int64(Workers())
	if cost < 1 {
		cost = 1
	}
	if w <= 1 || n*cost < 2*Grain || n < 2 {
		fn(0, n)
		return
	}
	if w > n {
		w = n
	}
	chunk := (n + w - 1) / w
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first any
	run := func(lo, hi int64) {
		defer func() {
			if r := recover(); r != nil {
				mu.Lock()
				if first == nil {
					first = r
				}
				mu.Unlock()
			}
		}()
		fn(lo, hi)
	}
	// The first chunk runs on the calling goroutine: one goroutine fewer to start and
	// to wait for.
	for lo := chunk; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int64) {
			defer wg.Done()
			run(lo, hi)
		}(lo, hi)
	}
	run(0, min(chunk, n))
	wg.Wait()
	if first != nil {
		panic(KernelPanic{first})
	}
}
