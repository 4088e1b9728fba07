package main

import "C"

import (
	"unsafe"

	"hpusim/bridge"
)

// hpusim_trace_enable turns the device trace (for the profiler) on (1) or off (0); turning it
// on drops earlier events.
//
//export hpusim_trace_enable
func hpusim_trace_enable(on C.int) (rc C.int) {
	defer guard(&rc)
	bridge.SetTrace(on != 0)
	return statusOK
}

// hpusim_trace_json writes the device events recorded so far as JSON into buf (when it
// fits, with a terminating zero) and returns the length needed.
//
//export hpusim_trace_json
func hpusim_trace_json(buf *C.char, n C.int) C.int {
	s := bridge.TraceJSON()
	if buf != nil && int(n) > len(s) {
		dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
		copy(dst, s)
		dst[len(s)] = 0
	}
	return C.int(len(s))
}
