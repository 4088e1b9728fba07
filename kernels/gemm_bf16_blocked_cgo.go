//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
// The epilogue rounds alpha*sum and beta*self before adding them, as bgemmHalf does.
#pragma GCC optimize("fp-contract=off")
#include "gemm_bf16_blocked.h"
#include "cteam.h"

// One bgemmBF16Blocked call (gemm_bf16_blocked.go decides the split; see there): the
// kernel's product C' = A'@B' per batch, A' m x k at a (element (r, c) of batch bi at
// a[bi*asb + r*ars + c*acs]), B' k x n at b likewise, run as C team jobs from one cgo
// call. Its integer parameters arrive as an array indexed by GBT_*.
enum {
	GBT_B, GBT_M, GBT_N, GBT_K, GBT_ROWS, GBT_COLS, // sizes: batches, out rows and columns, k; A' rows, B' columns
	GBT_ASB, GBT_ARS, GBT_ACS, GBT_A_IN,            // A' strides; A' is read in place
	GBT_BSB, GBT_BRS, GBT_BCS,                      // B' strides
	GBT_OSB, GBT_LDO, GBT_SSB, GBT_LDS, GBT_TRANS,  // direct out's and self's strides; C' is C transposed
	GBT_PA_LEN, GBT_PB_LEN,                         // scratch per part (batched) or in all
	GBT_BATCH_PER,                                  // > 0: whole batches per part, this many
	GBT_PARALLEL, GBT_BY_COLS, GBT_TILE_PER,        // per batch: split the tiles, by columns, panels per part
	GBT_WORKERS,                                    // the worker count the packing split follows
	GBT_NPARAMS
};

typedef struct {
	const int64_t *p;
	const uint16_t *a, *b;
	uint16_t *pa, *pb, *o;
	const uint16_t *s;
	float *c;
	float alpha, beta;
	int64_t k2, mp, np;
	// The batch in progress (per-batch jobs).
	int64_t bi, pack_per_a, pack_parts_a, pack_per_b;
	int need_a, need_b, own_b;
} gbt_job;

// Batch bi's epilogue: into dense float32 c (M x N per batch) or, with o, alpha*sum +
// beta*self rounded into out.
static gb_epi gbt_epi(const gbt_job *j, int64_t bi) {
	const int64_t *p = j->p;
	if (!j->o) {
		gb_epi e = {j->c + bi * p[GBT_M] * p[GBT_N], p[GBT_N], 0, 0, 0, 0, 0, 1.0f, 0.0f, 0, (int)p[GBT_TRANS]};
		return e;
	}
	gb_epi e = {0, 0, 0, j->o + bi * p[GBT_OSB], p[GBT_LDO], j->s ? j->s + bi * p[GBT_SSB] : 0, p[GBT_LDS],
	            j->alpha, j->beta, j->alpha != 1.0f, (int)p[GBT_TRANS]};
	return e;
}

static void gbt_pack_a(const gbt_job *j, uint16_t *dst, int64_t bi, int64_t p0, int64_t p1) {
	const int64_t *p = j->p;
	hpusim_gb_pack_a(dst, j->a + bi * p[GBT_ASB], p[GBT_ARS], p[GBT_ACS], p[GBT_ROWS], p[GBT_K], p0, p1);
}

static void gbt_pack_b(const gbt_job *j, uint16_t *dst, int64_t bi, int64_t q0, int64_t q1) {
	const int64_t *p = j->p;
	hpusim_gb_pack_b(dst, j->b + bi * p[GBT_BSB], p[GBT_BRS], p[GBT_BCS], p[GBT_K], p[GBT_COLS], q0, q1);
}

// Tiles of A' panels [p0, p1) x B' panels [q0, q1) of batch bi, in k blocks of GB_KC2 pairs.
static void gbt_tiles(const gbt_job *j, const uint16_t *pa, const uint16_t *pb, int64_t bi, int64_t p0, int64_t p1,
                      int64_t q0, int64_t q1) {
	const int64_t *p = j->p;
	gb_epi e = gbt_epi(j, bi);
	const uint16_t *ap = pa;
	int64_t lda = 0;
	if (p[GBT_A_IN]) ap = j->a + bi * p[GBT_ASB], lda = p[GBT_ARS];
	for (int64_t kk0 = 0; kk0 < j->k2; kk0 += GB_KC2) {
		e.add = kk0 > 0;
		int64_t kk1 = gb_min(kk0 + GB_KC2, j->k2);
		hpusim_gb_tiles(ap, lda, pb, p[GBT_ROWS], p[GBT_COLS], p[GBT_K], p0, p1, q0, q1, kk0, kk1, &e);
	}
}

// Part pi of a batched job: batches [pi*per, ...) with the part's own scratch; an operand
// broadcast over the batch is packed once.
static int gbt_batches(void *arg, int64_t pi) {
	const gbt_job *j = arg;
	const int64_t *p = j->p;
	int64_t lo = pi * p[GBT_BATCH_PER], hi = gb_min(lo + p[GBT_BATCH_PER], p[GBT_B]);
	uint16_t *pa = j->pa + pi * p[GBT_PA_LEN], *pb = j->pb + pi * p[GBT_PB_LEN];
	for (int64_t bi = lo; bi < hi; bi++) {
		if (!p[GBT_A_IN] && (bi == lo || p[GBT_ASB] != 0)) gbt_pack_a(j, pa, bi, 0, j->mp);
		if (bi == lo || p[GBT_BSB] != 0) gbt_pack_b(j, pb, bi, 0, j->np);
		gbt_tiles(j, pa, pb, bi, 0, j->mp, 0, j->np);
	}
	return 0;
}

// Part pi of batch j->bi's packing: A' spans first, then B' spans.
static int gbt_pack(void *arg, int64_t pi) {
	const gbt_job *j = arg;
	if (pi < j->pack_parts_a) {
		int64_t lo = pi * j->pack_per_a;
		gbt_pack_a(j, j->pa, j->bi, lo, gb_min(lo + j->pack_per_a, j->mp));
	} else {
		int64_t lo = (pi - j->pack_parts_a) * j->pack_per_b;
		gbt_pack_b(j, j->pb, j->bi, lo, gb_min(lo + j->pack_per_b, j->np));
	}
	return 0;
}

// Part pi of batch j->bi's tiles: a range of B' panels (packed by the part itself when
// own_b) or of A' panels.
static int gbt_part(void *arg, int64_t pi) {
	const gbt_job *j = arg;
	const int64_t *p = j->p;
	int64_t per = p[GBT_TILE_PER], lo = pi * per;
	if (p[GBT_BY_COLS]) {
		int64_t hi = gb_min(lo + per, j->np);
		if (j->own_b) gbt_pack_b(j, j->pb, j->bi, lo, hi);
		gbt_tiles(j, j->pa, j->pb, j->bi, 0, j->mp, lo, hi);
	} else {
		gbt_tiles(j, j->pa, j->pb, j->bi, lo, gb_min(lo + per, j->mp), 0, j->np);
	}
	return 0;
}

static int64_t gbt_ceil(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int hpusim_gb_team(int threads, int64_t spin_ns, const int64_t *p, const uint16_t *a, const uint16_t *b,
                          uint16_t *pa, uint16_t *pb, float *c, uint16_t *o, const uint16_t *s, float alpha,
                          float beta) {
	gbt_job j = {p, a, b, pa, pb, o, s, c, alpha, beta};
	j.k2 = (p[GBT_K] + 1) / 2;
	j.mp = gbt_ceil(p[GBT_ROWS], GB_MR), j.np = gbt_ceil(p[GBT_COLS], GB_NR);
	if (p[GBT_BATCH_PER] > 0)
		return hpusim_team_run(threads, gbt_batches, &j, gbt_ceil(p[GBT_B], p[GBT_BATCH_PER]), spin_ns);
	int64_t w = p[GBT_WORKERS];
	int64_t total = p[GBT_BY_COLS] ? j.np : j.mp;
	for (int64_t bi = 0; bi < p[GBT_B]; bi++) {
		j.bi = bi;
		int need_a = !p[GBT_A_IN] && (bi == 0 || p[GBT_ASB] != 0), need_b = bi == 0 || p[GBT_BSB] != 0;
		if (!p[GBT_PARALLEL]) {
			if (need_a) gbt_pack_a(&j, pa, bi, 0, j.mp);
			if (need_b) gbt_pack_b(&j, pb, bi, 0, j.np);
			gbt_tiles(&j, pa, pb, bi, 0, j.mp, 0, j.np);
			continue;
		}
		// Split by columns, every part packs its own B' panels just before it uses them
		// (still in the core's L2 when its tiles read them); what every part reads (A',
		// or B' of a split by rows) is packed first, in parts of about 1/(2w) of it all.
		j.own_b = p[GBT_BY_COLS] && need_b;
		int pack_b = need_b && !j.own_b;
		if (need_a || pack_b) {
			int64_t all = j.mp * GB_MR * need_a + j.np * GB_NR * pack_b;
			j.pack_per_a = all / (2 * w) / GB_MR, j.pack_per_b = all / (2 * w) / GB_NR;
			if (j.pack_per_a < 1) j.pack_per_a = 1;
			if (j.pack_per_b < 1) j.pack_per_b = 1;
			j.pack_parts_a = need_a ? gbt_ceil(j.mp, j.pack_per_a) : 0;
			int64_t parts_b = pack_b ? gbt_ceil(j.np, j.pack_per_b) : 0;
			int err = hpusim_team_run(threads, gbt_pack, &j, j.pack_parts_a + parts_b, spin_ns);
			if (err) return err;
		}
		int err = hpusim_team_run(threads, gbt_part, &j, gbt_ceil(total, p[GBT_TILE_PER]), spin_ns);
		if (err) return err;
	}
	return 0;
}
*/
import "C"

import "unsafe"

// gbMR and gbNR are the blocked kernel's tile: A panels of gbMR rows, B panels of up to
// gbNR columns (gemm_bf16_blocked.h).
const (
	gbMR = 6
	gbNR = 64
)

func u16p(s []uint16) *C.uint16_t { return (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(s))) }

// gbParams indexes hpusim_gb_team's integer parameters.
const (
	gbtB, gbtM, gbtN, gbtK, gbtRows, gbtCols = C.GBT_B, C.GBT_M, C.GBT_N, C.GBT_K, C.GBT_ROWS, C.GBT_COLS
	gbtASB, gbtARS, gbtACS, gbtAIn           = C.GBT_ASB, C.GBT_ARS, C.GBT_ACS, C.GBT_A_IN
	gbtBSB, gbtBRS, gbtBCS                   = C.GBT_BSB, C.GBT_BRS, C.GBT_BCS
	gbtOSB, gbtLDO, gbtSSB, gbtLDS, gbtTrans = C.GBT_OSB, C.GBT_LDO, C.GBT_SSB, C.GBT_LDS, C.GBT_TRANS
	gbtPALen, gbtPBLen, gbtBatchPer          = C.GBT_PA_LEN, C.GBT_PB_LEN, C.GBT_BATCH_PER
	gbtParallel, gbtByCols, gbtTilePer       = C.GBT_PARALLEL, C.GBT_BY_COLS, C.GBT_TILE_PER
	gbtWorkers, gbtNParams                   = C.GBT_WORKERS, C.GBT_NPARAMS
)

// gbTeam runs one bgemmBF16Blocked call in C (hpusim_gb_team) on threads threads.
func gbTeam(threads int, p *[gbtNParams]int64, a, b unsafe.Pointer, pa, pb []uint16, c []float32, o, s unsafe.Pointer,
	alpha, beta float32) int {
	return int(C.hpusim_gb_team(C.int(threads), C.int64_t(spinWait()), (*C.int64_t)(unsafe.Pointer(&p[0])),
		(*C.uint16_t)(a), (*C.uint16_t)(b), u16p(pa), u16p(pb), (*C.float)(unsafe.Pointer(unsafe.SliceData(c))),
		(*C.uint16_t)(o), (*C.uint16_t)(s), C.float(alpha), C.float(beta)))
}

// The C kernel's k block is gbKC2 (gbDirect's limit): a compile error if they part.
var (
	_ [gbKC2 - C.GB_KC2]struct{}
	_ [C.GB_KC2 - gbKC2]struct{}
)
