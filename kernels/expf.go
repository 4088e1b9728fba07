package kernels

import "math"

// expFloat32 is exp(x) in float32 arithmetic, within about one ulp of the correctly rounded
// value: expf32.h's hp_expf32 operation for operation (each product and sum rounded to
// float32, none fused: the explicit conversions forbid fusing on every architecture), so
// the Go and C softmax rows give the same bits. See expf32.h for the method.
func expFloat32(x float32) float32 {
	xc := x
	if !(xc > -110) { // NaN too
		xc = -110
	}
	if !(xc < 89) {
		xc = 89
	}
	const magic = 12582912.0 // 1.5 * 2^23
	kf := float32(float32(float32(xc*1.44269502)+magic) - magic)
	r := float32(xc - float32(kf*0.693145751953125))
	r = float32(r - float32(kf*1.42860677e-06))
	q := float32(1.98412701e-4)
	q = float32(float32(q*r) + 1.38888892e-3)
	q = float32(float32(q*r) + 8.33333377e-3)
	q = float32(float32(q*r) + 4.16666679e-2)
	q = float32(float32(q*r) + 1.66666672e-1)
	q = float32(float32(q*r) + 0.5)
	p := float32(r + float32(float32(r*r)*q))
	y := float32(1 + p)
	k := int32(kf)
	k1 := k >> 1
	k2 := k - k1
	s1 := math.Float32frombits(uint32(k1+127) << 23)
	s2 := math.Float32frombits(uint32(k2+127) << 23)
	y = float32(float32(y*s1) * s2)
	if x != x {
		return x
	}
	return y
}
