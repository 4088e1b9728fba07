// Package bridge is the op layer between the C ABI and the kernels: a table of named ops
// and the executor that runs them: eagerly, or recorded into lazy graphs (lazy.go).
package bridge

import (
	"fmt"
	"sync"
	"time"

	"hpusim/kernels"
)

// Call is one op invocation: tensors (outputs first, by each op's convention), integer
// and floating attributes.
type Call struct {
	T []kernels.Tensor
	I []int64
	F []float64
	// Label, for a lazy graph's node, names the exception class and aten op its data
	// errors are reported as when the graph runs (NodeError); "" for none.
	Label string
}

// Kernel runs an op.
type Kernel func(c *Call) error

// Op is a registered operation.
type Op struct {
	ID      int
	Name    string
	Tensors int // exact tensor count, or -1 when variadic
	Run     Kernel
}

var (
	mu     sync.RWMutex
	ops    []*Op
	byName = map[string]*Op{}
)

// Register adds an op; names are unique. Called from init functions only.
func Register(name string, tensors int, k Kernel) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := byName[name]; dup {
		panic("bridge: duplicate op " + name)
	}
	op := &Op{ID: len(ops), Name: name, Tensors: tensors, Run: k}
	ops = append(ops, op)
	byName[name] = op
}

// Lookup resolves an op name to its id.
func Lookup(name string) (int, bool) {
	mu.RLock()
	defer mu.RUnlock()
	op, ok := byName[name]
	if !ok {
		return -1, false
	}
	return op.ID, true
}

// Names lists every registered op, in id order.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.Name
	}
	return out
}

// Execute validates a call and runs it (eager) or records it into the current graph (lazy).
func Execute(id int, c *Call) error {
	mu.RLock()
	if id < 0 || id >= len(ops) {
		mu.RUnlock()
		return fmt.Errorf("unknown op handle %d", id)
	}
	op := ops[id]
	mu.RUnlock()
	if op.Tensors >= 0 && len(c.T) != op.Tensors {
		return fmt.Errorf("%s: expected %d tensors, got %d", op.Name, op.Tensors, len(c.T))
	}
	for i, t := range c.T {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%s: tensor %d: %v", op.Name, i, err)
		}
	}
	if devStream.Touches(c.T) { // launched graphs over these bytes run first (stream.go)
		if err := Drain(); err != nil {
			return err
		}
	}
	if capActive.Load() {
		captureMu.Lock()
		cp := capCur
		captureMu.Unlock()
		if cp != nil {
			return cp.record(op, c)
		}
	}
	if lazyOn.Load() {
		t0 := time.Now()
		err := eng.record(op, c)
		eng.noteRecord(time.Since(t0).Nanoseconds())
		return err
	}
	if traceOn.Load() {
		t0 := time.Now()
		err := runKernel(op, c)
		traceSpan(op.Name, "Kernel", "eager", t0, 0, 1)
		return err
	}
	return runKernel(op, c)
}

func runKernel(op *Op, c *Call) error {
	if err := op.Run(c); err != nil {
		return fmt.Errorf("%s: %v", op.Name, err)
	}
	return nil
}

// Synchronize waits for queued device work. In lazy mode it is a step marker: the pending
// graph is launched and waited for, and a failure of any earlier graph is raised here.
func Synchronize(dev int) error {
	if err := Drain(); err != nil {
		return err
	}
	if capActive.Load() {
		splitCapture()
	}
	if e := eng; e != nil {
		return e.sync("synchronize")
	}
	return nil
}
