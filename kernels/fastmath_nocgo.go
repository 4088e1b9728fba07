//go:build !cgo

package kernels

// installFast: without cgo the Go implementations of elementwise_ops.go stay in place.
func installFast() {}
