package kernels

import "fmt"

// The C team (cteam.h, cteam_cgo.go) runs a C kernel's parts on persistent pthreads from
// one cgo call: on a 2-core machine the Go pool's one cgo call per part, and the extra
// runtime threads the Go scheduler wakes around them, cost a bf16 GEMM about 15-25% of
// its time against oneDNN, which does the same split from one OpenMP region.
//
// The team and the Go pool share the cores: a team job takes the pool's busy flag, so a
// RunParts while it runs (a concurrent goroutine) runs its parts on its caller, and a
// team job inside a RunParts part (or beside another team job) runs its parts on its
// caller too; each side tells the other's idle helpers to sleep instead of spinning
// (two spinning helpers and a caller would be three busy threads on two cores).

// TeamError is a C part's error code, reported by the job.
type TeamError struct{ Code int }

func (e TeamError) Error() string {
	return fmt.Sprintf("kernels: a C team part failed (code %d)", e.Code)
}

// runTeam makes one C team job's cgo call: call(threads) runs it through hpusim_team_run
// with that many threads and returns its code. threads is Workers() when split is true
// and the cores are free (no solo scope, no RunParts or other team job in flight),
// otherwise 1 (every part on the caller, in order). The parts are the kernel's, from
// Workers() alone, so results do not depend on which.
func runTeam(split bool, call func(threads int) int) error {
	threads := 1
	if split && Workers() >= 2 && !soloNow() && workPool.busy.CompareAndSwap(false, true) {
		threads = Workers()
		defer workPool.busy.Store(false)
		workPool.away.Store(true)
	}
	if code := call(threads); code != 0 {
		return TeamError{code}
	}
	return nil
}
