//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include "isa.h"
#include "bf16_rows.h"

// layer norm over rows of D bfloat16 values with float32 weight g and bias b (ones and
// zeros when the op has none), in float32 straight from the bfloat16 rows: mean, biased
// variance about the mean (two passes over a float32 copy of the row in buf), output
// rounded once. mean and rstd receive the float32 statistics.
HPUSIM_CLONES_512_2
static void hpusim_ln_fwd_bf16(const uint16_t *x, int64_t xs, uint16_t *out, int64_t os, int64_t rows, int64_t D,
                               const float *g, const float *b, float eps, float *mean, float *rstd, float *buf) {
	const int64_t nv = D / 16 * 16;
	for (int64_t r = 0; r < rows; r++) {
		const uint16_t *xr = x + r * xs;
		uint16_t *o = out + r * os;
		bf16r_v16f sv = {0};
		float s = 0;
		for (int64_t j = 0; j < nv; j += 16) {
			bf16r_v16f v = bf16r_load16(xr + j);
			memcpy(buf + j, &v, sizeof v);
			sv += v;
		}
		for (int64_t j = nv; j < D; j++) s += (buf[j] = bf16r_load(xr[j]));
		for (int l = 0; l < 16; l++) s += sv[l];
		float m = s / (float)D;
		bf16r_v16f qv = {0};
		float q = 0;
		for (int64_t j = 0; j < nv; j += 16) {
			bf16r_v16f v;
			memcpy(&v, buf + j, sizeof v);
			v -= m;
			qv += v * v;
		}
		for (int64_t j = nv; j < D; j++) q += (buf[j] - m) * (buf[j] - m);
		for (int l = 0; l < 16; l++) q += qv[l];
		float rs = 1.0f / sqrtf(q / (float)D + eps);
		for (int64_t j = 0; j < nv; j += 16) {
			bf16r_v16f v, gv, bv;
			memcpy(&v, buf + j, sizeof v);
			memcpy(&gv, g + j, sizeof gv);
			memcpy(&bv, b + j, sizeof bv);
			bf16r_store16(o + j, (v - m) * rs * gv + bv);
		}
		for (int64_t j = nv; j < D; j++) o[j] = bf16r_store((buf[j] - m) * rs * g[j] + b[j]);
		mean[r] = m;
		rstd[r] = rs;
	}
}

// layer norm gradients over rows of D bfloat16 values: with xhat = (x-mean)*rstd and
// dyg = dy*g, grad_input = rstd*(dyg - mean(dyg) - xhat*mean(dyg*xhat)) rounded once (gin
// NULL: not wanted); dw += dy*xhat and db += dy over the rows (float32, this block's
// partial sums). xb and gb hold D floats each.
HPUSIM_CLONES_512_2
static void hpusim_ln_bwd_bf16(const uint16_t *dy, int64_t dys, const uint16_t *x, int64_t xs, uint16_t *gin,
                               int64_t gs, int64_t rows, int64_t D, const float *g, const float *mu, const float *rsd,
                               float *dw, float *db, float *xb, float *gb) {
	const int64_t nv = D / 16 * 16;
	const float invD = 1.0f / (float)D;
	for (int64_t r = 0; r < rows; r++) {
		const uint16_t *dyr = dy + r * dys, *xr = x + r * xs;
		const float m = mu[r], rs = rsd[r];
		bf16r_v16f av = {0}, bv = {0};
		float a = 0, bsum = 0;
		for (int64_t j = 0; j < nv; j += 16) {
			bf16r_v16f xh = (bf16r_load16(xr + j) - m) * rs, d = bf16r_load16(dyr + j), gv, dwv, dbv;
			memcpy(&gv, g + j, sizeof gv);
			memcpy(&dwv, dw + j, sizeof dwv);
			memcpy(&dbv, db + j, sizeof dbv);
			dwv += d * xh;
			dbv += d;
			memcpy(dw + j, &dwv, sizeof dwv);
			memcpy(db + j, &dbv, sizeof dbv);
			bf16r_v16f dg = d * gv;
			av += dg;
			bv += dg * xh;
			memcpy(xb + j, &xh, sizeof xh);
			memcpy(gb + j, &dg, sizeof dg);
		}
		for (int64_t j = nv; j < D; j++) {
			float xh = (bf16r_load(xr[j]) - m) * rs, d = bf16r_load(dyr[j]);
			dw[j] += d * xh;
			db[j] += d;
			float dg = d * g[j];
			a += dg;
			bsum += dg * xh;
			xb[j] = xh;
			gb[j] = dg;
		}
		if (!gin) continue;
		for (int l = 0; l < 16; l++) {
			a += av[l];
			bsum += bv[l];
		}
		a *= invD;
		bsum *= invD;
		uint16_t *o = gin + r * gs;
		for (int64_t j = 0; j < nv; j += 16) {
			bf16r_v16f xh, dg;
			memcpy(&xh, xb + j, sizeof xh);
			memcpy(&dg, gb + j, sizeof dg);
			bf16r_store16(o + j, rs * ((dg - a) - xh * bsum));
		}
		for (int64_t j = nv; j < D; j++) o[j] = bf16r_store(rs * ((gb[j] - a) - xb[j] * bsum));
	}
}
*/
import "C"

import "unsafe"

func lnF32p(v []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(v))) }

// lnFwdBF16C runs hpusim_ln_fwd_bf16 over rows; mean and rstd hold rows floats, buf D.
func lnFwdBF16C(x unsafe.Pointer, xs int64, out unsafe.Pointer, os int64, rows, D int64, g, b []float32, eps float32,
	mean, rstd, buf []float32) {
	C.hpusim_ln_fwd_bf16((*C.uint16_t)(x), C.int64_t(xs), (*C.uint16_t)(out), C.int64_t(os), C.int64_t(rows), C.int64_t(D),
		lnF32p(g), lnF32p(b), C.float(eps), lnF32p(mean), lnF32p(rstd), lnF32p(buf))
}

// lnBwdBF16C runs hpusim_ln_bwd_bf16 over rows (gin nil: parameter gradients only);
// mu and rs hold the rows' statistics, dw and db the partial sums, xb and gb D floats.
func lnBwdBF16C(dy unsafe.Pointer, dys int64, x unsafe.Pointer, xs int64, gin unsafe.Pointer, gs int64, rows, D int64,
	g, mu, rs, dw, db, xb, gb []float32) {
	C.hpusim_ln_bwd_bf16((*C.uint16_t)(dy), C.int64_t(dys), (*C.uint16_t)(x), C.int64_t(xs), (*C.uint16_t)(gin),
		C.int64_t(gs), C.int64_t(rows), C.int64_t(D), lnF32p(g), lnF32p(mu), lnF32p(rs), lnF32p(dw), lnF32p(db), lnF32p(xb), lnF32p(gb))
}
