// Command capi is the C ABI of hpusim, built with -buildmode=c-shared. Every export
// returns an integer status (0 ok, nonzero error) and never lets a Go panic cross into C;
// the message of the last error on the calling OS thread is read with hpusim_last_error.
package main

/*
#include <stdint.h>
#include <string.h>
*/
import "C"

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"hpusim/bridge"
	"hpusim/device"
	"hpusim/kernels"
)

func main() {}

const (
	statusOK    = 0
	statusError = 1
	statusOOM   = 2
)

var lastErr sync.Map // OS thread id -> string

func setErr(err error) C.int {
	msg := err.Error()
	if kind := bridge.ErrorKind(err); kind != "" {
		// the exception class the caller raises (a lazy graph's labelled node)
		msg = kind + ": " + msg
	}
	lastErr.Store(syscall.Gettid(), msg)
	if _, ok := err.(*device.OOMError); ok {
		return statusOOM
	}
	return statusError
}

// guard turns a panic into an error status; use as `defer guard(&rc)`.
func guard(rc *C.int) {
	if r := recover(); r != nil {
		msg := fmt.Sprint(r)
		if kp, ok := r.(kernels.KernelPanic); ok {
			msg = kp.Error()
		} else {
			msg = "kernel panic: " + msg
		}
		*rc = setErr(fmt.Errorf("%s", msg))
	}
}

//export hpusim_last_error
func hpusim_last_error(buf *C.char, n C.int) C.int {
	v, ok := lastErr.Load(syscall.Gettid())
	if !ok || buf == nil || n <= 0 {
		return 0
	}
	msg := v.(string)
	if len(msg) > int(n)-1 {
		msg = msg[:int(n)-1]
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	copy(dst, msg)
	dst[len(msg)] = 0
	return C.int(len(msg))
}

//export hpusim_init
func hpusim_init() (rc C.int) {
	defer guard(&rc)
	if _, err := device.Init(); err != nil {
		return setErr(err)
	}
	return statusOK
}

//export hpusim_device_count
func hpusim_device_count() C.int { return C.int(device.Count()) }

//export hpusim_device_name
func hpusim_device_name(dev C.int, buf *C.char, n C.int) (rc C.int) {
	defer guard(&rc)
	d, err := device.Get(int(dev))
	if err != nil {
		return setErr(err)
	}
	if buf == nil || n <= 0 {
		return setErr(fmt.Errorf("null buffer"))
	}
	name := d.Gen.Name()
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	k := copy(dst[:n-1], name)
	dst[k] = 0
	return statusOK
}

//export hpusim_alloc
func hpusim_alloc(dev C.int, nbytes C.int64_t, out *unsafe.Pointer) (rc C.int) {
	defer guard(&rc)
	if out == nil {
		return setErr(fmt.Errorf("hpusim_alloc: null output pointer"))
	}
	d, err := device.Get(int(dev))
	if err != nil {
		return setErr(err)
	}
	p, err := d.Alloc(int64(nbytes))
	if err != nil && bridge.StreamPending() {
		bridge.DrainKeep() // memory freed while launched graphs ran is released when they end
		p, err = d.Alloc(int64(nbytes))
	}
	if err != nil {
		return setErr(err)
	}
	bridge.NoteAlloc(p) // a capture tells its outputs from memory made before it
	*out = p
	return statusOK
}

//export hpusim_free
func hpusim_free(p unsafe.Pointer) (rc C.int) {
	defer guard(&rc)
	// bridge.Free defers the free while a lazy graph still uses the memory.
	if err := bridge.Free(p); err != nil {
		return setErr(err)
	}
	return statusOK
}

// hpusim_memory_stats writes the 8 counters in device.Stats field order.
//
//export hpusim_memory_stats
func hpusim_memory_stats(dev C.int, out *C.int64_t) (rc C.int) {
	defer guard(&rc)
	return writeDeviceInts(dev, out, func(d *device.Device) []int64 {
		s := d.Stats()
		return []int64{s.Limit, s.InUse, s.MaxInUse, s.NumAllocs, s.NumFrees, s.MaxAllocSize, s.TotalSystemAllocs, s.TotalSystemFrees}
	})
}

// hpusim_defrag_stats writes the memory_defragmentation counters: attempts, successful
// attempts, total and longest time in nanoseconds.
//
//export hpusim_defrag_stats
func hpusim_defrag_stats(dev C.int, out *C.int64_t) (rc C.int) {
	defer guard(&rc)
	return writeDeviceInts(dev, out, func(d *device.Device) []int64 {
		s := d.Defrag()
		return []int64{s.Number, s.Successful, s.TotalNs, s.MaxNs}
	})
}

// writeDeviceInts copies the counters vals reads from device dev into out.
func writeDeviceInts(dev C.int, out *C.int64_t, vals func(*device.Device) []int64) C.int {
	if err := bridge.Drain(); err != nil { // memory a launched graph still holds is freed after it
		return setErr(err)
	}
	d, err := device.Get(int(dev))
	if err != nil {
		return setErr(err)
	}
	if out == nil {
		return setErr(fmt.Errorf("null output pointer"))
	}
	v := vals(d)
	copy(unsafe.Slice((*int64)(unsafe.Pointer(out)), len(v)), v)
	return statusOK
}

//export hpusim_reset_peak
func hpusim_reset_peak(dev C.int) (rc C.int) {
	defer guard(&rc)
	if err := bridge.Drain(); err != nil {
		return setErr(err)
	}
	d, err := device.Get(int(dev))
	if err != nil {
		return setErr(err)
	}
	d.ResetPeak()
	return statusOK
}

// hpusim_empty_cache returns every device's cached free blocks to the host.
//
//export hpusim_empty_cache
func hpusim_empty_cache() (rc C.int) {
	defer guard(&rc)
	if err := bridge.Drain(); err != nil {
		return setErr(err)
	}
	for i := 0; i < device.Count(); i++ {
		d, err := device.Get(i)
		if err != nil {
			return setErr(err)
		}
		d.EmptyCache()
	}
	return statusOK
}

//export hpusim_reset_accumulated
func hpusim_reset_accumulated(dev C.int) (rc C.int) {
	defer guard(&rc)
	if err := bridge.Drain(); err != nil {
		return setErr(err)
	}
	d, err := device.Get(int(dev))
	if err != nil {
		return setErr(err)
	}
	d.ResetAccumulated()
	return statusOK
}

// hpusim_check_dtype rejects dtypes the emulated generation does not support, with the
// bridge's messages.
//
//export hpusim_check_dtype
func hpusim_check_dtype(dtype C.int) (rc C.int) {
	defer guard(&rc)
	cfg, _ := device.Init()
	switch kernels.DType(dtype) {
	case 8, 9, 10: // complex
		return setErr(fmt.Errorf("Complex datatype is not supported on HPU device."))
	case kernels.Float16:
		if cfg.Gen == device.Gaudi {
			return setErr(fmt.Errorf("Expected false to be true, but got false.  float16/half is not supported on Gaudi."))
		}
	case kernels.Float8E5M2, kernels.Float8E4M3FN:
		if cfg.Gen == device.Gaudi { // fp8 arrived with Gaudi2
			return setErr(fmt.Errorf("Expected false to be true, but got false.  float8 is not supported on Gaudi."))
		}
	}
	if !kernels.DType(dtype).Valid() {
		return setErr(fmt.Errorf("dtype code %d is not supported on HPU device", int(dtype)))
	}
	return statusOK
}

//export hpusim_synchronize
func hpusim_synchronize(dev C.int) (rc C.int) {
	defer guard(&rc)
	if err := bridge.Synchronize(int(dev)); err != nil {
		return setErr(err)
	}
	return statusOK
}

//export hpusim_op_id
func hpusim_op_id(name *C.char) C.int {
	if name == nil {
		return -1
	}
	id, ok := bridge.Lookup(C.GoString(name))
	if !ok {
		return -1
	}
	return C.int(id)
}

// hpusim_op_names writes the registered op names, newline-separated; returns the length
// needed (call again with a larger buffer if it exceeds n).
//
//export hpusim_op_names
func hpusim_op_names(buf *C.char, n C.int) C.int {
	s := ""
	for i, name := range bridge.Names() {
		if i > 0 {
			s += "\n"
		}
		s += name
	}
	if buf != nil && int(n) > len(s) {
		dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
		copy(dst, s)
		dst[len(s)] = 0
	}
	return C.int(len(s))
}

const maxDims = 64

// decodeCall reads the frame [ntensors, {ptr, dtype, ndim, sizes.., strides..}.., nints, ints..]
// and nf floats.
//
// It runs once per op, so it allocates a fixed few objects whatever the tensor count: the
// Call, its tensor slice, one copy of the frame's words (every tensor's sizes and strides
// and the ints are sub-slices of it) and the floats. The Call owns that copy, so a lazy
// graph may keep it after the caller's frame is gone. Sub-slices are capacity-capped, so
// an append by a kernel reallocates instead of overwriting a neighbour.
func decodeCall(desc *C.int64_t, ndesc C.int, fl *C.double, nf C.int) (*bridge.Call, error) {
	if ndesc < 0 || nf < 0 || (ndesc > 0 && desc == nil) || (nf > 0 && fl == nil) {
		return nil, fmt.Errorf("invalid call frame")
	}
	src := unsafe.Slice((*int64)(unsafe.Pointer(desc)), int(ndesc))
	if len(src) == 0 {
		return nil, fmt.Errorf("truncated call frame")
	}
	nt := src[0]
	if nt < 0 || nt > 4096 {
		return nil, fmt.Errorf("invalid tensor count %d", nt)
	}
	w := make([]int64, len(src))
	copy(w, src)
	c := &bridge.Call{T: make([]kernels.Tensor, nt)}
	pos := 1
	for i := range c.T {
		if pos+3 > len(w) {
			return nil, fmt.Errorf("truncated call frame")
		}
		// The frame slot holds a raw address; reinterpret it in place (no uintptr round trip).
		ptr := *(*unsafe.Pointer)(unsafe.Pointer(&src[pos]))
		dt, nd := w[pos+1], w[pos+2]
		pos += 3
		if nd < 0 || nd > maxDims || pos+2*int(nd) > len(w) {
			return nil, fmt.Errorf("invalid tensor %d descriptor (ndim %d)", i, nd)
		}
		n := int(nd)
		c.T[i] = kernels.Tensor{Ptr: ptr, DType: kernels.DType(dt),
			Sizes: w[pos : pos+n : pos+n], Strides: w[pos+n : pos+2*n : pos+2*n]}
		pos += 2 * n
	}
	if pos < len(w) {
		ni := w[pos]
		pos++
		if ni < 0 || pos+int(ni) > len(w) {
			return nil, fmt.Errorf("invalid attribute count %d", ni)
		}
		if ni > 0 {
			c.I = w[pos : pos+int(ni) : pos+int(ni)]
		}
	}
	if nf > 0 {
		c.F = append([]float64(nil), unsafe.Slice((*float64)(unsafe.Pointer(fl)), int(nf))...)
	}
	return c, nil
}

//export hpusim_run
func hpusim_run(op C.int, desc *C.int64_t, ndesc C.int, fl *C.double, nf C.int) (rc C.int) {
	defer guard(&rc)
	c, err := decodeCall(desc, ndesc, fl, nf)
	if err != nil {
		return setErr(err)
	}
	if err := bridge.Execute(int(op), c); err != nil {
		return setErr(err)
	}
	return statusOK
}

// hpusim_run_labeled is hpusim_run for an op whose data errors (an index out of range)
// a lazy graph reports when it runs: label ("IndexError:index_select") names the
// exception class CPU raises and the aten op the program called (bridge.NodeError).
//
//export hpusim_run_labeled
func hpusim_run_labeled(op C.int, desc *C.int64_t, ndesc C.int, fl *C.double, nf C.int, label *C.char) (rc C.int) {
	defer guard(&rc)
	c, err := decodeCall(desc, ndesc, fl, nf)
	if err != nil {
		return setErr(err)
	}
	if label != nil {
		c.Label = C.GoString(label)
	}
	if err := bridge.Execute(int(op), c); err != nil {
		return setErr(err)
	}
	return statusOK
}

// Lazy mode (bridge/lazy.go).

//export hpusim_lazy_enable
func hpusim_lazy_enable() (rc C.int) {
	defer guard(&rc)
	bridge.EnableLazy()
	return statusOK
}

// hpusim_lazy_step launches the pending graph (mark_step); wait != 0 also waits for it.
// It reports the first failure of an earlier graph.
//
//export hpusim_lazy_step
func hpusim_lazy_step(wait C.int, reason *C.char) (rc C.int) {
	defer guard(&rc)
	why := "mark_step"
	if reason != nil {
		why = C.GoString(reason)
	}
	if err := bridge.Step(wait != 0, why); err != nil {
		return setErr(err)
	}
	return statusOK
}

// hpusim_lazy_graph_break launches the pending graph before a CPU fallback.
//
//export hpusim_lazy_graph_break
func hpusim_lazy_graph_break() (rc C.int) {
	defer guard(&rc)
	if err := bridge.GraphBreak(); err != nil {
		return setErr(err)
	}
	return statusOK
}

//export hpusim_lazy_pending
func hpusim_lazy_pending() C.int { return C.int(bridge.PendingOps()) }

// hpusim_lazy_stats writes the engine's counters as JSON; returns the length needed.
//
//export hpusim_lazy_stats
func hpusim_lazy_stats(buf *C.char, n C.int) C.int {
	s := bridge.StatsJSON()
	if buf != nil && int(n) > len(s) {
		dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
		copy(dst, s)
		dst[len(s)] = 0
	}
	return C.int(len(s))
}

// hpusim_lazy_quiesce runs all pending lazy work before host code touches device bytes.
//
//export hpusim_lazy_quiesce
func hpusim_lazy_quiesce() (rc C.int) {
	defer guard(&rc)
	bridge.Quiesce()
	return statusOK
}
