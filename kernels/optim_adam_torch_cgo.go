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

// The amsgrad loads and stores of the maxima are a compile-time choice (each kernel comes
// with and without them): left to a runtime flag, the compiler if-converts them into
// masked vector loads from the null MX, a microcoded slow path on AMD Zen that made the
// whole update ~30x slower.

// bfloat16 in one pass: every op's result rounded to bfloat16 as torch's bfloat16 CPU ops
// do; torch's bfloat16 sqrt widens to float32 and takes the exact square root.
#define ADAM_BF16(NAME, AMS)                                                                    \
ADAM_CLONES static void NAME(const hpusim_adam_k *kp, uint16_t *restrict P,                       \
		const uint16_t *restrict G, uint16_t *restrict M, uint16_t *restrict V, uint16_t *restrict MX, \
		int64_t n) {                                                                            \
	const hpusim_adam_k k = *kp;                                                                \
	const int small = fabsf(k.w1) < 0.5f;                                                       \
	const float w1m1 = k.w1 - 1.0f;                                                             \
	for (int64_t i = 0; i < n; i++) {                                                           \
		float g = adam_bf2f(G[i]), p = adam_bf2f(P[i]), m = adam_bf2f(M[i]), v = adam_bf2f(V[i]); \
		if (k.maximize) g = -g;                                                                 \
		if (k.has_decay) p = adam_r16(p * k.decay);                                             \
		if (k.has_l2) g = adam_r16(fmaf(p, k.l2, g));                                           \
		m = small ? adam_r16(fmaf(k.w1, g - m, m)) : adam_r16(fmaf(w1m1, g - m, g));            \
		v = adam_r16(v * k.b2);                                                                 \
		v = adam_r16(fmaf(k.c2 * g, g, v));                                                     \
		float u = v;                                                                            \
		if (AMS) {                                                                              \
			u = adam_max(adam_bf2f(MX[i]), v);                                                  \
			MX[i] = adam_f2bf(u);                                                               \
		}                                                                                       \
		M[i] = adam_f2bf(m);                                                                    \
		V[i] = adam_f2bf(v);                                                                    \
		float d = adam_r16(adam_r16(adam_r16(sqrtf(u)) / k.bc2s) + k.eps);                      \
		P[i] = adam_f2bf(adam_r16(p + (k.neg_step * m) / d));                                   \
	}                                                                                           \
}
ADAM_BF16(hpusim_adam_bf16_plain, 0)
ADAM_BF16(hpusim_adam_bf16_ams, 1)

static void hpusim_adam_torch_bf16(const hpusim_adam_k *kp, uint16_t *P, const uint16_t *G, uint16_t *M,
		uint16_t *V, uint16_t *MX, int64_t n) {
	if (kp->amsgrad) hpusim_adam_bf16_ams(kp, P, G, M, V, MX, n);
	else hpusim_adam_bf16_plain(kp, P, G, M, V, MX, n);
}

// float32 in two passes, so that the square roots of many tensors' pieces go to vsSqrt in
// one call (each call costs ~6 us on top of its elements here, more than a small tensor's
// whole update). Pass 1: the moments (and maxima) in place, the square root's operand to U.
#define ADAM_F32_MOMENTS(NAME, AMS)                                                             \
ADAM_CLONES static void NAME(const hpusim_adam_k *kp, const float *restrict P,                    \
		const float *restrict G, float *restrict M, float *restrict V, float *restrict MX,       \
		float *restrict U, int64_t n) {                                                         \
	const hpusim_adam_k k = *kp;                                                                \
	const int small = fabsf(k.w1) < 0.5f;                                                       \
	const float w1m1 = k.w1 - 1.0f;                                                             \
	for (int64_t i = 0; i < n; i++) {                                                           \
		float g = G[i], p = P[i], m = M[i], v = V[i];                                           \
		if (k.maximize) g = -g;                                                                 \
		if (k.has_decay) p = p * k.decay;                                                       \
		if (k.has_l2) g = fmaf(p, k.l2, g);                                                     \
		m = small ? fmaf(k.w1, g - m, m) : fmaf(w1m1, g - m, g);                                \
		v = v * k.b2;                                                                           \
		v = fmaf(k.c2 * g, g, v);                                                               \
		float u = v;                                                                            \
		if (AMS) {                                                                              \
			u = adam_max(MX[i], v);                                                             \
			MX[i] = u;                                                                          \
		}                                                                                       \
		M[i] = m;                                                                               \
		V[i] = v;                                                                               \
		U[i] = u;                                                                               \
	}                                                                                           \
}
ADAM_F32_MOMENTS(hpusim_adam_f32_moments_plain, 0)
ADAM_F32_MOMENTS(hpusim_adam_f32_moments_ams, 1)

static void hpusim_adam_f32_moments(const hpusim_adam_k *kp, const float *P, const float *G, float *M,
		float *V, float *MX, float *U, int64_t n) {
	if (kp->amsgrad) hpusim_adam_f32_moments_ams(kp, P, G, M, V, MX, U, n);
	else hpusim_adam_f32_moments_plain(kp, P, G, M, V, MX, U, n);
}

// Pass 2: the parameter update from the new moment and the square root in U (the decayed
// parameter is computed again from the untouched P: the same product, the same bits).
ADAM_CLONES static void hpusim_adam_f32_update(const hpusim_adam_k *kp, float *restrict P,
		const float *restrict M, const float *restrict U, int64_t n) {
	const hpusim_adam_k k = *kp;
	for (int64_t i = 0; i < n; i++) {
		float p = P[i];
		if (k.has_decay) p = p * k.decay;
		float d = U[i] / k.bc2s + k.eps;
		P[i] = p + (k.neg_step * M[i]) / d;
	}
}

static void hpusim_adam_sqrtf(float *U, int64_t n) {
	for (int64_t i = 0; i < n; i++) U[i] = sqrtf(U[i]);
}

// U = sqrt(U) as torch's float32 sqrt computes it here.
static void hpusim_adam_sqrt(float *U, int64_t n) {
	if (hpusim_adam_vs_sqrt) {
		hpusim_adam_vs_sqrt((int)n, U, U);
		return;
	}
	hpusim_adam_sqrtf(U, n);
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

var adamScratch = sync.Pool{New: func() any { b := make([]float32, adamBatch); return &b }}

func adamCK(k *adamTorchConsts) C.hpusim_adam_k {
	return C.hpusim_adam_k{
		decay: C.float(k.decay), l2: C.float(k.l2), w1: C.float(k.w1), b2: C.float(k.b2), c2: C.float(k.c2),
		bc2s: C.float(k.bc2s), eps: C.float(k.eps), neg_step: C.float(k.negStep),
		has_decay: adamFlag(k.hasDecay), has_l2: adamFlag(k.hasL2), maximize: adamFlag(k.maximize), amsgrad: adamFlag(k.amsgrad),
	}
}

// adamInPlace gives the output tensors of piece [lo, hi) the inputs' values first when they
// are other tensors: the C kernels update in place.
func adamInPlace(k *adamTorchConsts, o *adamTorchOperands, lo, hi, es int64) {
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
}

func adamPtr(t Tensor, off int64) unsafe.Pointer {
	if t.Ptr == nil {
		return nil
	}
	return at(t.Ptr, off)
}

// adamTorchRun updates the pieces of one worker's share with the C kernels: bfloat16
// pieces one by one, float32 ones in batches whose square roots are one call.
func adamTorchRun(consts []adamTorchConsts, ops []adamTorchOperands, parts []optPart) {
	adamFindVML()
	var scratch *[]float32
	type pending struct {
		pt  optPart
		off int64
	}
	var batch []pending
	var used int64
	flush := func() {
		if used == 0 {
			return
		}
		u := *scratch
		C.hpusim_adam_sqrt((*C.float)(unsafe.Pointer(&u[0])), C.int64_t(used))
		for _, b := range batch {
			k, o := adamCK(&consts[b.pt.ti]), &ops[b.pt.ti]
			lo := b.pt.lo * 4
			C.hpusim_adam_f32_update(&k, (*C.float)(adamPtr(o.po, lo)), (*C.float)(adamPtr(o.mo, lo)),
				(*C.float)(unsafe.Pointer(&u[b.off])), C.int64_t(b.pt.hi-b.pt.lo))
		}
		batch, used = batch[:0], 0
	}
	for _, whole := range parts {
		k, o := &consts[whole.ti], &ops[whole.ti]
		if o.p.DType == BFloat16 {
			adamInPlace(k, o, whole.lo, whole.hi, 2)
			ck := adamCK(k)
			lo := whole.lo * 2
			C.hpusim_adam_torch_bf16(&ck, (*C.uint16_t)(adamPtr(o.po, lo)), (*C.uint16_t)(adamPtr(o.g, lo)),
				(*C.uint16_t)(adamPtr(o.mo, lo)), (*C.uint16_t)(adamPtr(o.vo, lo)), (*C.uint16_t)(adamPtr(o.mxo, lo)),
				C.int64_t(whole.hi-whole.lo))
			continue
		}
		if scratch == nil {
			scratch = adamScratch.Get().(*[]float32)
		}
		for lo := whole.lo; lo < whole.hi; {
			if used == adamBatch {
				flush()
			}
			hi := min(whole.hi, lo+adamBatch-used)
			adamInPlace(k, o, lo, hi, 4)
			ck := adamCK(k)
			u := *scratch
			b := lo * 4
			C.hpusim_adam_f32_moments(&ck, (*C.float)(adamPtr(o.po, b)), (*C.float)(adamPtr(o.g, b)),
				(*C.float)(adamPtr(o.mo, b)), (*C.float)(adamPtr(o.vo, b)), (*C.float)(adamPtr(o.mxo, b)),
				(*C.float)(unsafe.Pointer(&u[used])), C.int64_t(hi-lo))
			batch = append(batch, pending{optPart{whole.ti, lo, hi}, used})
			used += hi - lo
			lo = hi
		}
	}
	if scratch != nil {
		flush()
		adamScratch.Put(scratch)
	}
}
