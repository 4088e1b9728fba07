//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <string.h>
#include <immintrin.h>
#include "isa.h"

// The direct float32 convolution of conv_direct_cgo.go on AVX2 + FMA (CPUs without
// AVX-512, or HPUSIM_ISA=avx2), on the same operands: the weights packed per 32-channel
// block as [K][width] (width 32, or 16 for a last block of at most 16 channels), the
// padded input, the tap offsets. A register tile is 16 output channels (two 8-lane
// vectors: one half of a 32-channel block) times at most 6 output positions (forward) or
// 6 taps (weight gradient): 12 accumulators, 2 weight (or output-gradient) vectors and
// one broadcast fill 15 of the 16 registers. Per lane the arithmetic is the AVX-512
// kernels' (one FMA per tap, taps in order from zero; the weight gradient's sums over
// positions in order), so the two give the same bits.

typedef struct {
	int64_t K;      // taps: C*KH*KW
	int64_t O, OH, OW;
	int64_t Wp, sh; // the padded input's row length; the stride along H (W's is 1)
} dconv2_geom;

int hpusim_dconv_avx2_supported(void) {
	return HPUSIM_AVX2() && HPUSIM_CPU_HAS(HPUSIM_ISA_LEVEL_AVX2, "fma");
}

// out[j*16 + lane] = sum over k < K, in order, of x[koff[k] + j] * w[k*ldw + lane], for
// the NP positions j and the 16 lanes.
#define A2_TILE(NP)                                                                                    \
	__attribute__((target("avx2,fma"), noinline)) static void a2_tile_##NP(                            \
	    const float *x, const int64_t *koff, int64_t K, const float *w, int64_t ldw, float *out) {     \
		__m256 acc[NP][2];                                                                             \
		_Pragma("GCC unroll 8") for (int j = 0; j < NP; j++) {                                         \
			acc[j][0] = _mm256_setzero_ps();                                                           \
			acc[j][1] = _mm256_setzero_ps();                                                           \
		}                                                                                              \
		for (int64_t k = 0; k < K; k++) {                                                              \
			const float *xk = x + koff[k];                                                             \
			__m256 w0 = _mm256_loadu_ps(w + k * ldw), w1 = _mm256_loadu_ps(w + k * ldw + 8);           \
			_Pragma("GCC unroll 8") for (int j = 0; j < NP; j++) {                                     \
				__m256 xv = _mm256_broadcast_ss(xk + j);                                               \
				acc[j][0] = _mm256_fmadd_ps(xv, w0, acc[j][0]);                                        \
				acc[j][1] = _mm256_fmadd_ps(xv, w1, acc[j][1]);                                        \
			}                                                                                          \
		}                                                                                              \
		_Pragma("GCC unroll 8") for (int j = 0; j < NP; j++) {                                         \
			_mm256_storeu_ps(out + j * 16, acc[j][0]);                                                 \
			_mm256_storeu_ps(out + j * 16 + 8, acc[j][1]);                                             \
		}                                                                                              \
	}
A2_TILE(1) A2_TILE(2) A2_TILE(3) A2_TILE(4) A2_TILE(5) A2_TILE(6)
typedef void (*a2_fn)(const float *, const int64_t *, int64_t, const float *, int64_t, float *);
enum { A2_NP = 6 };
static const a2_fn a2_tiles[A2_NP] = {a2_tile_1, a2_tile_2, a2_tile_3, a2_tile_4, a2_tile_5, a2_tile_6};

// Block b's width in the packed layout (32, or 16 for a last block of at most 16).
static inline int64_t a2_width(int64_t O, int64_t o0) { return O - o0 / 32 * 32 > 16 ? 32 : 16; }

// y ([O][OH][OW]) = the convolution of xp with wt (hpusim_dconv_f32's operands), plus
// bias[o] when bias != NULL (added after the sum).
__attribute__((target("avx2,fma")))
void hpusim_dconv2_f32(const float *xp, const float *wt, const int64_t *koff, const dconv2_geom *g, float *y,
                       const float *bias) {
	const int64_t K = g->K, O = g->O, OH = g->OH, OW = g->OW, P = OH * OW;
	const int64_t chunks = (OW + A2_NP - 1) / A2_NP, np = (OW + chunks - 1) / chunks;
	float tile[A2_NP * 16] __attribute__((aligned(32)));
	for (int64_t o0 = 0; o0 < O; o0 += 16) {
		const int64_t width = a2_width(O, o0);
		const float *w = wt + o0 / 32 * 32 * K + o0 % 32;
		const int no = O - o0 < 16 ? (int)(O - o0) : 16;
		for (int64_t oh = 0; oh < OH; oh++) {
			const float *xr = xp + oh * g->sh * g->Wp;
			for (int64_t ow0 = 0; ow0 < OW; ow0 += np) {
				const int n = OW - ow0 < np ? (int)(OW - ow0) : (int)np;
				a2_tiles[n - 1](xr + ow0, koff, K, w, width, tile);
				float *yo = y + o0 * P + oh * OW + ow0;
				for (int i = 0; i < no; i++) {
					float *d = yo + i * P;
					if (bias) {
						float b = bias[o0 + i];
						for (int j = 0; j < n; j++) d[j] = tile[j * 16 + i] + b;
					} else {
						for (int j = 0; j < n; j++) d[j] = tile[j * 16 + i];
					}
				}
			}
		}
	}
}

// sums[j*lds + lane] += sum over output positions (oh, ow), in order, of
// x[koff[j] + oh*rs + ow] * dyt[(oh*OW + ow)*ld + lane], for the NK taps j and 16 lanes.
#define A2W_TILE(NK)                                                                                   \
	__attribute__((target("avx2,fma"), noinline)) static void a2w_tile_##NK(                           \
	    const float *x, const int64_t *koff, const float *dyt, int64_t ld, int64_t OH, int64_t OW,     \
	    int64_t rs, float *sums, int64_t lds) {                                                        \
		__m256 acc[NK][2];                                                                             \
		int64_t off[NK];                                                                               \
		_Pragma("GCC unroll 8") for (int j = 0; j < NK; j++) {                                         \
			off[j] = koff[j];                                                                          \
			acc[j][0] = _mm256_loadu_ps(sums + j * lds);                                               \
			acc[j][1] = _mm256_loadu_ps(sums + j * lds + 8);                                           \
		}                                                                                              \
		for (int64_t oh = 0; oh < OH; oh++) {                                                          \
			const float *xr = x + oh * rs, *dr = dyt + oh * OW * ld;                                   \
			for (int64_t ow = 0; ow < OW; ow++) {                                                      \
				__m256 d0 = _mm256_loadu_ps(dr + ow * ld), d1 = _mm256_loadu_ps(dr + ow * ld + 8);     \
				_Pragma("GCC unroll 8") for (int j = 0; j < NK; j++) {                                 \
					__m256 xv = _mm256_broadcast_ss(xr + ow + off[j]);                                 \
					acc[j][0] = _mm256_fmadd_ps(xv, d0, acc[j][0]);                                    \
					acc[j][1] = _mm256_fmadd_ps(xv, d1, acc[j][1]);                                    \
				}                                                                                      \
			}                                                                                          \
		}                                                                                              \
		_Pragma("GCC unroll 8") for (int j = 0; j < NK; j++) {                                         \
			_mm256_storeu_ps(sums + j * lds, acc[j][0]);                                               \
			_mm256_storeu_ps(sums + j * lds + 8, acc[j][1]);                                           \
		}                                                                                              \
	}
A2W_TILE(1) A2W_TILE(2) A2W_TILE(3) A2W_TILE(4) A2W_TILE(5) A2W_TILE(6)
typedef void (*a2w_fn)(const float *, const int64_t *, const float *, int64_t, int64_t, int64_t, int64_t, float *,
                       int64_t);
enum { A2W_NK = 6 };
static const a2w_fn a2w_tiles[A2W_NK] = {a2w_tile_1, a2w_tile_2, a2w_tile_3, a2w_tile_4, a2w_tile_5, a2w_tile_6};

// sums (hpusim_dconv_f32's weight layout) += the weight gradient of one sample, as
// hpusim_dconv_wgrad_f32.
__attribute__((target("avx2,fma")))
void hpusim_dconv2_wgrad_f32(const float *xp, const int64_t *koff, const float *dyt, const dconv2_geom *g,
                             float *sums) {
	const int64_t K = g->K, O = g->O, Op = (O + 15) / 16 * 16;
	for (int64_t o0 = 0; o0 < O; o0 += 16) {
		const int64_t width = a2_width(O, o0);
		float *s = sums + o0 / 32 * 32 * K + o0 % 32;
		for (int64_t k0 = 0; k0 < K; k0 += A2W_NK) {
			const int nk = K - k0 < A2W_NK ? (int)(K - k0) : A2W_NK;
			a2w_tiles[nk - 1](xp, koff + k0, dyt + o0, Op, g->OH, g->OW, g->sh * g->Wp, s + k0 * width, width);
		}
	}
}

// hpusim_dconv_pad and hpusim_dconv_transpose without AVX-512.
void hpusim_dconv2_pad(float *dst, const float *src, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left,
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

void hpusim_dconv2_transpose(float *dst, const float *src, int64_t O, int64_t P, int64_t Op) {
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

// dconvAVX2 reports whether the AVX2 + FMA direct convolution kernels run here: the
// direct paths of conv_direct.go take them where the AVX-512 ones (f32DotCPU) are not
// available.
var dconvAVX2 = C.hpusim_dconv_avx2_supported() != 0

func dconv2Geom(d dconvGeom) C.dconv2_geom {
	return C.dconv2_geom{K: C.int64_t(d.K), O: C.int64_t(d.O), OH: C.int64_t(d.OH), OW: C.int64_t(d.OW),
		Wp: C.int64_t(d.Wp), sh: C.int64_t(d.SH)}
}

func dconvF32AVX2(xp, wt []float32, koff []int64, d dconvGeom, y, bias []float32) {
	cg := dconv2Geom(d)
	var b *C.float
	if bias != nil {
		b = cfloats(bias)
	}
	C.hpusim_dconv2_f32(cfloats(xp), cfloats(wt), cint64s(koff), &cg, cfloats(y), b)
}

func dconvWeightGradF32AVX2(xp []float32, koff []int64, dyt []float32, d dconvGeom, sums []float32) {
	cg := dconv2Geom(d)
	C.hpusim_dconv2_wgrad_f32(cfloats(xp), cint64s(koff), cfloats(dyt), &cg, cfloats(sums))
}

func dconvPadGeneric(dst, src []float32, c, h, w, top, left, hp, wp int) {
	C.hpusim_dconv2_pad(cfloats(dst), cfloats(src), C.int64_t(c), C.int64_t(h), C.int64_t(w), C.int64_t(top),
		C.int64_t(left), C.int64_t(hp), C.int64_t(wp))
}

func dconvTransposeGeneric(dst, src []float32, o, p, op int) {
	C.hpusim_dconv2_transpose(cfloats(dst), cfloats(src), C.int64_t(o), C.int64_t(p), C.int64_t(op))
}
