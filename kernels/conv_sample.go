package kernels

import (
	"sort"
	"sync"
	"unsafe"
)

// Convolution one sample at a time, for operands stored densely in the compute type (the
// float32 models' case). Each worker takes a range of samples and, per sample and group,
// builds the [Kc, P] column matrix in its own small buffer (cache-resident) and runs one
// single-threaded GEMM straight into the sample's output planes, so no [O, m, P] staging
// buffer or second pass over the output is needed:
//
//	forward:      Y_n[Og, P]   = W_g[Og, Kc] @ cols_n[Kc, P]              (then bias)
//	weight grad:  dW_w[Og, Kc] += dY_n[Og, P] @ cols_n[Kc, P]^T   (per worker, summed after)
//	input grad:   dcols[Kc, P] = W_g^T @ dY_n[Og, P], then col2im into dX_n

// convPerSample enables the per-sample path (a switch for benchmarks).
var convPerSample = true

// sampleConvOK reports whether every tensor can be addressed as [N][dense planes] of T.
func sampleConvOK[T gemmFloat](ts ...*Tensor) bool {
	if !convPerSample {
		return false
	}
	for _, t := range ts {
		if t == nil {
			continue
		}
		if !nativeOf[T](t.DType) || !densePlanes(*t) {
			return false
		}
	}
	return true
}

// sampleSlice is sample n of the dense-planed t as a slice (of bfloat16 bits for T uint16).
func sampleSlice[T colElem](t Tensor, n int) []T {
	per := t.Sizes[1] * t.Sizes[2] * t.Sizes[3]
	return unsafe.Slice((*T)(at(t.Ptr, int64(n)*t.Strides[0]*int64(t.DType.Size()))), per)
}

// sampleCost is the work of one sample, for splitting samples over workers.
func sampleCost(g convGeom) int64 { return int64(max(g.Og*g.Kc*g.P, 1)) }

func convFwdSamples[T gemmFloat](out, in Tensor, w, b []T, g convGeom, p ConvParams) {
	if w32, ok := any(w).([]float32); ok && convDirectFwdOK(g, p) {
		convFwdDirect(out, in, w32, any(b).([]float32), g, p) // conv_direct.go
		return
	}
	if w32, ok := any(w).([]float32); ok && convLanesFwdOK(g, p) {
		convFwdLanes(out, in, w32, any(b).([]float32), g, p) // conv_lanes.go
		return
	}
	if w32, ok := any(w).([]float32); ok && convF32DotOK(g, p) {
		convFwdF32Dot(out, in, w32, any(b).([]float32), g, p) // conv_f32dot.go
		return
	}
	pw := pointwise(g, p)
	ParallelFor(int64(g.N), sampleCost(g), func(lo, hi int64) {
		var cb *[]T
		if !pw {
			cb = getConvBuf[T](g.Kc * g.P)
			defer putConvBuf(cb)
		}
		for n := int(lo); n < int(hi); n++ {
			x, y := sampleSlice[T](in, n), sampleSlice[T](out, n)
			for gi := 0; gi < g.G; gi++ {
				col := groupCols(x, cb, g, p, gi, pw)
				yg := y[gi*g.Og*g.P : (gi+1)*g.Og*g.P]
				blasGemmSerial(false, false, g.Og, g.P, g.Kc, T(1), ptrOf(w[gi*g.Og*g.Kc:]), g.Kc,
					ptrOf(col), g.P, T(0), ptrOf(yg), g.P)
			}
			if b != nil {
				convBiasAdd(y, b, g.O, g.P)
			}
		}
	})
}

// convBwdSamples computes the requested gradients; dw (O*Kc, zeroed) and db (O) are the
// compute-type results the caller stores.
func convBwdSamples[T gemmFloat](gin *Tensor, dw, db []T, gout, in Tensor, w []T, g convGeom, p ConvParams) {
	if w32, ok := any(w).([]float32); ok && convDirectBwdOK(g, p, gin != nil, dw != nil) {
		convBwdDirect(gin, any(dw).([]float32), any(db).([]float32), gout, in, w32, g, p) // conv_direct.go
		return
	}
	if w32, ok := any(w).([]float32); ok && convF32GradOK(g, p, gin != nil) {
		convBwdF32Grad(gin, any(dw).([]float32), any(db).([]float32), gout, in, w32, g, p) // conv_f32grad.go
		return
	}
	pw := pointwise(g, p)
	var sums []T
	if db != nil {
		sums = make([]T, g.N*g.O)
	}
	var parts gradParts[T] // one dW partial per chunk of samples
	ParallelFor(int64(g.N), sampleCost(g), func(lo, hi int64) {
		var cb *[]T
		if !pw || gin != nil {
			cb = getConvBuf[T](g.Kc * g.P)
			defer putConvBuf(cb)
		}
		var pdw []T
		if dw != nil {
			pdw = make([]T, len(dw))
		}
		for n := int(lo); n < int(hi); n++ {
			dy := sampleSlice[T](gout, n)
			if sums != nil {
				convRowSums(dy, sums[n*g.O:(n+1)*g.O], g.O, g.P)
			}
			if pdw != nil && g.P > 0 && g.Kc > 0 {
				x := sampleSlice[T](in, n)
				for gi := 0; gi < g.G; gi++ {
					col := groupCols(x, cb, g, p, gi, pw)
					blasGemmSerial(false, true, g.Og, g.Kc, g.P, T(1), ptrOf(dy[gi*g.Og*g.P:]), g.P,
						ptrOf(col), g.P, T(1), ptrOf(pdw[gi*g.Og*g.Kc:]), g.Kc)
				}
			}
			if gin != nil {
				dx := sampleSlice[T](*gin, n)
				for gi := 0; gi < g.G; gi++ {
					if g.P == 0 || g.Kc == 0 || g.Og == 0 {
						clear(dx[gi*g.Cg*g.H*g.W : (gi+1)*g.Cg*g.H*g.W])
						continue
					}
					dcol := *cb
					if pw {
						dcol = dx[gi*g.Cg*g.P : (gi+1)*g.Cg*g.P]
					}
					blasGemmSerial(true, false, g.Kc, g.P, g.Og, T(1), ptrOf(w[gi*g.Og*g.Kc:]), g.Kc,
						ptrOf(dy[gi*g.Og*g.P:]), g.P, T(0), ptrOf(dcol), g.P)
					if !pw {
						col2imSample(dx, dcol, g, p, gi)
					}
				}
			}
		}
		if pdw != nil {
			parts.add(lo, pdw)
		}
	})
	parts.sumInto(dw)
	addSampleSums(db, sums, g.N, g.O)
}

// gradParts collects the workers' partial weight gradients, one per chunk of samples.
type gradParts[T gemmFloat] struct {
	mu    sync.Mutex
	parts []gradPart[T]
}

type gradPart[T gemmFloat] struct {
	lo int64 // the chunk's first sample
	dw []T
}

func (g *gradParts[T]) add(lo int64, dw []T) {
	g.mu.Lock()
	g.parts = append(g.parts, gradPart[T]{lo, dw})
	g.mu.Unlock()
}

// sumInto adds the partials into dw (when non-nil) in sample order, so the sum is the
// same whatever order the workers finished in.
func (g *gradParts[T]) sumInto(dw []T) {
	if dw == nil {
		return
	}
	sort.Slice(g.parts, func(a, b int) bool { return g.parts[a].lo < g.parts[b].lo })
	for _, pt := range g.parts {
		for i, v := range pt.dw {
			dw[i] += v
		}
	}
}

// addSampleSums adds the per-sample channel sums (sums[n*o + c]) into db (when non-nil)
// in sample order.
func addSampleSums[T gemmFloat](db, sums []T, n, o int) {
	for i := 0; i < n && db != nil; i++ {
		for c := 0; c < o; c++ {
			db[c] += sums[i*o+c]
		}
	}
}

// groupCols is group gi's column matrix (Kc x P) of sample x: x's own channels for a
// pointwise convolution, else im2col into the scratch buffer cb.
func groupCols[T gemmFloat](x []T, cb *[]T, g convGeom, p ConvParams, gi int, pw bool) []T {
	if pw {
		return x[gi*g.Cg*g.P : (gi+1)*g.Cg*g.P]
	}
	im2colSample(*cb, x, g, p, gi)
	return *cb
}

// convNoC makes the helpers below run their Go loops even for float32 (for tests
// comparing them with the C versions in conv_cgo.go).
var convNoC = false

// im2colSample fills cb ([Kc, P]) with group gi's columns of sample x.
func im2colSample[T gemmFloat](cb, x []T, g convGeom, p ConvParams, gi int) {
	if c, ok := any(cb).([]float32); ok && !convNoC {
		im2colF32(c, any(x).([]float32), g, p, gi)
		return
	}
	im2colRows(cb, x, g, p, gi, 1, 0, g.Kc)
}

// col2imSample sets group gi's planes of sample dx to the sums of dcol's ([Kc, P]) entries.
func col2imSample[T gemmFloat](dx, dcol []T, g convGeom, p ConvParams, gi int) {
	if d, ok := any(dx).([]float32); ok && !convNoC {
		col2imF32(d, any(dcol).([]float32), g, p, gi)
		return
	}
	col2imRows(dx, dcol, g, p, gi, 1, 0, g.Cg)
}

// convBiasAdd adds b[o] to row o of y's o rows of p elements.
func convBiasAdd[T gemmFloat](y, b []T, o, p int) {
	if f, ok := any(y).([]float32); ok && !convNoC {
		convBiasAddF32(f, any(b).([]float32), o, p)
		return
	}
	convBiasAddGo(y, b, o, p)
}

func convBiasAddGo[T gemmFloat](y, b []T, o, p int) {
	for i := 0; i < o; i++ {
		row, bv := y[i*p:(i+1)*p], b[i]
		for j := range row {
			row[j] += bv
		}
	}
}

// convRowSums sets sums[i] to the sum of row i of dy's o rows of p elements: 16 lane sums
// over the row's whole 16-blocks (lane l: elements k*16+l in order from zero), folded
// pairwise (lane l += lane l+w for w = 8, 4, 2, 1), then the tail elements in order. The C
// version (conv_cgo.go) adds in the same order, hence the same bits.
func convRowSums[T gemmFloat](dy, sums []T, o, p int) {
	if f, ok := any(dy).([]float32); ok && !convNoC {
		convRowSumsF32(f, any(sums).([]float32), o, p)
		return
	}
	convRowSumsGo(dy, sums, o, p)
}

func convRowSumsGo[T gemmFloat](dy, sums []T, o, p int) {
	p16 := p / 16 * 16
	for i := 0; i < o; i++ {
		row := dy[i*p : (i+1)*p]
		var a [16]T
		for k := 0; k < p16; k += 16 {
			for l := range a {
				a[l] += row[k+l]
			}
		}
		for w := 8; w >= 1; w /= 2 {
			for l := 0; l < w; l++ {
				a[l] += a[l+w]
			}
		}
		s := a[0]
		for _, v := range row[p16:] {
			s += v
		}
		sums[i] = s
	}
}
