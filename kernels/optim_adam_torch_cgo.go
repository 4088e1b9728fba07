//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm -ldl
// torch's CPU Adam step per element (optim_adam_torch.go): every multiply and add rounded
// as written, fmaf exactly where torch's vectorized kernels fuse. One clone per ISA. In
// place: the parameters, moments and maxima are read and written.
#pragma GCC optimize ("fp-contract=off", "no-trapping-math")
#include <stdint.h>
#include "isa.h"
#include <math.h>
#include <dlfcn.h>

typedef struct {
	float decay, l2, w1, b2, c2, bc2s, eps, neg_step;
	int32_t has_decay, has_l2, maximize, amsgrad;
} hpusim_adam_k;

#define ADAM_CLONES HPUSIM_CLONES_V4_V3

static inline float adam_bf2f(uint16_t b) { union { uint32_t u; float f; } v; v.u = (uint32_t)b << 16; return v.f; }
static inline uint16_t adam_f2bf(float f) {
	union { uint32_t u; float f; } v; v.f = f;
	uint32_t x = v.u;
	uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
	return (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)r;
}
static inline float adam_r16(float f) { return adam_bf2f(adam_f2bf(f)); }
static inline float adam_max(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }

// torch's CPU sqrt of float32 is MKL's vsSqrt (ATen's vml.h), which is not correctly
// rounded (within 1 ULP): when the process has torch's MKL loaded, the kernel calls the
// same function, so its square roots are torch's. Otherwise sqrtf (a torch without MKL
// uses the correctly rounded vector instruction).
typedef void (*hpusim_vs_sqrt_fn)(int, const float *, float *);
static hpusim_vs_sqrt_fn hpusim_adam_vs_sqrt;

static int hpusim_adam_find_vml(void) {
	void *h = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
	if (h) hpusim_adam_vs_sqrt = (hpusim_vs_sqrt_fn)dlsym(h, "vsSqrt");
	return hpusim_adam_vs_sqrt != 0;
}

#define ADAM_BLOCK 512

// Element by element up to the square root, the square roots of the block, then the
// update. R rounds an op's result to the storage dtype; LD/ST load and store it.
#define ADAM_KERNEL(T, LD, ST, R, VML)                                                      \
	const int small = fabsf(k.w1) < 0.5f;                                                 \
	const float w1m1 = k.w1 - 1.0f;                                                       \
	float U[ADAM_BLOCK], PD[ADAM_BLOCK], MN[ADAM_BLOCK];                                   \
	for (int64_t i0 = 0; i0 < n; i0 += ADAM_BLOCK) {                                       \
		int nb = (int)(n - i0 < ADAM_BLOCK ? n - i0 : ADAM_BLOCK);                        \
		for (int j = 0; j < nb; j++) {                                                    \
			int64_t i = i0 + j;                                                           \
			float g = LD(G[i]), p = LD(P[i]), m = LD(M[i]), v = LD(V[i]);                 \
			if (k.maximize) g = -g;                                                      \
			if (k.has_decay) p = R(p * k.decay);                                        \
			if (k.has_l2) g = R(fmaf(p, k.l2, g));                                      \
			m = small ? R(fmaf(k.w1, g - m, m)) : R(fmaf(w1m1, g - m, g));               \
			v = R(v * k.b2);                                                             \
			v = R(fmaf(k.c2 * g, g, v));                                                 \
			float u = v;                                                                  \
			if (k.amsgrad) {                                                             \
				u = adam_max(LD(MX[i]), v);                                               \
				MX[i] = ST(u);                                                            \
			}                                                                             \
			M[i] = ST(m);                                                                 \
			V[i] = ST(v);                                                                 \
			U[j] = u;                                                                     \
			PD[j] = p;                                                                    \
			MN[j] = m;                                                                    \
		}                                                                                 \
		if (VML && hpusim_adam_vs_sqrt) {                                                 \
			hpusim_adam_vs_sqrt(nb, U, U);                                                \
		} else {                                                                          \
			for (int j = 0; j < nb; j++) U[j] = sqrtf(U[j]);                              \
		}                                                                                 \
		for (int j = 0; j < nb; j++) {                                                    \
			float d = R(R(R(U[j]) / k.bc2s) + k.eps);                                   \
			P[i0 + j] = ST(R(PD[j] + (k.neg_step * MN[j]) / d));                        \
		}                                                                                 \
	}

#define ADAM_ID(x) (x)

ADAM_CLONES static void hpusim_adam_torch_f32(const hpusim_adam_k *kp, float *restrict P, const float *restrict G,
		float *restrict M, float *restrict V, float *restrict MX, int64_t n) {
	const hpusim_adam_k k = *kp;
	ADAM_KERNEL(float, ADAM_ID, ADAM_ID, ADAM_ID, 1)
}

// bfloat16: torch's bfloat16 sqrt widens to float32 and takes the exact square root.
ADAM_CLONES static void hpusim_adam_torch_bf16(const hpusim_adam_k *kp, uint16_t *restrict P,
		const uint16_t *restrict G, uint16_t *restrict M, uint16_t *restrict V, uint16_t *restrict MX, int64_t n) {
	const hpusim_adam_k k = *kp;
	ADAM_KERNEL(uint16_t, adam_bf2f, adam_f2bf, adam_r16, 0)
}
*/
import "C"

import (
	"sync"
	"unsafe"
)

var adamFindVML = sync.OnceValue(func() bool { return C.hpusim_adam_find_vml() != 0 })

func libmPow(x, y float64) float64 { return float64(C.pow(C.double(x), C.double(y))) }

func adamFlag(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// adamTorchChunk updates elements [lo, hi) of one tensor with the C kernel.
func adamTorchChunk(k *adamTorchConsts, o *adamTorchOperands, lo, hi int64) {
	adamFindVML()
	ck := C.hpusim_adam_k{
		decay: C.float(k.decay), l2: C.float(k.l2), w1: C.float(k.w1), b2: C.float(k.b2), c2: C.float(k.c2),
		bc2s: C.float(k.bc2s), eps: C.float(k.eps), neg_step: C.float(k.negStep),
		has_decay: adamFlag(k.hasDecay), has_l2: adamFlag(k.hasL2), maximize: adamFlag(k.maximize), amsgrad: adamFlag(k.amsgrad),
	}
	es := int64(4)
	if o.p.DType == BFloat16 {
		es = 2
	}
	// The kernel updates in place: an output that is not its input gets the input first.
	bytes := func(t Tensor) []byte { return unsafe.Slice((*byte)(at(t.Ptr, lo*es)), int((hi-lo)*es)) }
	pairs := [][2]Tensor{{o.po, o.p}, {o.mo, o.m}, {o.vo, o.v}}
	if k.amsgrad {
		pairs = append(pairs, [2]Tensor{o.mxo, o.mx})
	}
	for _, pr := range pairs {
		if pr[0].Ptr != pr[1].Ptr {
			copy(bytes(pr[0]), bytes(pr[1]))
		}
	}
	ptr := func(t Tensor) unsafe.Pointer {
		if t.Ptr == nil {
			return nil
		}
		return at(t.Ptr, lo*es)
	}
	n := C.int64_t(hi - lo)
	if es == 4 {
		C.hpusim_adam_torch_f32(&ck, (*C.float)(ptr(o.po)), (*C.float)(ptr(o.g)), (*C.float)(ptr(o.mo)),
			(*C.float)(ptr(o.vo)), (*C.float)(ptr(o.mxo)), n)
		return
	}
	C.hpusim_adam_torch_bf16(&ck, (*C.uint16_t)(ptr(o.po)), (*C.uint16_t)(ptr(o.g)), (*C.uint16_t)(ptr(o.mo)),
		(*C.uint16_t)(ptr(o.vo)), (*C.uint16_t)(ptr(o.mxo)), n)
}
