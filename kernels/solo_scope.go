package kernels

import "sync/atomic"

// soloScopes counts the callers that asked, through EnterSolo, for kernels to run every
// part on their calling thread. A compiled region of tiny kernels (the MLP's 64-wide
// GEMMs) runs faster that way than handing half of each kernel to a pool helper: the
// hand-off costs about what the half saves, and a helper the OS deschedules holds up the
// kernel. Parts do not change (they depend only on the worker count), so neither do
// results. While a scope is open, kernels on other threads keep to theirs too.
var soloScopes atomic.Int32

// EnterSolo opens a solo scope; ExitSolo closes it.
func EnterSolo() { soloScopes.Add(1) }

// ExitSolo closes a scope EnterSolo opened.
func ExitSolo() { soloScopes.Add(-1) }

func soloScoped() bool { return soloScopes.Load() > 0 }
