package kernels

import "math"

// Row kernels of the attention tiles shared by the cgo and pure-Go builds: the Go loops
// (attention_nocgo.go uses them directly; attention_cgo.go runs the same arithmetic in C).

// attExpf is exp in float32 for the attention tiles: 2^k * e^r with |r| <= ln2/2 and a
// degree-6 polynomial (about 2 ulp); exp(-inf) = 0.
func attExpf(x float32) float32 {
	if x < -87.3 {
		return 0
	}
	if x > 88.3 {
		x = 88.3
	}
	k := float32(math.RoundToEven(float64(x * 1.44269504)))
	r := x - k*0.693359375
	r -= k * -2.12194440e-4
	p := float32(1.0/720)*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	return p * pow2f(int32(k))
}

func pow2f(k int32) float32 {
	return math.Float32frombits(uint32(k+127) << 23)
}

func attOnlineSoftmaxGo(s []float32, rows, cols int64, m, l, alpha []float32) {
	for r := int64(0); r < rows; r++ {
		row := s[r*cols : (r+1)*cols]
		mx := negInf
		for _, x := range row {
			if x > mx {
				mx = x
			}
		}
		mn := max(m[r], mx)
		if mn == negInf {
			clear(row)
			alpha[r] = 1
			continue
		}
		a := attExpf(m[r] - mn)
		for j, x := range row {
			row[j] = attExpf(x - mn)
		}
		sum := lanesSum(row)
		alpha[r] = a
		l[r] = l[r]*a + sum
		m[r] = mn
	}
}

func attProbsGo(p []float32, rows, cols int64, lse []float32) {
	for r := int64(0); r < rows; r++ {
		row := p[r*cols : (r+1)*cols]
		if lse[r] == negInf {
			clear(row)
			continue
		}
		for j, x := range row {
			row[j] = attExpf(x - lse[r])
		}
	}
}

func attDSGo(p, dp []float32, rows, cols int64, delta []float32) {
	for r := int64(0); r < rows; r++ {
		pr, dr := p[r*cols:(r+1)*cols], dp[r*cols:(r+1)*cols]
		d := delta[r]
		for j := range pr {
			pr[j] *= dr[j] - d
		}
	}
}

// lanesSum sums in 16 partial lanes, then the lanes as a tree (lane k with k+8, k+4, k+2,
// k+1): the C loops' order.
func lanesSum(row []float32) float32 {
	var a [16]float32
	j := 0
	for ; j+16 <= len(row); j += 16 {
		for k := 0; k < 16; k++ {
			a[k] += row[j+k]
		}
	}
	for t := 0; j < len(row); j, t = j+1, t+1 {
		a[t] += row[j]
	}
	for w := 8; w >= 1; w /= 2 {
		for k := 0; k < w; k++ {
			a[k] += a[k+w]
		}
	}
	return a[0]
}
