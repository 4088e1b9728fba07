package bridge

import (
	"errors"
	"strings"
	"testing"
)

func TestNodeFailureCarriesTheLabelledClassThroughPoison(t *testing.T) {
	op := &Op{Name: "index_select"}
	cause := errors.New("index out of range in self")
	labelled := nodeFailure("lazy graph #4", &node{op: op, label: "IndexError:embedding"}, cause)
	if k := ErrorKind(labelled); k != "IndexError" {
		t.Fatalf("kind %q, want IndexError", k)
	}
	if msg := labelled.Error(); !strings.HasPrefix(msg, "embedding: index out of range in self") ||
		!strings.Contains(msg, "lazy graph #4") || !strings.Contains(msg, "op index_select") {
		t.Fatalf("message %q", msg)
	}
	if !errors.Is(labelled, cause) {
		t.Fatal("the kernel's error is not wrapped")
	}
	// a read of a tensor the failure poisoned raises the same class
	if k := ErrorKind(poisonError(&storage{poison: labelled})); k != "IndexError" {
		t.Fatalf("poisoned read kind %q", k)
	}
	plain := nodeFailure("lazy graph #5", &node{op: op}, cause)
	if k := ErrorKind(plain); k != "" {
		t.Fatalf("unlabelled kind %q", k)
	}
	if msg := plain.Error(); msg != "lazy graph #5 failed in op index_select: index out of range in self" {
		t.Fatalf("unlabelled message %q", msg)
	}
}

func TestReportPoisonRaisesTheFailureOnce(t *testing.T) {
	failure := nodeFailure("lazy graph #1", &node{op: &Op{Name: "index_gather"}, label: "RuntimeError:gather"},
		errors.New("index 5 is out of bounds"))
	st := &storage{poison: failure}
	e := &engine{err: failure}
	if err := e.reportPoison(st); err != failure {
		t.Fatalf("first use: %v, want the failure itself", err)
	}
	if e.err != nil {
		t.Fatalf("the failure stays pending: %v", e.err)
	}
	if err := e.reportPoison(st); !strings.Contains(err.Error(), "holds no valid data") || ErrorKind(err) != "RuntimeError" {
		t.Fatalf("later use: %v", err)
	}
}
