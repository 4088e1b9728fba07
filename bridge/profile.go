package bridge

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"
)

// HPUSIM_LAZY_CPUPROFILE=path[:seconds] writes a Go CPU profile of the whole library (the
// lazy worker, kernels, recording) for the given seconds (default 30) after lazy mode
// starts: a debugging aid for the engine's own cost.
func startLazyProfile() {
	v := strings.TrimSpace(os.Getenv("HPUSIM_LAZY_CPUPROFILE"))
	if v == "" {
		return
	}
	path, secs := v, 30*time.Second
	if i := strings.LastIndexByte(v, ':'); i > 0 {
		if d, err := time.ParseDuration(v[i+1:] + "s"); err == nil {
			path, secs = v[:i], d
		}
	}
	f, err := os.Create(path)
	if err != nil {
		logf(levelError, "cpu profile: %v", err)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		logf(levelError, "cpu profile: %v", err)
		f.Close()
		return
	}
	time.AfterFunc(secs, func() {
		pprof.StopCPUProfile()
		f.Close()
	})
}

// HPUSIM_LAZY_OPTIME=path makes the worker time every op it runs (a fused group counts as
// one entry named after its ops) and keep a table of wall time per op in path, rewritten
// at most once a second and at process exit: which kernels a lazy graph spends its time in.
var opTimes = func() *opTimer {
	path := strings.TrimSpace(os.Getenv("HPUSIM_LAZY_OPTIME"))
	if path == "" {
		return nil
	}
	return &opTimer{path: path, by: map[string]*opTime{}}
}()

type opTime struct {
	calls int64
	total time.Duration
}

type opTimer struct {
	mu      sync.Mutex
	path    string
	by      map[string]*opTime
	written time.Time
}

func (t *opTimer) add(name string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.by[name]
	if o == nil {
		o = &opTime{}
		t.by[name] = o
	}
	o.calls++
	o.total += d
	if time.Since(t.written) >= time.Second {
		t.writeLocked()
	}
}

// flush writes the table now (at process exit).
func (t *opTimer) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writeLocked()
}

func (t *opTimer) writeLocked() {
	t.written = time.Now()
	names := make([]string, 0, len(t.by))
	var all time.Duration
	for n, o := range t.by {
		names = append(names, n)
		all += o.total
	}
	sort.Slice(names, func(i, j int) bool { return t.by[names[i]].total > t.by[names[j]].total })
	var b strings.Builder
	fmt.Fprintf(&b, "%10s %8s %10s %6s  op\n", "total_ms", "calls", "us/call", "share")
	for _, n := range names {
		o := t.by[n]
		fmt.Fprintf(&b, "%10.1f %8d %10.1f %5.1f%%  %s\n", float64(o.total)/1e6, o.calls,
			float64(o.total)/1e3/float64(o.calls), 100*float64(o.total)/float64(all), n)
	}
	if err := os.WriteFile(t.path, []byte(b.String()), 0o644); err != nil {
		logf(levelError, "op times: %v", err)
	}
}
