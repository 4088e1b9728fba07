package bridge

import (
	"errors"
	"fmt"
	"strings"
)

// NodeError is the failure of a lazy graph's node, reported when the graph runs, after
// the program recorded the op and went on. A node recorded with a label (Call.Label,
// "IndexError:index_select": the exception class CPU raises for the op's data errors and
// the aten op the program called) reports the failure under that aten op and carries the
// class in Kind; the C ABI prefixes Kind to the message so that the Python side raises
// the class CPU raises (an out-of-range index: IndexError for index_select, RuntimeError
// for gather), where an unlabelled failure stays the bridge's RuntimeError.
type NodeError struct {
	Kind string // an exception class name, or "" for none in particular
	msg  string
	err  error
}

func (e *NodeError) Error() string { return e.msg }
func (e *NodeError) Unwrap() error { return e.err }

// nodeFailure wraps err, the failure of node n of the graph named by where ("lazy graph #3").
func nodeFailure(where string, n *node, err error) error {
	kind, aten, ok := strings.Cut(n.label, ":")
	if !ok || kind == "" || aten == "" {
		return &NodeError{msg: fmt.Sprintf("%s failed in op %s: %v", where, n.op.Name, err), err: err}
	}
	return &NodeError{Kind: kind, err: err,
		msg: fmt.Sprintf("%s: %v (found when %s ran its op %s)", aten, err, where, n.op.Name)}
}

// ErrorKind is the exception class err asks the caller to raise, "" for the default.
func ErrorKind(err error) string {
	var ne *NodeError
	if errors.As(err, &ne) {
		return ne.Kind
	}
	return ""
}

// streamFailure is a node's own failure met while streaming the graph's prefix, before
// the graph has a launch number; execute reports it with nodeFailure.
type streamFailure struct{ err error }

func (s *streamFailure) Error() string { return "failed: " + s.err.Error() }
