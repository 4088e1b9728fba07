package kernels

import "testing"

// The AVX-512 bfloat16 batch-norm kernels (bn_bf16_cgo.go) replace the portable C ones
// when the CPU has AVX-512; TestBatchNormBF16FastMatchesFloat32 checks whichever runs by
// default, this runs it once more on the other.
func TestBatchNormBF16PortableMatchesFloat32(t *testing.T) {
	saved := bnBF16Vec
	defer func() { bnBF16Vec = saved }()
	bnBF16Vec = !saved && f32DotCPU
	TestBatchNormBF16FastMatchesFloat32(t)
}
