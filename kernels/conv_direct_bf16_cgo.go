//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

// The direct convolution of conv_direct_cgo.go for bfloat16 operands on VDPBF16PS
// (conv_direct_bf16.go): products of bfloat16 pairs summed in float32, each result rounded
// once by the caller. Forward and input gradient pair the taps over input channels: the
// input is a zero-padded image whose 32-bit elements hold channels 2c and 2c+1 at one
// position, and the weights hold the same two channels' values for 16 output channels a
// vector. The weight gradient pairs two neighbouring output positions of a row: the output
// gradient, transposed, holds positions (ow, ow+1) of 16 channels a vector, and each tap's
// input pair is read straight from the padded image (its two positions are neighbours).

typedef struct {
	int64_t K;      // tap pairs
	int64_t O, OH, OW;
	int64_t Wp, sh; // the padded input's row length (in elements); the stride along H
} dconvb_geom;

#define DB_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

static inline uint32_t ld32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }

// out[j][v] = sum over k < K, in order, of the pair x[koff[k] + j] . w[(k*NV + v)*16 + lane].
#define DB_TILE(NV, NP)                                                                          \
	DB_TARGET __attribute__((noinline)) static void db_tile_##NV##_##NP(                         \
	    const uint32_t *x, const int64_t *koff, int64_t K, const uint32_t *w, float *out) {      \
		__m512 acc[NP][NV];                                                                      \
		_Pragma("GCC unroll 32") for (int j = 0; j < NP; j++)                                    \
		_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[j][v] = _mm512_setzero_ps();   \
		for (int64_t k = 0; k < K; k++) {                                                        \
			const uint32_t *xk = x + koff[k];                                                    \
			__m512bh wv[NV];                                                                     \
			_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) wv[v] =                         \
			    (__m512bh)_mm512_loadu_si512(w + (k * NV + v) * 16);                             \
			_Pragma("GCC unroll 32") for (int j = 0; j < NP; j++) {                              \
				__m512bh xv = (__m512bh)_mm512_set1_epi32((int)xk[j]);                           \
				_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[j][v] =                 \
				    _mm512_dpbf16_ps(acc[j][v], xv, wv[v]);                                      \
			}                                                                                    \
		}                                                                                        \
		_Pragma("GCC unroll 32") for (int j = 0; j < NP; j++)                                    \
		_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++)                                     \
		    _mm512_storeu_ps(out + (j * NV + v) * 16, acc[j][v]);                                \
	}
DB_TILE(2, 1) DB_TILE(2, 2) DB_TILE(2, 3) DB_TILE(2, 4) DB_TILE(2, 5) DB_TILE(2, 6) DB_TILE(2, 7) DB_TILE(2,
8) DB_TILE(2, 9) DB_TILE(2, 10) DB_TILE(2, 11) DB_TILE(2, 12) DB_TILE(2, 13) DB_TILE(2, 14)
DB_TILE(1, 1) DB_TILE(1, 2) DB_TILE(1, 3) DB_TILE(1, 4) DB_TILE(1, 5) DB_TILE(1, 6) DB_TILE(1, 7) DB_TILE(1,
8) DB_TILE(1, 9) DB_TILE(1, 10) DB_TILE(1, 11) DB_TILE(1, 12) DB_TILE(1, 13) DB_TILE(1, 14) DB_TILE(1, 15)
DB_TILE(1, 16) DB_TILE(1, 17) DB_TILE(1, 18) DB_TILE(1, 19) DB_TILE(1, 20) DB_TILE(1, 21) DB_TILE(1, 22)
DB_TILE(1, 23) DB_TILE(1, 24) DB_TILE(1, 25) DB_TILE(1, 26) DB_TILE(1, 27) DB_TILE(1, 28)
typedef void (*db_fn)(const uint32_t *, const int64_t *, int64_t, const uint32_t *, float *);
enum { DB_NP2 = 14, DB_NP1 = 28 };
static const db_fn db_tiles2[DB_NP2] = {db_tile_2_1, db_tile_2_2, db_tile_2_3, db_tile_2_4, db_tile_2_5, db_tile_2_6, db_tile_2_7, db_tile_2_8,
db_tile_2_9, db_tile_2_10, db_tile_2_11, db_tile_2_12, db_tile_2_13, db_tile_2_14};
static const db_fn db_tiles1[DB_NP1] = {db_tile_1_1, db_tile_1_2, db_tile_1_3, db_tile_1_4, db_tile_1_5, db_tile_1_6, db_tile_1_7, db_tile_1_8,
db_tile_1_9, db_tile_1_10, db_tile_1_11, db_tile_1_12, db_tile_1_13, db_tile_1_14, db_tile_1_15, db_tile_1_16,
db_tile_1_17, db_tile_1_18, db_tile_1_19, db_tile_1_20, db_tile_1_21, db_tile_1_22, db_tile_1_23,
db_tile_1_24, db_tile_1_25, db_tile_1_26, db_tile_1_27, db_tile_1_28};

// y ([O][OH][OW], float32) = the convolution of xp (pair image, tap pairs at koff[K])
// with wt (pairs packed as hpusim_dconv_f32's weights), plus bias[o] when bias != NULL.
DB_TARGET void hpusim_dconv_bf16(const uint32_t *xp, const uint32_t *wt, const int64_t *koff, const dconvb_geom *g,
                                 float *y, const float *bias) {
	const int64_t K = g->K, O = g->O, OH = g->OH, OW = g->OW, P = OH * OW;
	float tile[DB_NP1 * 16] __attribute__((aligned(64)));
	for (int64_t o0 = 0; o0 < O; o0 += 32) {
		const int nv = O - o0 > 16 ? 2 : 1, width = 16 * nv, maxp = nv == 2 ? DB_NP2 : DB_NP1;
		const int no = O - o0 < width ? (int)(O - o0) : width;
		const uint32_t *w = wt + o0 * K;
		const int64_t chunks = (OW + maxp - 1) / maxp, np = (OW + chunks - 1) / chunks;
		for (int64_t oh = 0; oh < OH; oh++) {
			const uint32_t *xr = xp + oh * g->sh * g->Wp;
			for (int64_t ow0 = 0; ow0 < OW; ow0 += np) {
				const int n = OW - ow0 < np ? (int)(OW - ow0) : (int)np;
				(nv == 2 ? db_tiles2 : db_tiles1)[n - 1](xr + ow0, koff, K, w, tile);
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

// dst ([ceil(C/2)][Hp][Wp] pairs) = channels 2c (low half) and 2c+1 (high half, zero
// past C) of src ([C][H][W] bfloat16) at (top, left), zero borders.
void hpusim_dconv_pad_pairs(uint32_t *dst, const uint16_t *src, int64_t C, int64_t H, int64_t W, int64_t top,
                            int64_t left, int64_t Hp, int64_t Wp) {
	for (int64_t c2 = 0; c2 < (C + 1) / 2; c2++) {
		uint32_t *d = dst + c2 * Hp * Wp;
		const uint16_t *a = src + 2 * c2 * H * W, *b = 2 * c2 + 1 < C ? a + H * W : 0;
		memset(d, 0, top * Wp * 4);
		for (int64_t h = 0; h < H; h++) {
			uint32_t *r = d + (top + h) * Wp;
			memset(r, 0, left * 4);
			const uint16_t *ar = a + h * W;
			if (b) {
				const uint16_t *br = b + h * W;
				for (int64_t i = 0; i < W; i++) r[left + i] = (uint32_t)ar[i] | (uint32_t)br[i] << 16;
			} else {
				for (int64_t i = 0; i < W; i++) r[left + i] = ar[i];
			}
			memset(r + left + W, 0, (Wp - left - W) * 4);
		}
		memset(d + (top + H) * Wp, 0, (Hp - top - H) * Wp * 4);
	}
}

// dst ([C][Hp][Wp] bfloat16) = src ([C][H][W]) at (top, left), zero elsewhere.
void hpusim_dconv_pad16(uint16_t *dst, const uint16_t *src, int64_t C, int64_t H, int64_t W, int64_t top,
                        int64_t left, int64_t Hp, int64_t Wp) {
	for (int64_t c = 0; c < C; c++) {
		uint16_t *d = dst + c * Hp * Wp;
		memset(d, 0, top * Wp * 2);
		for (int64_t h = 0; h < H; h++) {
			uint16_t *r = d + (top + h) * Wp;
			memset(r, 0, left * 2);
			memcpy(r + left, src + (c * H + h) * W, W * 2);
			memset(r + left + W, 0, (Wp - left - W) * 2);
		}
		memset(d + (top + H) * Wp, 0, (Hp - top - H) * Wp * 2);
	}
}

// acc[j][v] += sum over rows oh and position pairs q of the pair
// x[koff[j] + oh*rs + 2q .. +1] . dyt[(oh*Q + q)*ld + 16*v + lane], for the NK taps j.
#define DBW_TILE(NV, NK)                                                                         \
	DB_TARGET __attribute__((noinline)) static void dbw_tile_##NV##_##NK(                        \
	    const uint16_t *x, const int64_t *koff, const uint32_t *dyt, int64_t ld, int64_t OH, int64_t Q, \
	    int64_t rs, float *sums) {                                                              \
		__m512 acc[NK][NV];                                                                      \
		int64_t off[NK];                                                                         \
		_Pragma("GCC unroll 16") for (int j = 0; j < NK; j++) {                                  \
			off[j] = koff[j];                                                                    \
			_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[j][v] =                     \
			    _mm512_loadu_ps(sums + (j * NV + v) * 16);                                       \
		}                                                                                        \
		for (int64_t oh = 0; oh < OH; oh++) {                                                    \
			const uint16_t *xr = x + oh * rs;                                                    \
			const uint32_t *dr = dyt + oh * Q * ld;                                              \
			for (int64_t q = 0; q < Q; q++) {                                                    \
				__m512bh dv[NV];                                                                 \
				_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) dv[v] =                     \
				    (__m512bh)_mm512_loadu_si512(dr + q * ld + v * 16);                          \
				_Pragma("GCC unroll 16") for (int j = 0; j < NK; j++) {                          \
					__m512bh xv = (__m512bh)_mm512_set1_epi32((int)ld32(xr + 2 * q + off[j]));   \
					_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[j][v] =             \
					    _mm512_dpbf16_ps(acc[j][v], xv, dv[v]);                                  \
				}                                                                                \
			}                                                                                    \
		}                                                                                        \
		_Pragma("GCC unroll 16") for (int j = 0; j < NK; j++)                                    \
		_Pragma("GCC unroll 2") for (int v = 0; v < NV; v++)                                     \
		    _mm512_storeu_ps(sums + (j * NV + v) * 16, acc[j][v]);                               \
	}
DBW_TILE(2, 1) DBW_TILE(2, 2) DBW_TILE(2, 3) DBW_TILE(2, 4) DBW_TILE(2, 5) DBW_TILE(2, 6) DBW_TILE(2, 7)
DBW_TILE(2, 8) DBW_TILE(2, 9) DBW_TILE(2, 10) DBW_TILE(2, 11) DBW_TILE(2, 12)
DBW_TILE(1, 1) DBW_TILE(1, 2) DBW_TILE(1, 3) DBW_TILE(1, 4) DBW_TILE(1, 5) DBW_TILE(1, 6) DBW_TILE(1, 7)
DBW_TILE(1, 8) DBW_TILE(1, 9) DBW_TILE(1, 10) DBW_TILE(1, 11) DBW_TILE(1, 12)
typedef void (*dbw_fn)(const uint16_t *, const int64_t *, const uint32_t *, int64_t, int64_t, int64_t, int64_t,
                       float *);
enum { DBW_NK = 12 };
static const dbw_fn dbw_tiles2[DBW_NK] = {dbw_tile_2_1, dbw_tile_2_2, dbw_tile_2_3, dbw_tile_2_4, dbw_tile_2_5, dbw_tile_2_6, dbw_tile_2_7,
dbw_tile_2_8, dbw_tile_2_9, dbw_tile_2_10, dbw_tile_2_11, dbw_tile_2_12};
static const dbw_fn dbw_tiles1[DBW_NK] = {dbw_tile_1_1, dbw_tile_1_2, dbw_tile_1_3, dbw_tile_1_4, dbw_tile_1_5, dbw_tile_1_6, dbw_tile_1_7,
dbw_tile_1_8, dbw_tile_1_9, dbw_tile_1_10, dbw_tile_1_11, dbw_tile_1_12};

// sums (hpusim_dconv_wgrad_f32's layout, K taps) += one sample's weight gradient: xp its
// padded bfloat16 input (rows of Wp elements, taps at koff[K]; at least one zero column
// past the last position a tap reads when OW is odd), dyt its output gradient as
// position pairs [OH][ceil(OW/2)][Op] (hpusim_dconv_transpose_pairs).
DB_TARGET void hpusim_dconv_wgrad_bf16(const uint16_t *xp, const int64_t *koff, const uint32_t *dyt,
                                       const dconvb_geom *g, float *sums) {
	const int64_t K = g->K, O = g->O, Op = (O + 15) / 16 * 16, Q = (g->OW + 1) / 2;
	for (int64_t o0 = 0; o0 < O; o0 += 32) {
		const int nv = O - o0 > 16 ? 2 : 1;
		float *s = sums + o0 * K;
		for (int64_t k0 = 0; k0 < K; k0 += DBW_NK) {
			const int nk = K - k0 < DBW_NK ? (int)(K - k0) : DBW_NK;
			(nv == 2 ? dbw_tiles2 : dbw_tiles1)[nk - 1](xp, koff + k0, dyt + o0, Op, g->OH, Q, g->sh * g->Wp,
			                                            s + k0 * 16 * nv);
		}
	}
}

// dst ([OH][ceil(OW/2)][Op] pairs) = positions (2q, 2q+1) of each channel of src
// ([O][OH][OW] bfloat16), zero past OW and past O.
void hpusim_dconv_transpose_pairs(uint32_t *dst, const uint16_t *src, int64_t O, int64_t OH, int64_t OW,
                                  int64_t Op) {
	const int64_t Q = (OW + 1) / 2;
	for (int64_t oh = 0; oh < OH; oh++) {
		uint32_t *d = dst + oh * Q * Op;
		for (int64_t o = 0; o < Op; o++) {
			if (o >= O) {
				for (int64_t q = 0; q < Q; q++) d[q * Op + o] = 0;
				continue;
			}
			const uint16_t *s = src + (o * OH + oh) * OW;
			for (int64_t q = 0; q < OW / 2; q++) d[q * Op + o] = ld32(s + 2 * q);
			if (OW & 1) d[(Q - 1) * Op + o] = s[OW - 1];
		}
	}
}
*/
import "C"

import "unsafe"

func cu32s(s []uint32) *C.uint32_t { return (*C.uint32_t)(unsafe.Pointer(unsafe.SliceData(s))) }
func cu16s(s []uint16) *C.uint16_t { return (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(s))) }

func dconvbGeom(d dconvGeom) C.dconvb_geom {
	return C.dconvb_geom{K: C.int64_t(d.K), O: C.int64_t(d.O), OH: C.int64_t(d.OH), OW: C.int64_t(d.OW),
		Wp: C.int64_t(d.Wp), sh: C.int64_t(d.SH)}
}

// dconvBF16 runs hpusim_dconv_bf16 (d.K: tap pairs).
func dconvBF16(xp, wt []uint32, koff []int64, d dconvGeom, y, bias []float32) {
	cg := dconvbGeom(d)
	var b *C.float
	if bias != nil {
		b = cfloats(bias)
	}
	C.hpusim_dconv_bf16(cu32s(xp), cu32s(wt), cint64s(koff), &cg, cfloats(y), b)
}

// dconvPadPairs runs hpusim_dconv_pad_pairs.
func dconvPadPairs(dst []uint32, src []uint16, c, h, w, top, left, hp, wp int) {
	if c == 0 {
		return
	}
	C.hpusim_dconv_pad_pairs(cu32s(dst), cu16s(src), C.int64_t(c), C.int64_t(h), C.int64_t(w), C.int64_t(top),
		C.int64_t(left), C.int64_t(hp), C.int64_t(wp))
}

// dconvPad16 runs hpusim_dconv_pad16.
func dconvPad16(dst, src []uint16, c, h, w, top, left, hp, wp int) {
	if c == 0 {
		return
	}
	C.hpusim_dconv_pad16(cu16s(dst), cu16s(src), C.int64_t(c), C.int64_t(h), C.int64_t(w), C.int64_t(top),
		C.int64_t(left), C.int64_t(hp), C.int64_t(wp))
}

// dconvWeightGradBF16 runs hpusim_dconv_wgrad_bf16 (d.K: taps).
func dconvWeightGradBF16(xp []uint16, koff []int64, dyt []uint32, d dconvGeom, sums []float32) {
	cg := dconvbGeom(d)
	C.hpusim_dconv_wgrad_bf16(cu16s(xp), cint64s(koff), cu32s(dyt), &cg, cfloats(sums))
}

// dconvTransposePairs runs hpusim_dconv_transpose_pairs.
func dconvTransposePairs(dst []uint32, src []uint16, o, oh, ow, op int) {
	C.hpusim_dconv_transpose_pairs(cu32s(dst), cu16s(src), C.int64_t(o), C.int64_t(oh), C.int64_t(ow), C.int64_t(op))
}
