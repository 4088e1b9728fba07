package kernels

import "unsafe"

// bfloat16 GEMM by VDPBF16PS (gemm_bf16dot_cgo.go): each product of two bfloat16 values
// is exact in float32 and the sums accumulate in float32, as in the widening path, but
// nothing is widened in memory and the instruction does twice the multiply-adds of a
// float32 FMA. Like every VDPBF16PS user (oneDNN's bf16 matmul among them) it treats
// subnormal inputs and sums as zero; their magnitude (< 1.2e-38) is far below bfloat16's
// tolerances. Each element's sum runs in k order in fixed blocks, so results do not
// depend on how the work is split.

// gemmBF16Dot enables the VDPBF16PS path where the CPU has it (a switch for tests and
// benchmarks comparing it with the widening path).
var gemmBF16Dot = true

func useBF16Dot(a, b Tensor) bool {
	return gemmBF16Dot && bf16DotCPU && a.DType == BFloat16 && b.DType == BFloat16
}

// bf16Scratch returns a scratch buffer of at least n uint16s (from the float32 free list).
func bf16Scratch(n int) (*[]float32, []uint16) {
	f := getF32((n + 1) / 2)
	return f, unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(*f))), n)
}
