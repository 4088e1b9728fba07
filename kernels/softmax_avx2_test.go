package kernels

import (
	"math"
	"math/rand"
	"testing"
)

// expFloat32 is +0 below -104 (the AVX2 softmax rows zero those lanes instead of taking
// the underflowing product): every float32 in [-110, -104) and a few beyond.
func TestExpF32ZeroBelow(t *testing.T) {
	for x := float32(-104); x >= -110; x = math.Nextafter32(x, -200) {
		if x == -104 {
			continue
		}
		if v := expFloat32(x); v != 0 || math.Signbit(float64(v)) {
			t.Fatalf("expFloat32(%v) = %v, want +0", x, v)
		}
	}
	for _, x := range []float32{-110.5, -1e4, -3e38, float32(math.Inf(-1))} {
		if v := expFloat32(x); v != 0 || math.Signbit(float64(v)) {
			t.Fatalf("expFloat32(%v) = %v, want +0", x, v)
		}
	}
}

// softmaxTestRows fills M rows of N with one kind of content per row: normal values,
// causal -inf masks, a row of -inf, NaN, +inf, huge values, exps in the subnormal range
// and around the -104 cutoff, signed zeros.
func softmaxTestRows(rng *rand.Rand, M, N int64) []float32 {
	x := make([]float32, M*N)
	inf := float32(math.Inf(1))
	for m := int64(0); m < M; m++ {
		r := x[m*N : (m+1)*N]
		for i := range r {
			r[i] = float32(rng.NormFloat64() * 3)
		}
		switch m % 12 {
		case 1: // causal
			for i := m%N + 1; i < N; i++ {
				r[i] = -inf
			}
		case 2:
			for i := range r {
				r[i] = -inf
			}
		case 3:
			r[rng.Intn(int(N))] = float32(math.NaN())
		case 4:
			r[rng.Intn(int(N))] = inf
		case 5:
			for i := range r {
				r[i] = float32(rng.NormFloat64() * 1e38)
			}
		case 6: // exps from 1 down to the subnormal range and past the cutoff
			for i := range r {
				r[i] = -float32(rng.Float64() * 110)
			}
			r[0] = 0
		case 7:
			for i := range r {
				r[i] = math.Nextafter32(-104+float32(rng.Intn(5)-2)*1e-5, 0)
				if rng.Intn(3) == 0 {
					r[i] = -103.97208
				}
			}
			r[rng.Intn(int(N))] = 0
		case 8:
			for i := range r {
				r[i] = float32(math.Copysign(0, float64(rng.Intn(2)*2-1)))
			}
		case 9:
			for i := range r {
				r[i] = float32(rng.NormFloat64()*50) - 1e4
			}
		}
	}
	return x
}

var softmaxTestNs = []int64{1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 40, 47, 48, 63, 64, 65, 96, 127, 128, 129, 1000}

func firstDiff32(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return i
		}
	}
	return -1
}

// The C rows (AVX2 intrinsics where the CPU has them) give the Go rows' bits for every row
// kind and length, softmax and log-softmax, over the last and another dim.
func TestSoftmaxRowsAVX2MatchGo(t *testing.T) {
	rng := rand.New(rand.NewSource(20))
	for _, N := range softmaxTestNs {
		M := int64(36)
		x := softmaxTestRows(rng, M, N)
		for _, log := range []bool{false, true} {
			for _, last := range []bool{true, false} {
				o := SoftmaxOpts{LastDim: last, Inner: 5}
				a, b := make([]float32, M*N), make([]float32, M*N)
				if err := Softmax(log, f32T(a, M, N), f32T(x, M, N), o); err != nil {
					t.Fatal(err)
				}
				noCSoftmax = true
				err := Softmax(log, f32T(b, M, N), f32T(x, M, N), o)
				noCSoftmax = false
				if err != nil {
					t.Fatal(err)
				}
				if i := firstDiff32(a, b); i >= 0 {
					t.Fatalf("N=%d log=%v last=%v row %d col %d (x %v): C %v, Go %v", N, log, last, int64(i)/N, int64(i)%N,
						x[i], a[i], b[i])
				}
			}
		}
	}
}

func TestSoftmaxBackwardRowsAVX2MatchGo(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	for _, N := range softmaxTestNs {
		M := int64(36)
		x := softmaxTestRows(rng, M, N)
		for _, log := range []bool{false, true} {
			y := make([]float32, M*N)
			if err := Softmax(log, f32T(y, M, N), f32T(x, M, N), SoftmaxOpts{LastDim: true, Inner: 1}); err != nil {
				t.Fatal(err)
			}
			g := make([]float32, M*N)
			for i := range g {
				g[i] = float32(rng.NormFloat64())
				if i%97 == 5 {
					g[i] = float32(rng.NormFloat64() * 1e30)
				}
			}
			a, b := make([]float32, M*N), make([]float32, M*N)
			if err := SoftmaxBackward(log, f32T(a, M, N), f32T(g, M, N), f32T(y, M, N), true); err != nil {
				t.Fatal(err)
			}
			noCSoftmax = true
			err := SoftmaxBackward(log, f32T(b, M, N), f32T(g, M, N), f32T(y, M, N), true)
			noCSoftmax = false
			if err != nil {
				t.Fatal(err)
			}
			if i := firstDiff32(a, b); i >= 0 {
				t.Fatalf("N=%d log=%v row %d col %d: C %v, Go %v", N, log, int64(i)/N, int64(i)%N, a[i], b[i])
			}
			// in place (the output over the gradient) gives the same bits
			c := append([]float32(nil), g...)
			if err := SoftmaxBackward(log, f32T(c, M, N), f32T(c, M, N), f32T(y, M, N), true); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff32(a, c); i >= 0 {
				t.Fatalf("N=%d log=%v in place: element %d %v, out of place %v", N, log, i, c[i], a[i])
			}
		}
	}
}

// One worker and two give the same bits (rows never straddle a split).
func TestSoftmaxWorkersBitEqual(t *testing.T) {
	rng := rand.New(rand.NewSource(22))
	for _, N := range []int64{7, 64, 1000} {
		M := 4 * Grain / N
		x := softmaxTestRows(rng, M, N)
		g := make([]float32, M*N)
		for i := range g {
			g[i] = float32(rng.NormFloat64())
		}
		for _, log := range []bool{false, true} {
			var outs [2][2][]float32
			for w := 1; w <= 2; w++ {
				prev := SetThreads(w)
				y, gi := make([]float32, M*N), make([]float32, M*N)
				err := Softmax(log, f32T(y, M, N), f32T(x, M, N), SoftmaxOpts{LastDim: true, Inner: 1})
				if err == nil {
					err = SoftmaxBackward(log, f32T(gi, M, N), f32T(g, M, N), f32T(y, M, N), true)
				}
				SetThreads(prev)
				if err != nil {
					t.Fatal(err)
				}
				outs[w-1] = [2][]float32{y, gi}
			}
			for k := 0; k < 2; k++ {
				if i := firstDiff32(outs[0][k], outs[1][k]); i >= 0 {
					t.Fatalf("N=%d log=%v output %d element %d: 1 worker %v, 2 workers %v", N, log, k, i, outs[0][k][i],
						outs[1][k][i])
				}
			}
		}
	}
}
