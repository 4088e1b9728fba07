//go:build !cgo || !amd64

package kernels

import "unsafe"

// Without cgo on amd64 there is no blocked bfloat16 kernel (bf16DotCPU is false, so
// nothing calls these).
const (
	gbMR = 6
	gbNR = 64
)

// hpusim_gb_team's parameter indices (gemm_bf16_blocked_cgo.go), so that
// bgemmBF16Blocked compiles.
const (
	gbtB = iota
	gbtM
	gbtN
	gbtK
	gbtRows
	gbtCols
	gbtASB
	gbtARS
	gbtACS
	gbtAIn
	gbtBSB
	gbtBRS
	gbtBCS
	gbtOSB
	gbtLDO
	gbtSSB
	gbtLDS
	gbtTrans
	gbtPALen
	gbtPBLen
	gbtBatchPer
	gbtParallel
	gbtByCols
	gbtTilePer
	gbtWorkers
	gbtNParams
)

func gbTeam(threads int, p *[gbtNParams]int64, a, b unsafe.Pointer, pa, pb []uint16, c []float32, o, s unsafe.Pointer,
	alpha, beta float32) int {
	panic(noDotKernel)
}

// Nor the AVX2 one (gemm_bf16_avx2_cgo.go).
const (
	b2MR = 6
	b2NR = 16
)

var b2CPU = false

func b2PackA(dst []float32, a unsafe.Pointer, rs, cs int64, k, r0, r1 int) { panic(noDotKernel) }
func b2PackB(dst []float32, b unsafe.Pointer, rs, cs int64, k, c0, c1 int) { panic(noDotKernel) }
func b2Gemm(pa, pb []float32, m, n, k int, c []float32, ldc int)           { panic(noDotKernel) }
