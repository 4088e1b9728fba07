//go:build !cgo

package kernels

// installFast: without cgo the Go implementations of elementwise_ops.go stay in place.
func installFast() {}

// philoxBlocks writes the words of blocks b0, b0+1, ... of s into out (4 per block).
func philoxBlocks(out []uint32, s Stream, b0 uint64) {
	for i := 0; i+4 <= len(out); i += 4 {
		w := s.Block(b0 + uint64(i/4))
		copy(out[i:i+4], w[:])
	}
}

func bernWords(o []float32, w []uint32, thr float64) {
	for i := range o {
		o[i] = sel32(float64(w[i]) < thr, 1, 0)
	}
}

func dropoutWords(o []float32, m []uint8, x []float32, w []uint32, thr, scale float64) {
	for i := range o {
		k := 0.0
		if float64(w[i]) < thr {
			k = 1
		}
		m[i] = uint8(k)
		o[i] = float32(float64(x[i]) * k * scale)
	}
}

// u8ToF32 converts bools (bm = 1) or uint8s (bm = 0xff) to float32.
func u8ToF32(o []float32, a []uint8, bm uint8) {
	for i, v := range a[:len(o)] {
		o[i] = float32(v & bm)
	}
}

// geluAVX2 without cgo: the Go loops only.
func geluAVX2(forms int) int { return 0 }
