//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

// Direct float32 convolution on AVX-512 with the output channels in the vector lanes
// (conv_direct.go). A forward register tile is NV vectors of 16 output channels times NP
// consecutive output positions of one output row: per tap k = (c, kh, kw) it loads the NV
// weight vectors W[k][o..o+16*NV) once and multiplies them by each position's input
// value, broadcast from a zero-padded copy of the sample: no im2col matrix, no padded
// output grid, and no lane wasted when O is a multiple of 16. The input gradient of a
// stride-1 convolution is the same kernel run on the padded output gradient with the
// flipped, transposed weights. The weight gradient keeps NK taps times NV channel vectors
// of sums and walks the output positions: per position, the output gradient's channel
// vector (a transposed copy of dy) times each tap's broadcast input value.

typedef struct {
	int64_t K;      // taps: C*KH*KW
	int64_t O, OH, OW;
	int64_t Wp, sh; // the padded input's row length; the stride along H (W's is 1)
} dconv_geom;

// out[j][v] = sum over k < K, in order, of x[koff[k] + j] * w[(k*NV + v)*16 + lane].
#define DC_TILE(NV, NP)                                                                          \
	__attribute__((target("avx512f"), noinline)) static void dc_tile_##NV##_##NP(                \
	    const float *x, const int64_t *koff, int64_t K, const float *w, float *out) {            \
		__m512 acc[NP][NV];                                                                      \
		_Pragma("GCC unroll 32") for (int j = 0; j < NP; j++)                                    \
		_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[j][v] = _mm512_setzero_ps();   \
		for (int64_t k = 0; k < K; k++) {                                                        \
			const float *xk = x + koff[k];                                                       \
			__m512 wv[NV];                                                                       \
			_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) wv[v] =                         \
			    _mm512_loadu_ps(w + (k * NV + v) * 16);                                          \
			_Pragma("GCC unroll 32") for (int j = 0; j < NP; j++) {                              \
				__m512 xv = _mm512_set1_ps(xk[j]);                                               \
				_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[j][v] =                 \
				    _mm512_fmadd_ps(xv, wv[v], acc[j][v]);                                       \
			}                                                                                    \
		}                                                                                        \
		_Pragma("GCC unroll 32") for (int j = 0; j < NP; j++)                                    \
		_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++)                                     \
		    _mm512_storeu_ps(out + (j * NV + v) * 16, acc[j][v]);                                \
	}
DC_TILE(2, 1) DC_TILE(2, 2) DC_TILE(2, 3) DC_TILE(2, 4) DC_TILE(2, 5) DC_TILE(2, 6) DC_TILE(2, 7) DC_TILE(2,
8) DC_TILE(2, 9) DC_TILE(2, 10) DC_TILE(2, 11) DC_TILE(2, 12) DC_TILE(2, 13) DC_TILE(2, 14)
DC_TILE(1, 1) DC_TILE(1, 2) DC_TILE(1, 3) DC_TILE(1, 4) DC_TILE(1, 5) DC_TILE(1, 6) DC_TILE(1, 7) DC_TILE(1,
8) DC_TILE(1, 9) DC_TILE(1, 10) DC_TILE(1, 11) DC_TILE(1, 12) DC_TILE(1, 13) DC_TILE(1, 14) DC_TILE(1, 15)
DC_TILE(1, 16) DC_TILE(1, 17) DC_TILE(1, 18) DC_TILE(1, 19) DC_TILE(1, 20) DC_TILE(1, 21) DC_TILE(1, 22)
DC_TILE(1, 23) DC_TILE(1, 24) DC_TILE(1, 25) DC_TILE(1, 26) DC_TILE(1, 27) DC_TILE(1, 28)
typedef void (*dc_fn)(const float *, const int64_t *, int64_t, const float *, float *);
enum { DC_NP2 = 14, DC_NP1 = 28 }; // the widest tiles: 28 + 2 and 28 + 1 vector registers
static const dc_fn dc_tiles2[DC_NP2] = {dc_tile_2_1, dc_tile_2_2, dc_tile_2_3, dc_tile_2_4, dc_tile_2_5, dc_tile_2_6, dc_tile_2_7, dc_tile_2_8,
dc_tile_2_9, dc_tile_2_10, dc_tile_2_11, dc_tile_2_12, dc_tile_2_13, dc_tile_2_14};
static const dc_fn dc_tiles1[DC_NP1] = {dc_tile_1_1, dc_tile_1_2, dc_tile_1_3, dc_tile_1_4, dc_tile_1_5, dc_tile_1_6, dc_tile_1_7, dc_tile_1_8,
dc_tile_1_9, dc_tile_1_10, dc_tile_1_11, dc_tile_1_12, dc_tile_1_13, dc_tile_1_14, dc_tile_1_15, dc_tile_1_16,
dc_tile_1_17, dc_tile_1_18, dc_tile_1_19, dc_tile_1_20, dc_tile_1_21, dc_tile_1_22, dc_tile_1_23,
dc_tile_1_24, dc_tile_1_25, dc_tile_1_26, dc_tile_1_27, dc_tile_1_28};

// y ([O][OH][OW]) = the convolution of xp (padded input, taps at koff[K]) with wt (the
// weights packed by conv_direct.go: per 32-channel block at o0, [K][width] floats at
// wt + o0*K, zero past O), plus bias[o] when bias != NULL (added after the sum).
__attribute__((target("avx512f")))
void hpusim_dconv_f32(const float *xp, const float *wt, const int64_t *koff, const dconv_geom *g, float *y,
                      const float *bias) {
	const int64_t K = g->K, O = g->O, OH = g->OH, OW = g->OW, P = OH * OW;
	float tile[DC_NP1 * 16] __attribute__((aligned(64)));
	for (int64_t o0 = 0; o0 < O; o0 += 32) {
		const int nv = O - o0 > 16 ? 2 : 1, width = 16 * nv, maxp = nv == 2 ? DC_NP2 : DC_NP1;
		const int no = O - o0 < width ? (int)(O - o0) : width;
		const float *w = wt + o0 * K;
		const int64_t chunks = (OW + maxp - 1) / maxp, np = (OW + chunks - 1) / chunks;
		for (int64_t oh = 0; oh < OH; oh++) {
			const float *xr = xp + oh * g->sh * g->Wp;
			for (int64_t ow0 = 0; ow0 < OW; ow0 += np) {
				const int n = OW - ow0 < np ? (int)(OW - ow0) : (int)np;
				(nv == 2 ? dc_tiles2 : dc_tiles1)[n - 1](xr + ow0, koff, K, w, tile);
				float *yo = y + o0 * P + oh * OW + ow0;
				for (int i = 0; i < no; i++) {
					float b = bias ? bias[o0 + i] : 0;
					float *d = yo + i * P;
					if (bias) {
						for (int j = 0; j < n; j++) d[j] = tile[j * width + i] + b;
					} else {
						for (int j = 0; j < n; j++) d[j] = tile[j * width + i];
					}
				}
			}
		}
	}
}

// dst ([C][H+top+bottom][W+left+right]) = src ([C][H][W], row stride W, plane stride
// H*W) with zero borders.
__attribute__((target("avx512f")))
void hpusim_dconv_pad(float *dst, const float *src, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left,
                      int64_t Hp, int64_t Wp) {
	for (int64_t c = 0; c < C; c++) {
		float *d = dst + c * Hp * Wp;
		memset(d, 0, top * Wp * sizeof(float));
		for (int64_t h = 0; h < H; h++) {
			float *r = d + (top + h) * Wp;
			memset(r, 0, left * sizeof(float));
			memcpy(r + left, src + (c * H + h) * W, W * sizeof(float));
			memset(r + left + W, 0, (Wp - left - W) * sizeof(float));
		}
		memset(d + (top + H) * Wp, 0, (Hp - top - H) * Wp * sizeof(float));
	}
}

// acc[j][v] += sum over output positions (oh, ow) of x[koff[j] + oh*rs + ow] *
// dyt[(oh*OW + ow)*ld + 16*v + lane], for the NK taps j.
#define DW_TILE(NV, NK)                                                                          \
	__attribute__((target("avx512f"), noinline)) static void dw_tile_##NV##_##NK(                \
	    const float *x, const int64_t *koff, const float *dyt, int64_t ld, int64_t OH, int64_t OW, \
	    int64_t rs, float *sums) {                                                              \
		__m512 acc[NK][NV];                                                                      \
		int64_t off[NK];                                                                         \
		_Pragma("GCC unroll 16") for (int j = 0; j < NK; j++) {                                  \
			off[j] = koff[j];                                                                    \
			_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[j][v] =                     \
			    _mm512_loadu_ps(sums + (j * NV + v) * 16);                                       \
		}                                                                                        \
		for (int64_t oh = 0; oh < OH; oh++) {                                                    \
			const float *xr = x + oh * rs, *dr = dyt + oh * OW * ld;                             \
			for (int64_t ow = 0; ow < OW; ow++) {                                                \
				__m512 dv[NV];                                                                   \
				_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) dv[v] =                     \
				    _mm512_loadu_ps(dr + ow * ld + v * 16);                                      \
				_Pragma("GCC unroll 16") for (int j = 0; j < NK; j++) {                          \
					__m512 xv = _mm512_set1_ps(xr[ow + off[j]]);                                 \
					_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[j][v] =             \
					    _mm512_fmadd_ps(xv, dv[v], acc[j][v]);                                   \
				}                                                                                \
			}                                                                                    \
		}                                                                                        \
		_Pragma("GCC unroll 16") for (int j = 0; j < NK; j++)                                    \
		_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++)                                     \
		    _mm512_storeu_ps(sums + (j * NV + v) * 16, acc[j][v]);                               \
	}
DW_TILE(2, 1) DW_TILE(2, 2) DW_TILE(2, 3) DW_TILE(2, 4) DW_TILE(2, 5) DW_TILE(2, 6) DW_TILE(2, 7) DW_TILE(2,
8) DW_TILE(2, 9) DW_TILE(2, 10) DW_TILE(2, 11) DW_TILE(2, 12)
DW_TILE(1, 1) DW_TILE(1, 2) DW_TILE(1, 3) DW_TILE(1, 4) DW_TILE(1, 5) DW_TILE(1, 6) DW_TILE(1, 7) DW_TILE(1,
8) DW_TILE(1, 9) DW_TILE(1, 10) DW_TILE(1, 11) DW_TILE(1, 12)
typedef void (*dw_fn)(const float *, const int64_t *, const float *, int64_t, int64_t, int64_t, int64_t, float *);
enum { DW_NK = 12 };
static const dw_fn dw_tiles2[DW_NK] = {dw_tile_2_1, dw_tile_2_2, dw_tile_2_3, dw_tile_2_4, dw_tile_2_5, dw_tile_2_6, dw_tile_2_7, dw_tile_2_8,
dw_tile_2_9, dw_tile_2_10, dw_tile_2_11, dw_tile_2_12};
static const dw_fn dw_tiles1[DW_NK] = {dw_tile_1_1, dw_tile_1_2, dw_tile_1_3, dw_tile_1_4, dw_tile_1_5, dw_tile_1_6, dw_tile_1_7, dw_tile_1_8,
dw_tile_1_9, dw_tile_1_10, dw_tile_1_11, dw_tile_1_12};

// sums (per 32-channel block at o0: [K][width] at sums + o0*K, the layout of
// hpusim_dconv_f32's weights) += the weight gradient of one sample: xp its padded input
// (taps at koff[K]), dyt its output gradient transposed to [OH*OW][Op] (Op = O rounded up
// to 16, zero past O).
__attribute__((target("avx512f")))
void hpusim_dconv_wgrad_f32(const float *xp, const int64_t *koff, const float *dyt, const dconv_geom *g,
                            float *sums) {
	const int64_t K = g->K, O = g->O, Op = (O + 15) / 16 * 16;
	for (int64_t o0 = 0; o0 < O; o0 += 32) {
		const int nv = O - o0 > 16 ? 2 : 1;
		float *s = sums + o0 * K;
		for (int64_t k0 = 0; k0 < K; k0 += DW_NK) {
			const int nk = K - k0 < DW_NK ? (int)(K - k0) : DW_NK;
			(nv == 2 ? dw_tiles2 : dw_tiles1)[nk - 1](xp, koff + k0, dyt + o0, Op, g->OH, g->OW, g->sh * g->Wp,
			                                          s + k0 * 16 * nv);
		}
	}
}

// dst ([P][Op]) = the transpose of src ([O][P]), zero in the columns O..Op.
__attribute__((target("avx512f")))
void hpusim_dconv_transpose(float *dst, const float *src, int64_t O, int64_t P, int64_t Op) {
	for (int64_t p0 = 0; p0 < P; p0 += 16) {
		int64_t pn = P - p0 < 16 ? P - p0 : 16;
		for (int64_t o = 0; o < Op; o++) {
			if (o >= O) {
				for (int64_t i = 0; i < pn; i++) dst[(p0 + i) * Op + o] = 0;
				continue;
			}
			const float *s = src + o * P + p0;
			for (int64_t i = 0; i < pn; i++) dst[(p0 + i) * Op + o] = s[i];
		}
	}
}
*/
import "C"

import "unsafe"

func cint64s(s []int64) *C.int64_t { return (*C.int64_t)(unsafe.Pointer(unsafe.SliceData(s))) }

// dconvF32 runs hpusim_dconv_f32 (see conv_direct.go for the operands).
func dconvF32(xp, wt []float32, koff []int64, d dconvGeom, y, bias []float32) {
	if !f32DotCPU {
		dconvF32AVX2(xp, wt, koff, d, y, bias) // conv_direct_avx2_cgo.go
		return
	}
	cg := C.dconv_geom{K: C.int64_t(d.K), O: C.int64_t(d.O), OH: C.int64_t(d.OH), OW: C.int64_t(d.OW),
		Wp: C.int64_t(d.Wp), sh: C.int64_t(d.SH)}
	var b *C.float
	if bias != nil {
		b = cfloats(bias)
	}
	C.hpusim_dconv_f32(cfloats(xp), cfloats(wt), cint64s(koff), &cg, cfloats(y), b)
}

// dconvPad copies c planes [h][w] of src into dst's [hp][wp] planes at (top, left),
// zeroing the rest.
func dconvPad(dst, src []float32, c, h, w, top, left, hp, wp int) {
	if c == 0 {
		return
	}
	if !f32DotCPU && !bf16DotCPU {
		dconvPadGeneric(dst, src, c, h, w, top, left, hp, wp)
		return
	}
	C.hpusim_dconv_pad(cfloats(dst), cfloats(src), C.int64_t(c), C.int64_t(h), C.int64_t(w), C.int64_t(top),
		C.int64_t(left), C.int64_t(hp), C.int64_t(wp))
}

// dconvWeightGradF32 runs hpusim_dconv_wgrad_f32.
func dconvWeightGradF32(xp []float32, koff []int64, dyt []float32, d dconvGeom, sums []float32) {
	if !f32DotCPU {
		dconvWeightGradF32AVX2(xp, koff, dyt, d, sums)
		return
	}
	cg := C.dconv_geom{K: C.int64_t(d.K), O: C.int64_t(d.O), OH: C.int64_t(d.OH), OW: C.int64_t(d.OW),
		Wp: C.int64_t(d.Wp), sh: C.int64_t(d.SH)}
	C.hpusim_dconv_wgrad_f32(cfloats(xp), cint64s(koff), cfloats(dyt), &cg, cfloats(sums))
}

// dconvTranspose sets dst ([p][op]) to the transpose of src ([o][p]), zero past o.
func dconvTranspose(dst, src []float32, o, p, op int) {
	if !f32DotCPU {
		dconvTransposeGeneric(dst, src, o, p, op)
		return
	}
	C.hpusim_dconv_transpose(cfloats(dst), cfloats(src), C.int64_t(o), C.int64_t(p), C.int64_t(op))
}
