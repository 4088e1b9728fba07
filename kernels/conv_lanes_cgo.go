//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <immintrin.h>

// The tiles of conv_lanes.go: NO output channels (accumulators) times 16 output
// positions; m masks the positions past the row's end (no load or store touches them).
// w is [K][ldw] (channel weights of a tap side by side), y the first channel's plane
// (planes P floats apart).
#define LC_TILE(NO)                                                                              \
	__attribute__((target("avx512f"), noinline)) static void lc_tile_##NO(                      \
	    const float *x, const int64_t *koff, int64_t K, const float *w, int64_t ldw, __mmask16 m, \
	    float *y, int64_t P, const float *bias) {                                                \
		__m512 acc[NO];                                                                          \
		_Pragma("GCC unroll 16") for (int o = 0; o < NO; o++) acc[o] = _mm512_setzero_ps();      \
		for (int64_t k = 0; k < K; k++) {                                                        \
			const __m512 xv = _mm512_maskz_loadu_ps(m, x + koff[k]);                             \
			const float *wk = w + k * ldw;                                                       \
			_Pragma("GCC unroll 16") for (int o = 0; o < NO; o++) acc[o] =                       \
			    _mm512_fmadd_ps(_mm512_set1_ps(wk[o]), xv, acc[o]);                              \
		}                                                                                        \
		_Pragma("GCC unroll 16") for (int o = 0; o < NO; o++) {                                  \
			__m512 v = acc[o];                                                                   \
			if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[o]));                             \
			_mm512_mask_storeu_ps(y + o * P, m, v);                                              \
		}                                                                                        \
	}
LC_TILE(1) LC_TILE(2) LC_TILE(3) LC_TILE(4) LC_TILE(5) LC_TILE(6) LC_TILE(7) LC_TILE(8)
LC_TILE(9) LC_TILE(10) LC_TILE(11) LC_TILE(12) LC_TILE(13) LC_TILE(14) LC_TILE(15) LC_TILE(16)
typedef void (*lc_fn)(const float *, const int64_t *, int64_t, const float *, int64_t, __mmask16, float *, int64_t,
                      const float *);
static const lc_fn lc_tiles[16] = {lc_tile_1, lc_tile_2, lc_tile_3, lc_tile_4, lc_tile_5, lc_tile_6, lc_tile_7,
lc_tile_8, lc_tile_9, lc_tile_10, lc_tile_11, lc_tile_12, lc_tile_13, lc_tile_14, lc_tile_15, lc_tile_16};

// y ([O][OH][OW]) = the convolution of xp (the padded input, rows of Wp floats; tap k
// at koff[k], output row oh at oh*sh*Wp) with w ([K][O]), plus bias[o] when bias != NULL.
__attribute__((target("avx512f")))
void hpusim_lconv_f32(const float *xp, const float *w, const int64_t *koff, int64_t K, int64_t O, int64_t OH,
                      int64_t OW, int64_t Wp, int64_t sh, float *y, const float *bias) {
	const int64_t P = OH * OW;
	for (int64_t o0 = 0; o0 < O; o0 += 16) {
		const int no = O - o0 < 16 ? (int)(O - o0) : 16;
		const lc_fn tile = lc_tiles[no - 1];
		for (int64_t oh = 0; oh < OH; oh++) {
			const float *xr = xp + oh * sh * Wp;
			float *yr = y + o0 * P + oh * OW;
			for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
				const int n = OW - ow0 < 16 ? (int)(OW - ow0) : 16;
				tile(xr + ow0, koff, K, w + o0, O, (__mmask16)((1u << n) - 1), yr + ow0, P, bias ? bias + o0 : 0);
			}
		}
	}
}
*/
import "C"

// lconvF32 runs hpusim_lconv_f32: y (d.O planes of d.OH x d.OW) from the padded input xp
// and the weights wt ([d.K][d.O]); bias may be nil.
func lconvF32(xp, wt []float32, koff []int64, d dconvGeom, y, bias []float32) {
	_ = y[d.O*d.OH*d.OW-1]
	var b *C.float
	if bias != nil {
		_ = bias[d.O-1]
		b = cfloats(bias)
	}
	C.hpusim_lconv_f32(cfloats(xp), cfloats(wt), cint64s(koff), C.int64_t(d.K), C.int64_t(d.O), C.int64_t(d.OH),
		C.int64_t(d.OW), C.int64_t(d.Wp), C.int64_t(d.SH), cfloats(y), b)
}
