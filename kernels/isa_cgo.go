//go:build cgo

package kernels

/*
#include "isa.h"
static int hpusim_isa_level(void) { return hpusim_isa_cap(); }
*/
import "C"

func isaLevel() int { return int(C.hpusim_isa_level()) }
