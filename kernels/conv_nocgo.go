//go:build !cgo

package kernels

func im2colF32(col, x []float32, g convGeom, p ConvParams, gi int) {
	im2colRows(col, x, g, p, gi, 1, 0, g.Kc)
}

func col2imF32(dx, col []float32, g convGeom, p ConvParams, gi int) {
	col2imRows(dx, col, g, p, gi, 1, 0, g.Cg)
}

func convBiasAddF32(y, b []float32, o, p int) { convBiasAddGo(y, b, o, p) }

func convRowSumsF32(dy, sums []float32, o, p int) { convRowSumsGo(dy, sums, o, p) }

func im2colU16(col, x []uint16, g convGeom, p ConvParams, gi int) {
	im2colRows(col, x, g, p, gi, 1, 0, g.Kc)
}
