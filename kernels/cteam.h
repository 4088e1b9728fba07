// The C team (cteam_cgo.go): persistent helper threads that run the parts of a C kernel's
// job without going back to Go for each part. A kernel's cgo entry point builds its job
// on the C stack and calls hpusim_team_run once, with the thread count runTeam
// (cteam.go) granted it.
#ifndef HPUSIM_CTEAM_H
#define HPUSIM_CTEAM_H
#include <stdint.h>

// One part of a job: 0, or an error code (> 0) that the job reports.
typedef int (*hpusim_team_fn)(void *arg, int64_t part);

// The most parts one job may have; a larger job runs on the calling thread.
enum { HPUSIM_TEAM_MAX_PARTS = 0xffff };

// Runs fn(arg, 0) ... fn(arg, parts-1), each once, on the calling thread and up to
// threads-1 helpers (threads < 2: all on the caller, in order), and returns when every
// part has finished: 0, or the first error code a part returned (the other parts still
// run). spin_ns bounds how long an idle helper spins before it sleeps. The caller claims
// parts from the front and the helpers from the back, so with two threads each runs the
// same parts call after call. A call while another is running (another thread) runs its
// parts on its caller.
int hpusim_team_run(int threads, hpusim_team_fn fn, void *arg, int64_t parts, int64_t spin_ns);

#endif
