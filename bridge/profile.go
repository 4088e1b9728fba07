package bridge

import (
	"os"
	"runtime/pprof"
	"strings"
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
