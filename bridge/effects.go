package bridge

import "strings"

// Effects of an op on its tensor operands, for the lazy graph passes. Only what is listed
// here is optimised; anything unknown is treated as reading and writing every operand,
// which keeps program order and every result (it only forgoes dead-code removal).

// effect classifies one call's operands.
type effect struct {
	elementwise bool  // an "ew.*" op: T[0] = f(T[1:]) element by element
	writes      []int // operand indices the call may write
	// writeOnly: every written operand is an output the call fully overwrites before (if
	// ever) reading it, so its previous contents do not matter (in-place buffer reuse).
	writeOnly bool
	readsAll  bool   // every operand may be read (outputs included)
	dynInts   uint64 // bit i: integer attribute i is a value bound at launch, not structure
}

// dynamicInts lists integer attributes that are data rather than structure: a random op's
// (seed, offset) pair changes every call and a fill value is a scalar, so they are bound
// at launch like addresses and floats instead of forcing a recompilation.
var dynamicInts = map[string]uint64{
	"uniform": 0b11, "normal": 0b11, "bernoulli": 0b11, "random_int": 0b11, "dropout": 0b11,
	"fill": 0b10, "attention_fwd": 0b110, "attention_bwd": 0b110,
	"attention_dropout_mask": 0b110,
}

// fixedWrites maps ops to the operand positions they write; -k means "from k onwards".
var fixedWrites = map[string][]int{
	"copy": {0}, "fill": {0}, "bgemm": {0}, "conv2d_fwd": {0},
	"avg_pool2d": {0}, "avg_pool2d_bwd": {0}, "adaptive_avg_pool2d": {0},
	"adaptive_avg_pool2d_bwd": {0}, "max_pool2d_bwd": {0}, "index_select": {0},
	"embedding_bwd": {0}, "red.reduce": {0}, "red.cumsum": {0}, "red.softmax": {0},
	"red.softmax_backward": {0}, "loss.nll_backward": {0},
	"max_pool2d": {0, 1}, "red.argreduce": {0, 1}, "loss.nll_forward": {0, 1},
	"uniform": {0}, "normal": {0}, "random_int": {0}, "bernoulli": {0}, "dropout": {0, 1},
	"dropout_bwd": {0}, "cat": {0}, "index_gather": {0}, "index_put": {0}, "div_count": {0},
	"nonzero_count": {0}, "nonzero": {0}, "tri": {0}, "sort": {0, 1}, "topk": {0, 1},
	"arange": {0}, "linspace": {0},
	"rms_norm": {0, 1}, "rms_norm_bwd": {0, 1}, "attention_fwd": {0, 1, 2}, "attention_bwd": {0, 1, 2},
	"attention_dropout_mask": {0}, "rope": {0},
	// Optional operand lists mix outputs with inputs (batch-norm running stats are both);
	// every optional slot counts as written.
	"conv2d_bwd": {-3}, "layer_norm_bwd": {-4}, "batch_norm_fwd": {0, -2}, "batch_norm_bwd": {-2},
}

// writeOnlyOps are the non-elementwise ops whose written operands are pure outputs: every
// element of the view is written and nothing of it is read before. (Ops that accumulate
// into an output, or take a running statistic in and out, must not be listed.)
var writeOnlyOps = map[string]bool{
	"bgemm": true, "conv2d_fwd": true, "copy": true, "fill": true, "red.softmax": true,
	"max_pool2d": true, "avg_pool2d": true, "adaptive_avg_pool2d": true,
	"rms_norm": true, "rms_norm_bwd": true,
}

// effectsOf returns the effect of op with n operands.
func effectsOf(op *Op, n int) effect {
	if strings.HasPrefix(op.Name, "ew.") {
		return effect{elementwise: true, writes: []int{0}, writeOnly: true}
	}
	e := effectsOfFixed(op, n)
	e.dynInts = dynamicInts[op.Name]
	e.writeOnly = writeOnlyOps[op.Name]
	return e
}

func effectsOfFixed(op *Op, n int) effect {
	spec, ok := fixedWrites[op.Name]
	if !ok {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return effect{writes: all, readsAll: true}
	}
	var w []int
	for _, k := range spec {
		if k >= 0 {
			if k < n {
				w = append(w, k)
			}
			continue
		}
		for i := -k; i < n; i++ {
			w = append(w, i)
		}
	}
	return effect{writes: w, readsAll: true}
}

// reads reports whether operand i may be read.
func (e effect) reads(i int) bool { return e.readsAll || i > 0 }

// writesOp reports whether operand i may be written.
func (e effect) writesOp(i int) bool {
	for _, w := range e.writes {
		if w == i {
			return true
		}
	}
	return false
}
