//go:build !cgo || !amd64

package kernels

func attOnlineSoftmax(s []float32, rows, cols int64, m, l, alpha []float32) {
	attOnlineSoftmaxGo(s, rows, cols, m, l, alpha)
}

func attProbs(p []float32, rows, cols int64, lse []float32) { attProbsGo(p, rows, cols, lse) }

func attDS(p, dp []float32, rows, cols int64, delta []float32) { attDSGo(p, dp, rows, cols, delta) }
