// The instruction sets the C kernels may use: the CPU's, capped by HPUSIM_ISA (read once)
// and by a build with -DHPUSIM_ISA_AVX2 or -DHPUSIM_ISA_GENERIC in CGO_CFLAGS. Included by
// every cgo preamble that picks a path by CPU feature (isa.go).
//
// Two kinds of dispatch:
//   - explicit checks (HPUSIM_AVX512F() and friends below, and the Go-side gates
//     f32DotCPU, bf16DotCPU and b2CPU built on them) follow HPUSIM_ISA at run time;
//   - GCC target clones (HPUSIM_CLONES_*) are resolved by the dynamic loader before any
//     environment variable can be read, so only the build flag drops their wider variants.
// `make test-go` runs `go test ./kernels` once more with both set to avx2, so the AVX2 and
// generic paths are exercised on an AVX-512 machine too.
#ifndef HPUSIM_ISA_H
#define HPUSIM_ISA_H
#include <stdlib.h>
#include <string.h>

enum { HPUSIM_ISA_LEVEL_GENERIC = 1, HPUSIM_ISA_LEVEL_AVX2 = 2, HPUSIM_ISA_LEVEL_AVX512 = 3 };

// The highest level the kernels may use (the CPU may support less).
static inline int hpusim_isa_cap(void) {
	static int cap; // 0: not read yet; every thread computes the same value
	int c = __atomic_load_n(&cap, __ATOMIC_RELAXED);
	if (c) return c;
	c = HPUSIM_ISA_LEVEL_AVX512;
	const char *e = getenv("HPUSIM_ISA");
	if (e && !strcmp(e, "avx2")) c = HPUSIM_ISA_LEVEL_AVX2;
	else if (e && !strcmp(e, "generic")) c = HPUSIM_ISA_LEVEL_GENERIC;
#if defined(HPUSIM_ISA_GENERIC)
	c = HPUSIM_ISA_LEVEL_GENERIC;
#elif defined(HPUSIM_ISA_AVX2)
	if (c > HPUSIM_ISA_LEVEL_AVX2) c = HPUSIM_ISA_LEVEL_AVX2;
#endif
	__atomic_store_n(&cap, c, __ATOMIC_RELAXED);
	return c;
}

#define HPUSIM_CPU_HAS(level, feature) (hpusim_isa_cap() >= (level) && (__builtin_cpu_init(), __builtin_cpu_supports(feature)))
#define HPUSIM_AVX512F() HPUSIM_CPU_HAS(HPUSIM_ISA_LEVEL_AVX512, "avx512f")
#define HPUSIM_AVX2() HPUSIM_CPU_HAS(HPUSIM_ISA_LEVEL_AVX2, "avx2")
#define HPUSIM_AVX() HPUSIM_CPU_HAS(HPUSIM_ISA_LEVEL_AVX2, "avx")

#if defined(HPUSIM_ISA_GENERIC)
#define HPUSIM_CLONES_512_2
#define HPUSIM_CLONES_V4_2
#define HPUSIM_CLONES_V4_V3
#define HPUSIM_CLONES_V3
#define HPUSIM_CLONES_2
#elif defined(HPUSIM_ISA_AVX2)
#define HPUSIM_CLONES_512_2 __attribute__((target_clones("avx2", "default")))
#define HPUSIM_CLONES_V4_2 __attribute__((target_clones("avx2", "default")))
#define HPUSIM_CLONES_V4_V3 __attribute__((target_clones("arch=x86-64-v3", "default")))
#define HPUSIM_CLONES_V3 __attribute__((target_clones("arch=x86-64-v3", "default")))
#define HPUSIM_CLONES_2 __attribute__((target_clones("avx2", "default")))
#else
#define HPUSIM_CLONES_512_2 __attribute__((target_clones("avx512f", "avx2", "default")))
#define HPUSIM_CLONES_V4_2 __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#define HPUSIM_CLONES_V4_V3 __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define HPUSIM_CLONES_V3 __attribute__((target_clones("arch=x86-64-v3", "default")))
#define HPUSIM_CLONES_2 __attribute__((target_clones("avx2", "default")))
#endif

#endif
