//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -lpthread
#include <immintrin.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "cteam.h"

// Nonzero: idle helpers sleep at once (the Go pool is running a job, or OpenBLAS's
// threads are). A plain word, read and written atomically, so Go can store to it.
uint32_t hpusim_team_hush;

enum { TEAM_MAX_HELPERS = 63 };

// The job in flight. Its fields are written by the owning caller before it publishes the
// job and stay put until every part has finished; a helper reads them only after it has
// claimed a part of that job, so never across jobs.
static hpusim_team_fn team_fn;
static void *team_arg;
// generation (16 bits) | parts (16) | claimed from the front (16) | from the back (16):
// a claim names the job it is for, so a helper that saw an earlier job claims nothing.
static _Atomic uint64_t team_taken;
static _Atomic uint32_t team_pending; // parts not finished; the owner sleeps on it
static _Atomic int team_err;          // the first error code of the job
static _Atomic int team_waiting;      // the owner is (about to be) asleep on team_pending
static _Atomic int team_allowed;      // helpers 0 .. allowed-1 may join the job
static _Atomic uint32_t team_seq;     // bumped per job; idle helpers sleep on it
static _Atomic int team_sleepers;
static _Atomic int64_t team_at;       // when the job was published (ns)
static _Atomic int64_t team_spin_ns;
static _Atomic int team_owned;        // a caller owns the team
static uint64_t team_gen;             // owner only
static pthread_mutex_t team_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int team_started;      // helpers started

static int64_t team_now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void team_futex_wait(_Atomic uint32_t *w, uint32_t v) {
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void team_futex_wake(_Atomic uint32_t *w, int n) {
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

// Claims the next part of job gen (front: the owner; back: helpers), or returns -1.
static int64_t team_claim(uint64_t gen, int back) {
	uint64_t t = atomic_load(&team_taken);
	for (;;) {
		if (t >> 48 != gen) return -1;
		int64_t parts = (t >> 32) & 0xffff, front = (t >> 16) & 0xffff, from_back = t & 0xffff;
		if (front + from_back >= parts) return -1;
		uint64_t next = back ? t + 1 : t + (1 << 16);
		if (atomic_compare_exchange_weak(&team_taken, &t, next)) return back ? parts - 1 - from_back : front;
	}
}

static void team_work(uint64_t gen, int back) {
	for (;;) {
		int64_t i = team_claim(gen, back);
		if (i < 0) return;
		int e = team_fn(team_arg, i);
		if (e) {
			int none = 0;
			atomic_compare_exchange_strong(&team_err, &none, e);
		}
		if (atomic_fetch_sub(&team_pending, 1) == 1 && atomic_load(&team_waiting)) team_futex_wake(&team_pending, 1);
	}
}

// Waits for a job after seen: spins about twice the idle gap the helper has lately seen
// between jobs (at most spin_ns; not at all when the gaps are longer, or while hushed),
// then sleeps on team_seq. The policy of the Go pool's helpers (parallel.go).
static uint32_t team_await(uint32_t seen, int64_t *gap) {
	int64_t idle = team_now(), limit = atomic_load(&team_spin_ns);
	int64_t budget = *gap >= limit ? 0 : 2 * *gap + 2000;
	if (budget > limit) budget = limit;
	uint32_t s;
	for (unsigned i = 0;; i++) {
		if ((s = atomic_load(&team_seq)) != seen) break;
		if (budget == 0 || ((i & 63) == 63 && (__atomic_load_n(&hpusim_team_hush, __ATOMIC_RELAXED) ||
		                                       team_now() - idle >= budget))) {
			// The owner bumps team_seq before it looks at team_sleepers; we count ourselves
			// before we look at team_seq: one of us sees the other.
			atomic_fetch_add(&team_sleepers, 1);
			while ((s = atomic_load(&team_seq)) == seen) team_futex_wait(&team_seq, seen);
			atomic_fetch_sub(&team_sleepers, 1);
			break;
		}
		_mm_pause();
	}
	int64_t g = atomic_load(&team_at) - idle;
	*gap += ((g > 0 ? g : 0) - *gap) / 4;
	return s;
}

static void *team_helper(void *p) {
	uint64_t v = (uint64_t)(uintptr_t)p;
	int idx = (int)(v >> 32);
	uint32_t seen = (uint32_t)v;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); // signals are the Go runtime's business
	int64_t gap = 0;
	for (;;) {
		seen = team_await(seen, &gap);
		if (idx < atomic_load(&team_allowed)) team_work(atomic_load(&team_taken) >> 48, 1);
	}
	return NULL;
}

// Starts helpers until there are n (as many as the system lets us).
static void team_grow(int n) {
	if (n > TEAM_MAX_HELPERS) n = TEAM_MAX_HELPERS;
	if (atomic_load(&team_started) >= n) return;
	pthread_mutex_lock(&team_mu);
	for (int i = atomic_load(&team_started); i < n; i++) {
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		uint64_t v = (uint64_t)i << 32 | atomic_load(&team_seq);
		int rc = pthread_create(&t, &at, team_helper, (void *)(uintptr_t)v);
		pthread_attr_destroy(&at);
		if (rc != 0) break;
		atomic_store(&team_started, i + 1);
	}
	pthread_mutex_unlock(&team_mu);
}

static int team_serial(hpusim_team_fn fn, void *arg, int64_t parts) {
	int err = 0;
	for (int64_t i = 0; i < parts; i++) {
		int e = fn(arg, i);
		if (e && !err) err = e;
	}
	return err;
}

int hpusim_team_run(int threads, hpusim_team_fn fn, void *arg, int64_t parts, int64_t spin_ns) {
	if (parts <= 0) return 0;
	int expect = 0;
	if (threads < 2 || parts == 1 || parts > HPUSIM_TEAM_MAX_PARTS ||
	    !atomic_compare_exchange_strong(&team_owned, &expect, 1))
		return team_serial(fn, arg, parts);
	team_grow(threads - 1);
	int helpers = atomic_load(&team_started);
	if (helpers > threads - 1) helpers = threads - 1;
	if (helpers < 1) {
		atomic_store(&team_owned, 0);
		return team_serial(fn, arg, parts);
	}
	__atomic_store_n(&hpusim_team_hush, 0, __ATOMIC_RELAXED);
	atomic_store(&team_spin_ns, spin_ns);
	team_fn = fn, team_arg = arg;
	atomic_store(&team_err, 0);
	atomic_store(&team_allowed, helpers);
	atomic_store(&team_pending, (uint32_t)parts);
	uint64_t gen = team_gen = (team_gen + 1) & 0xffff;
	atomic_store(&team_taken, gen << 48 | (uint64_t)parts << 32);
	atomic_store(&team_at, team_now());
	atomic_fetch_add(&team_seq, 1);
	if (atomic_load(&team_sleepers) > 0) team_futex_wake(&team_seq, INT_MAX);
	team_work(gen, 0);
	// The helpers are finishing their last parts: spin while they would, then sleep.
	int64_t start = team_now();
	for (unsigned i = 1; atomic_load(&team_pending); i++) {
		if ((i & 255) == 0 && team_now() - start >= spin_ns) {
			atomic_store(&team_waiting, 1);
			uint32_t p;
			while ((p = atomic_load(&team_pending)) != 0) team_futex_wait(&team_pending, p);
			atomic_store(&team_waiting, 0);
			break;
		}
		_mm_pause();
	}
	int err = atomic_load(&team_err);
	atomic_store(&team_owned, 0);
	return err;
}

// For tests: helpers started, and how many are asleep.
int hpusim_team_started(void) { return atomic_load(&team_started); }
int hpusim_team_sleeping(void) { return atomic_load(&team_sleepers); }

// For tests: a job whose part i adds 1 to runs[i], records the thread that ran it in
// tids[i], spins about spin_ns, and returns 7 when i is fail.
typedef struct {
	int32_t *runs, *tids;
	int64_t fail, spin_ns;
} team_check_job;

static int team_check_part(void *arg, int64_t i) {
	team_check_job *j = arg;
	__atomic_add_fetch(&j->runs[i], 1, __ATOMIC_RELAXED);
	j->tids[i] = (int32_t)syscall(SYS_gettid);
	for (int64_t t0 = team_now(); team_now() - t0 < j->spin_ns;) _mm_pause();
	return i == j->fail ? 7 : 0;
}

int hpusim_team_check(int threads, int32_t *runs, int32_t *tids, int64_t parts, int64_t fail, int64_t spin_ns,
                      int64_t helper_spin_ns) {
	team_check_job j = {runs, tids, fail, spin_ns};
	return hpusim_team_run(threads, team_check_part, &j, parts, helper_spin_ns);
}

int32_t hpusim_team_tid(void) { return (int32_t)syscall(SYS_gettid); }
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// teamHushWord is the C team's hush (hpusim_team_hush).
var teamHushWord = (*atomic.Uint32)(unsafe.Pointer(&C.hpusim_team_hush))

// hushTeam tells the C team's idle helpers to sleep now instead of spinning out their
// window: the Go pool's helpers (or OpenBLAS's threads) are about to need the cores.
func hushTeam() {
	if teamHushWord.Load() == 0 {
		teamHushWord.Store(1)
	}
}

// teamCheck runs the check job (see the C above) of len(runs) parts, each spinning spin
// ns, on threads threads whose idle helpers spin up to helperSpin ns; runs and tids get
// one entry a part. For tests (a _test.go file cannot use cgo).
func teamCheck(threads int, runs, tids []int32, fail int, spin, helperSpin int64) int {
	return int(C.hpusim_team_check(C.int(threads), (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(runs))),
		(*C.int32_t)(unsafe.Pointer(unsafe.SliceData(tids))), C.int64_t(len(runs)), C.int64_t(fail), C.int64_t(spin),
		C.int64_t(helperSpin)))
}

func teamStarted() int  { return int(C.hpusim_team_started()) }
func teamSleeping() int { return int(C.hpusim_team_sleeping()) }
func threadID() int32   { return int32(C.hpusim_team_tid()) }
