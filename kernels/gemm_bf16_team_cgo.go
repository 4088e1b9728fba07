//go:build cgo && amd64 && gbprobe

package kernels

// Diagnostics only (build tag gbprobe, never in the library): the bf16 blocked GEMM's
// two-worker split driven by a C pthread team from one cgo call, and one column part timed
// inside C, to tell the kernel's own scaling from what the Go pool adds. See
// gemm_bf16_team_test.go.

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lpthread
#pragma GCC optimize("fp-contract=off")
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
// The kernel's entry points under other names: the library's copy is in
// gemm_bf16_blocked_cgo.go's object.
#define hpusim_gb_tiles team_gb_tiles
#define hpusim_gb_pack_a team_gb_pack_a
#define hpusim_gb_pack_b team_gb_pack_b
#include "gemm_bf16_blocked.h"

static int64_t team_ns(clockid_t c) {
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

// One square product o = a@b (s x s, row-major bfloat16), split as bgemmBF16Blocked splits
// it: column parts of per B panels, each packing its own panels into pb and then running
// its tiles with A read in place.
typedef struct {
	const uint16_t *a, *b;
	uint16_t *pb, *o;
	int64_t s;
	int parts, per;
} team_job;

static team_job tj;
static _Atomic long tj_gen, tj_next, tj_done;
static _Atomic int tj_sleepers;
static pthread_mutex_t tj_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tj_cv = PTHREAD_COND_INITIALIZER;
static int tj_team;

static void team_part(const team_job *j, int64_t lo, int64_t hi) {
	int64_t s = j->s, k2 = (s + 1) / 2, mp = (s + GB_MR - 1) / GB_MR;
	team_gb_pack_b(j->pb, j->b, s, 1, s, s, lo, hi);
	gb_epi e = {0, 0, 0, j->o, s, 0, 0, 1.0f, 0.0f, 0, 0};
	team_gb_tiles(j->a, s, j->pb, s, s, s, 0, mp, lo, hi, 0, k2, &e);
}

static void team_work(void) {
	int64_t np = (tj.s + GB_NR - 1) / GB_NR;
	for (;;) {
		long i = atomic_fetch_add(&tj_next, 1);
		if (i >= tj.parts) return;
		team_part(&tj, i * tj.per, gb_min((i + 1) * tj.per, np));
		atomic_fetch_add(&tj_done, 1);
	}
}

// A helper spins about 100 us for the next job (as the Go pool's helpers do), then sleeps.
static void *team_helper(void *arg) {
	long seen = 0;
	for (;;) {
		long g;
		int64_t t0 = team_ns(CLOCK_MONOTONIC);
		int spins = 0;
		while ((g = atomic_load(&tj_gen)) == seen) {
			_mm_pause();
			if (++spins % 256 == 0 && team_ns(CLOCK_MONOTONIC) - t0 > 100000) {
				pthread_mutex_lock(&tj_mu);
				atomic_fetch_add(&tj_sleepers, 1);
				while ((g = atomic_load(&tj_gen)) == seen) pthread_cond_wait(&tj_cv, &tj_mu);
				atomic_fetch_sub(&tj_sleepers, 1);
				pthread_mutex_unlock(&tj_mu);
				break;
			}
		}
		seen = g;
		team_work();
	}
	return 0;
}

static void team_start(int helpers) {
	for (; tj_team < helpers; tj_team++) {
		pthread_t t;
		pthread_create(&t, 0, team_helper, 0);
		pthread_detach(t);
	}
}

// The calling thread works too, then spins until every part is done.
static void team_gemm(const uint16_t *a, const uint16_t *b, uint16_t *pb, uint16_t *o, int64_t s, int parts) {
	int64_t np = (s + GB_NR - 1) / GB_NR;
	team_job j = {a, b, pb, o, s, parts, (int)((np + parts - 1) / parts)};
	tj = j;
	atomic_store(&tj_next, 0);
	atomic_store(&tj_done, 0);
	pthread_mutex_lock(&tj_mu);
	atomic_fetch_add(&tj_gen, 1);
	if (atomic_load(&tj_sleepers)) pthread_cond_broadcast(&tj_cv);
	pthread_mutex_unlock(&tj_mu);
	team_work();
	while (atomic_load(&tj_done) < parts) _mm_pause();
}

// Column panels [lo, hi) of that product, timed inside C: t = thread CPU and wall ns at
// the start, after packing, after the tiles.
static void team_timed_part(const uint16_t *a, const uint16_t *b, uint16_t *pb, uint16_t *o, int64_t s, int64_t lo,
                            int64_t hi, int64_t *t) {
	team_job j = {a, b, pb, o, s, 0, 0};
	int64_t k2 = (s + 1) / 2, mp = (s + GB_MR - 1) / GB_MR;
	t[0] = team_ns(CLOCK_THREAD_CPUTIME_ID), t[1] = team_ns(CLOCK_MONOTONIC);
	team_gb_pack_b(j.pb, j.b, s, 1, s, s, lo, hi);
	t[2] = team_ns(CLOCK_THREAD_CPUTIME_ID), t[3] = team_ns(CLOCK_MONOTONIC);
	gb_epi e = {0, 0, 0, o, s, 0, 0, 1.0f, 0.0f, 0, 0};
	team_gb_tiles(a, s, pb, s, s, s, 0, mp, lo, hi, 0, k2, &e);
	t[4] = team_ns(CLOCK_THREAD_CPUTIME_ID), t[5] = team_ns(CLOCK_MONOTONIC);
}
*/
import "C"

import "unsafe"

// teamStart starts the C team's helper threads (once; they live for the process).
func teamStart(helpers int) { C.team_start(C.int(helpers)) }

// teamGemm computes o = a@b (s×s row-major bfloat16) on the calling thread and the C team
// in column parts, packing B panels into pb.
func teamGemm(a, b, o unsafe.Pointer, pb []uint16, s, parts int) {
	C.team_gemm((*C.uint16_t)(a), (*C.uint16_t)(b), u16p(pb), (*C.uint16_t)(o), C.int64_t(s), C.int(parts))
}

// teamTimedPart runs column panels [lo, hi) of that product on the calling thread and
// returns its thread CPU and wall clock (ns) at the start, after packing and at the end.
func teamTimedPart(a, b, o unsafe.Pointer, pb []uint16, s, lo, hi int) (t [6]int64) {
	C.team_timed_part((*C.uint16_t)(a), (*C.uint16_t)(b), u16p(pb), (*C.uint16_t)(o), C.int64_t(s), C.int64_t(lo),
		C.int64_t(hi), (*C.int64_t)(unsafe.Pointer(&t[0])))
	return t
}
