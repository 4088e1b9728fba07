//go:build !cgo || !amd64

package kernels

// Without cgo there are no C kernels, so no C team to hush.
func hushTeam() {}
