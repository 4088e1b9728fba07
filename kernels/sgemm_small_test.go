package kernels

import (
	"math/rand"
	"testing"
	"unsafe"
)

// BenchmarkSgemmSerial times one single-threaded float32 GEMM (blasGemmSerial: OpenBLAS,
// or the AVX-512 micro-kernel where it stands in) at the conv layers' per-sample shapes
// and at 256^3 (GFLOP/s of one core).
func BenchmarkSgemmSerial(b *testing.B) {
	for _, sh := range [][3]int{{32, 196, 144}, {32, 1568, 144}, {256, 256, 256}} {
		m, n, k := sh[0], sh[1], sh[2]
		r := rand.New(rand.NewSource(1))
		x, y, out := randF32(r, m*k), randF32(r, k*n), make([]float32, m*n)
		b.Run(itoa(m)+"x"+itoa(n)+"x"+itoa(k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				blasGemmSerial(false, false, m, n, k, float32(1), unsafe.Pointer(&x[0]), k,
					unsafe.Pointer(&y[0]), n, 0, unsafe.Pointer(&out[0]), n)
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
