package kernels

import (
	"math"
	"math/rand"
	"testing"
)

// The tile exp is within a few ulp of exp, and the build's row kernels (C under cgo)
// agree with the Go loops.
func TestAttentionRowKernels(t *testing.T) {
	for _, x := range []float32{-87, -20, -1.5, -1e-3, 0, 0.5, 3, 40, 88} {
		want := math.Exp(float64(x))
		if got := float64(attExpf(x)); math.Abs(got-want) > 4e-7*want {
			t.Fatalf("attExpf(%v) = %v, want %v", x, got, want)
		}
	}
	if attExpf(negInf) != 0 {
		t.Fatal("exp(-inf) must be 0")
	}
	r := rand.New(rand.NewSource(1))
	rows, cols := int64(5), int64(37)
	s := make([]float32, rows*cols)
	for i := range s {
		s[i] = float32(r.NormFloat64() * 3)
	}
	s[cols+2] = negInf
	for j := int64(0); j < cols; j++ {
		s[3*cols+j] = negInf // a fully masked row
	}
	a, b := append([]float32(nil), s...), append([]float32(nil), s...)
	m1, l1, al1 := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	m2, l2, al2 := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	for i := range m1 {
		m1[i], m2[i] = -1, -1
	}
	attOnlineSoftmax(a, rows, cols, m1, l1, al1)
	attOnlineSoftmaxGo(b, rows, cols, m2, l2, al2)
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6*math.Abs(float64(b[i])) {
			t.Fatalf("element %d: %v vs %v", i, a[i], b[i])
		}
	}
	for i := range m1 {
		if m1[i] != m2[i] || math.Abs(float64(l1[i]-l2[i])) > 1e-5*float64(l2[i]) {
			t.Fatalf("row %d statistics differ: %v/%v vs %v/%v", i, m1[i], l1[i], m2[i], l2[i])
		}
	}
}
