package kernels

import "sync"

// convScratch is a small free list of scratch buffers (convolution's column matrices,
// gathered gradients and GEMM results, the bf16 GEMM's float32 panels). Requests of several sizes alternate within a
// training step (one layer's columns, the next layer's), so a buffer that is too small
// for one request stays listed for the next instead of being dropped as sync.Pool would.
type convScratch[T gemmFloat] struct {
	mu   sync.Mutex
	free []*[]T
}

const convScratchKeep = 8 // buffers kept per element type

var (
	convScratch32 convScratch[float32]
	convScratch64 convScratch[float64]
)

func (s *convScratch[T]) get(n int) *[]T {
	s.mu.Lock()
	best := -1
	for i, b := range s.free {
		if cap(*b) >= n && (best < 0 || cap(*b) < cap(*s.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := s.free[best]
		s.free[best] = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		s.mu.Unlock()
		*b = (*b)[:n]
		return b
	}
	s.mu.Unlock()
	b := make([]T, n)
	return &b
}

func (s *convScratch[T]) put(b *[]T) {
	if b == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) < convScratchKeep {
		s.free = append(s.free, b)
		return
	}
	// Full: replace the smallest buffer if this one is larger.
	small := 0
	for i, f := range s.free {
		if cap(*f) < cap(*s.free[small]) {
			small = i
		}
	}
	if cap(*b) > cap(*s.free[small]) {
		s.free[small] = b
	}
}

// getConvBuf returns a scratch buffer of length n (contents undefined); return it with
// putConvBuf.
func getConvBuf[T gemmFloat](n int) *[]T {
	var z T
	if _, ok := any(z).(float32); ok {
		return any(convScratch32.get(n)).(*[]T)
	}
	return any(convScratch64.get(n)).(*[]T)
}

func putConvBuf[T gemmFloat](b *[]T) {
	switch v := any(b).(type) {
	case *[]float32:
		convScratch32.put(v)
	case *[]float64:
		convScratch64.put(v)
	}
}
