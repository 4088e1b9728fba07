//go:build !cgo

package kernels

// isaLevel without cgo: no C kernels, the Go code only; HPUSIM_ISA has nothing to cap.
func isaLevel() int {
	switch isaEnv {
	case "avx2":
		return 2
	case "generic":
		return 1
	}
	return 3
}
