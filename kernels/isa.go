package kernels

import "os"

// HPUSIM_ISA caps the instruction sets the kernels use below what the CPU has, so an
// AVX-512 machine can run (and test) the AVX2 and generic paths: "avx2" or "generic";
// unset (or "avx512", "native") uses the CPU's best. The C side reads the same variable
// (isa.h: hpusim_isa_cap), which also gates the Go-side switches f32DotCPU, bf16DotCPU and
// b2CPU; loops compiled as GCC target clones follow only a build with
// CGO_CFLAGS=-DHPUSIM_ISA_AVX2 (or -DHPUSIM_ISA_GENERIC), see isa.h.
var isaEnv = os.Getenv("HPUSIM_ISA")

// ISALevel is the cap in effect: 1 generic, 2 AVX2, 3 AVX-512 (the CPU may have less).
func ISALevel() int { return isaLevel() }
