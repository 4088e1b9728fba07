//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <string.h>
#include <immintrin.h>
#include "f32tile.h"

// Gradients of a stride-1 float32 convolution on AVX-512 without im2col or col2im
// (conv_f32grad.go), a group of one sample (or, for the weight gradient, of a few) a call. Both work on a zero-padded image of the
// sample's input (or input gradient) whose rows are Wp = W+2*pw floats: output position
// (oh, ow) reads or writes, for k = (c, kh, kw), the element koff(k) + oh*Wp + ow of it.

typedef struct {
	int64_t C, H, W, KH, KW, ph, pw, dh, dw, O; // C, O: the group's channels
} f32g_geom;

static inline int64_t f32g_koff(const f32g_geom *g, int64_t k, int64_t plane, int64_t Wp) {
	int64_t khw = g->KH * g->KW, c = k / khw, r = k % khw;
	return c * plane + (r / g->KW) * g->dh * Wp + (r % g->KW) * g->dw;
}

// ---- weight gradient ------------------------------------------------------------------
// dW[o][k] = sum over positions of dy[o][oh][ow] * xp[koff(k) + oh*Wp + ow]. Both factors
// are contiguous along ow, so the sum runs in 16 lanes along ow (each output row in
// ceil(OW/16) vectors, the last masked) with no transposition; a tile of WMR rows of dy
// and WNR values of k keeps WMR*WNR vectors of lane sums. The lane sums of every (o, k)
// carry over samples in acc ([O][K][16]) and are added up once at the end
// (hpusim_conv_wgrad_reduce).
enum { WMR = 4, WNR = 6 };

__attribute__((target("avx512f"), always_inline)) static inline void
wgrad_tile(float *acc, int64_t K, const float *dy, int64_t P, int64_t dys, const float *xp, int64_t xps,
           int64_t S, const int64_t *off, int64_t OH, int64_t OW, int64_t Wp, const int mr, const int nr) {
	__m512 s[WMR][WNR];
#pragma GCC unroll 8
	for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
		for (int j = 0; j < nr; j++) s[r][j] = _mm512_loadu_ps(acc + (r * K + j) * 16);
	int64_t nv = (OW + 15) / 16;
	__mmask16 last = (__mmask16)((1u << (OW - (nv - 1) * 16)) - 1);
	const float *xj[WNR];
#pragma GCC unroll 8
	for (int j = 0; j < nr; j++) xj[j] = xp + off[j];
	// One output row's vectors: v, masked by m, of dy row dr and of each x row x_j + dx.
#define WSTEP(dr, dx, v, m)                                                                     \
	do {                                                                                        \
		__m512 a[WMR];                                                                          \
		_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) a[r] =                             \
		    _mm512_maskz_loadu_ps(m, (dr) + r * P + (v) * 16);                                  \
		_Pragma("GCC unroll 8") for (int j = 0; j < nr; j++) {                                  \
			__m512 xv = _mm512_maskz_loadu_ps(m, xj[j] + (dx) + (v) * 16);                      \
			_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) s[r][j] =                      \
			    _mm512_fmadd_ps(a[r], xv, s[r][j]);                                             \
		}                                                                                       \
	} while (0)
	for (int64_t sm = 0; sm < S; sm++) {
		const float *dr = dy + sm * dys;
		int64_t dx = sm * xps;
		if (nv == 1) { // the common short row: no inner loop, so no per-row set-up
			for (int64_t oh = 0; oh < OH; oh++, dr += OW, dx += Wp) WSTEP(dr, dx, 0, last);
			continue;
		}
		for (int64_t oh = 0; oh < OH; oh++, dr += OW, dx += Wp) {
			for (int64_t v = 0; v < nv - 1; v++) WSTEP(dr, dx, v, 0xffff);
			WSTEP(dr, dx, nv - 1, last);
		}
	}
#undef WSTEP
#pragma GCC unroll 8
	for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
		for (int j = 0; j < nr; j++) _mm512_storeu_ps(acc + (r * K + j) * 16, s[r][j]);
}

// One function per tile shape: inlined into one function with a switch, GCC spills the
// accumulators and runs at half speed.
#define WTILE(R, N)                                                                                               \
	__attribute__((target("avx512f"), noinline)) static void wgrad_tile_##R##_##N(                              \
	    float *acc, int64_t K, const float *dy, int64_t P, int64_t dys, const float *xp, int64_t xps, int64_t S, \
	    const int64_t *off, int64_t OH, int64_t OW, int64_t Wp) {                                               \
		wgrad_tile(acc, K, dy, P, dys, xp, xps, S, off, OH, OW, Wp, R, N);                                      \
	}
#define WROW(R) WTILE(R, 1) WTILE(R, 2) WTILE(R, 3) WTILE(R, 4) WTILE(R, 5) WTILE(R, 6)
WROW(1) WROW(2) WROW(3) WROW(4)
#undef WROW

typedef void (*wgrad_fn)(float *, int64_t, const float *, int64_t, int64_t, const float *, int64_t, int64_t,
                         const int64_t *, int64_t, int64_t, int64_t);
#define WROW(R) {wgrad_tile_##R##_1, wgrad_tile_##R##_2, wgrad_tile_##R##_3, wgrad_tile_##R##_4, wgrad_tile_##R##_5, wgrad_tile_##R##_6}
static const wgrad_fn wgrad_tiles[WMR][WNR] = {WROW(1), WROW(2), WROW(3), WROW(4)};
#undef WROW
#undef WTILE

// S samples at once (the lane sums are loaded and stored once per tile for all of them):
// sample s's group input is x + s*xs ([C][H][W]) and output gradient dy + s*dys
// ([O][OH][OW]); acc: the group's lane sums [O][C*KH*KW][16]; xp: scratch of
// S*C*(H+2ph)*(W+2pw) floats.
__attribute__((target("avx512f")))
void hpusim_conv_wgrad_f32(float *acc, const float *dy, int64_t dys, const float *x, int64_t xs, int64_t S,
                           const f32g_geom *g, float *xp) {
	int64_t Hp = g->H + 2 * g->ph, Wp = g->W + 2 * g->pw, plane = Hp * Wp, xps = g->C * plane;
	int64_t OH = Hp - (g->KH - 1) * g->dh, OW = Wp - (g->KW - 1) * g->dw, P = OH * OW, K = g->C * g->KH * g->KW;
	memset(xp, 0, S * xps * sizeof(float));
	for (int64_t sm = 0; sm < S; sm++)
		for (int64_t c = 0; c < g->C; c++)
			for (int64_t h = 0; h < g->H; h++)
				f32_copy(xp + sm * xps + c * plane + (h + g->ph) * Wp + g->pw, x + sm * xs + (c * g->H + h) * g->W, g->W);
	for (int64_t o0 = 0; o0 < g->O; o0 += WMR) {
		int mr = g->O - o0 < WMR ? (int)(g->O - o0) : WMR;
		for (int64_t k0 = 0; k0 < K; k0 += WNR) {
			int nr = K - k0 < WNR ? (int)(K - k0) : WNR;
			int64_t off[WNR];
			for (int j = 0; j < nr; j++) off[j] = f32g_koff(g, k0 + j, plane, Wp);
			wgrad_tiles[mr - 1][nr - 1](acc + (o0 * K + k0) * 16, K, dy + o0 * P, P, dys, xp, xps, S, off, OH, OW, Wp);
		}
	}
}

// dst[i] += the sum of acc's 16 lanes i, for i < n (a fixed tree of adds).
__attribute__((target("avx512f")))
void hpusim_conv_wgrad_reduce(const float *acc, int64_t n, float *dst) {
	for (int64_t i = 0; i < n; i++) dst[i] += _mm512_reduce_add_ps(_mm512_loadu_ps(acc + i * 16));
}

// ---- input gradient -------------------------------------------------------------------
// dxp[koff(k) + q] += sum over o of W[o][k] * dyp[o][q] for every grid position q = oh*Wp
// + ow with ow < OW: the GEMM W^T (K x O) @ dyp (O x Q) of the im2col path, whose column
// matrix col2im would scatter, with each 12 x 32 tile added straight into the padded
// image instead (its row k's 32 grid positions land on 32 consecutive floats). Grid
// columns ow >= OW are masked out. pa: W^T packed by hpusim_f32dot_pack_a (m = K rows,
// k = O), its rows ordered (kh, kw, c): a tile's rows then land in different channels'
// planes, so no row's load waits on the previous row's overlapping store (with rows in
// (c, kh, kw) order, the next kw's row overlaps it shifted by one float, and the store
// cannot be forwarded: half the time went in that stall). The register tile is the GEMM's
// (f32tile.h).
enum { DMR = F32_TILE_MR, DNR = F32_TILE_NR, DKC = 256 };

__attribute__((target("avx512f")))
static void dgrad_tile(const float *pa, const float *pb, int64_t ldb, int64_t kc, float *dxp, const int64_t *off,
                       int mr, __mmask16 m0, __mmask16 m1) {
	__m512 acc[DMR][2];
	f32_tile_sums(pa, pb, ldb, kc, acc);
#pragma GCC unroll 12
	for (int r = 0; r < DMR; r++) {
		if (r >= mr) break;
		float *d = dxp + off[r];
		_mm512_mask_storeu_ps(d, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, d), acc[r][0]));
		_mm512_mask_storeu_ps(d + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, d + 16), acc[r][1]));
	}
}

// dy: the group's output gradient [O][OH][OW]; dx: the group's input gradient [C][H][W]
// (overwritten). Scratch: dxp C*(H+2ph)*(W+2pw) floats, dyp O*ceil(OH*Wp/32)*32. dyp is
// dy on the padded grid, zero in the columns ow >= OW and past the grid's end; the tiles
// read its 32-column panels in place (row stride Qp), so nothing is packed per sample.
__attribute__((target("avx512f")))
void hpusim_conv_dgrad_f32(const float *pa, const float *dy, float *dx, const f32g_geom *g, float *dxp, float *dyp) {
	int64_t Hp = g->H + 2 * g->ph, Wp = g->W + 2 * g->pw, plane = Hp * Wp;
	int64_t OH = Hp - (g->KH - 1) * g->dh, OW = Wp - (g->KW - 1) * g->dw, K = g->C * g->KH * g->KW, O = g->O;
	int64_t Q = OH * Wp, nq = (Q + DNR - 1) / DNR, Qp = nq * DNR, mp = (K + DMR - 1) / DMR;
	memset(dyp, 0, O * Qp * sizeof(float));
	for (int64_t o = 0; o < O; o++)
		for (int64_t oh = 0; oh < OH; oh++) f32_copy(dyp + o * Qp + oh * Wp, dy + (o * OH + oh) * OW, OW);
	memset(dxp, 0, g->C * plane * sizeof(float));
	for (int64_t p = 0; p < mp; p++) {
		int mr = K - p * DMR < DMR ? (int)(K - p * DMR) : DMR;
		int64_t off[DMR];
		for (int r = 0; r < mr; r++) {
			int64_t i = p * DMR + r, t = i / g->C, c = i % g->C; // row i is k = (kh, kw, c)
			off[r] = c * plane + (t / g->KW) * g->dh * Wp + (t % g->KW) * g->dw;
		}
		for (int64_t q = 0; q < nq; q++) {
			uint32_t valid = 0; // the panel's grid columns that are output positions (ow < OW)
			for (int64_t j = 0, ow = q * DNR % Wp; j < DNR && q * DNR + j < Q; j++, ow = ow + 1 == Wp ? 0 : ow + 1)
				if (ow < OW) valid |= 1u << j;
			int64_t offq[DMR];
			for (int r = 0; r < mr; r++) offq[r] = off[r] + q * DNR;
			for (int64_t k0 = 0; k0 < O; k0 += DKC) {
				int64_t kb = O - k0 < DKC ? O - k0 : DKC;
				dgrad_tile(pa + p * O * DMR + k0 * DMR, dyp + k0 * Qp + q * DNR, Qp, kb, dxp, offq, mr,
				           (__mmask16)valid, (__mmask16)(valid >> 16));
			}
		}
	}
	for (int64_t c = 0; c < g->C; c++)
		for (int64_t h = 0; h < g->H; h++)
			f32_copy(dx + (c * g->H + h) * g->W, dxp + c * plane + (h + g->ph) * Wp + g->pw, g->W);
}
*/
import "C"

func f32gGeom(g convGeom, p ConvParams) C.f32g_geom {
	return C.f32g_geom{C: C.int64_t(g.Cg), H: C.int64_t(g.H), W: C.int64_t(g.W), KH: C.int64_t(g.KH),
		KW: C.int64_t(g.KW), ph: C.int64_t(p.PadH), pw: C.int64_t(p.PadW), dh: C.int64_t(p.DilH),
		dw: C.int64_t(p.DilW), O: C.int64_t(g.Og)}
}

// f32ConvWeightGrad adds samples n0..n0+s of group gi to the lane sums acc ([Og][Kc][16]);
// in and gout have dense planes (any sample stride); xp is scratch of
// s*Cg*(H+2ph)*(W+2pw) floats.
func f32ConvWeightGrad(acc []float32, gout, in Tensor, n0, s, gi int, g convGeom, p ConvParams, xp []float32) {
	cg := f32gGeom(g, p)
	dy := at(gout.Ptr, (int64(n0)*gout.Strides[0]+int64(gi*g.Og*g.P))*4)
	x := at(in.Ptr, (int64(n0)*in.Strides[0]+int64(gi*g.Cg*g.H*g.W))*4)
	C.hpusim_conv_wgrad_f32(cfloats(acc), (*C.float)(dy), C.int64_t(gout.Strides[0]), (*C.float)(x),
		C.int64_t(in.Strides[0]), C.int64_t(s), &cg, cfloats(xp))
}

// f32LaneSums adds the sum of each 16-lane group of acc into dst (len(acc) = 16*len(dst)).
func f32LaneSums(acc, dst []float32) {
	C.hpusim_conv_wgrad_reduce(cfloats(acc), C.int64_t(len(dst)), cfloats(dst))
}

// f32ConvInputGrad sets one sample's group of input-gradient planes dx from dy; pa holds
// the group's W^T packed by f32DotPackA (Kc rows, inner dimension Og).
func f32ConvInputGrad(pa, dy, dx []float32, g convGeom, p ConvParams, s *f32GradScratch) {
	cg := f32gGeom(g, p)
	C.hpusim_conv_dgrad_f32(cfloats(pa), cfloats(dy), cfloats(dx), &cg, cfloats(s.dxp), cfloats(s.dyp))
}
