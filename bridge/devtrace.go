package bridge

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Device trace for the profiler (torch.profiler with ProfilerActivity.HPU): while it is on,
// every kernel an eager op runs, every op or fused group a lazy graph runs, and every
// graph (recipe) launch is recorded with its wall-clock start and duration on the emulated
// device. The Python side merges them into the Chrome trace as the bridge does.

var traceOn atomic.Bool

// traceCap bounds the events kept between two reads (a long profile keeps its start).
const traceCap = 1 << 20

// TraceEvent is one span on the device.
type TraceEvent struct {
	Name    string `json:"name"`
	Cat     string `json:"cat"`  // Kernel, FusedKernel or Recipe
	Lane    string `json:"lane"` // the engine that ran it: eager, graph worker
	StartNs int64  `json:"start_ns"`
	DurNs   int64  `json:"dur_ns"`
	Graph   int64  `json:"graph,omitempty"`  // lazy graph number
	Ops     int    `json:"ops,omitempty"`    // ops in a fused group or a recipe
	Recipe  string `json:"recipe,omitempty"` // the captured recipe an HPU-graph replay ran
}

var (
	traceMu     sync.Mutex
	traceEvents []TraceEvent
	traceLost   int64
)

// SetTrace turns device tracing on or off; turning it on drops earlier events.
func SetTrace(on bool) {
	traceMu.Lock()
	if on {
		traceEvents, traceLost = nil, 0
	}
	traceMu.Unlock()
	traceOn.Store(on)
}

func traceAdd(ev TraceEvent) {
	traceMu.Lock()
	if len(traceEvents) < traceCap {
		traceEvents = append(traceEvents, ev)
	} else {
		traceLost++
	}
	traceMu.Unlock()
}

func traceSpan(name, cat, lane string, t0 time.Time, graph int64, ops int) {
	traceAdd(TraceEvent{Name: name, Cat: cat, Lane: lane, StartNs: t0.UnixNano(),
		DurNs: time.Since(t0).Nanoseconds(), Graph: graph, Ops: ops})
}

// replayPrefix starts the launch reason of a captured recipe's run (capture.go): an HPU
// graph replay or a compiled region's run in lazy mode, named as such on the trace so it
// can be told from a recorded graph.
const replayPrefix = "replay of "

// traceLaunch records one graph launch: "graph #N" for a recorded lazy graph, "recipe
// replay" with the recipe's id for a replay of a captured one.
func traceLaunch(g *graph, t0 time.Time) {
	ev := TraceEvent{Name: fmt.Sprintf("graph #%d", g.seq), Cat: "Recipe", Lane: "graph launch",
		StartNs: t0.UnixNano(), DurNs: time.Since(t0).Nanoseconds(), Graph: int64(g.seq), Ops: len(g.nodes)}
	if id, ok := strings.CutPrefix(g.reason, replayPrefix); ok {
		ev.Name, ev.Recipe = "recipe replay", id
	}
	traceAdd(ev)
}

// TraceJSON returns the events recorded so far (and how many did not fit) as JSON.
func TraceJSON() []byte {
	traceMu.Lock()
	defer traceMu.Unlock()
	b, _ := json.Marshal(struct {
		Events []TraceEvent `json:"events"`
		Lost   int64        `json:"lost"`
	}{traceEvents, traceLost})
	return b
}
