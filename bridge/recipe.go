package bridge

import (
	"container/list"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// The recipe cache: compiled plans keyed by the hash of a graph's canonical form, bounded
// (least recently used recipes are evicted), with the counters behind the bridge's
// graph_compilation and recipe_cache metrics.

type recipe struct {
	id    string
	hash  uint64
	words []int64 // the canonical form, compared on a hash match (collisions never alias)
	plan  *plan
	elem  *list.Element
}

type recipeCache struct {
	mu      sync.Mutex
	byHash  map[uint64][]*recipe
	lru     *list.List // front = most recently used
	limit   int
	enabled bool

	compiles   int64
	compileUs  int64
	totalHit   int64
	totalMiss  int64
	recipeHit  map[string]int64
	recipeMiss map[string]int64
	evictions  int64
	lastID     string
	lastHit    bool
}

var cache = newRecipeCache()

func newRecipeCache() *recipeCache {
	return &recipeCache{byHash: map[uint64][]*recipe{}, lru: list.New(),
		limit:     envInt("HPUSIM_RECIPE_CACHE_SIZE", 1024),
		enabled:   !envFalse("PT_HPU_PGM_ENABLE_CACHE"),
		recipeHit: map[string]int64{}, recipeMiss: map[string]int64{}}
}

func envTrue(name string) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(name))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

func envFalse(name string) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(name))) {
	case "0", "false", "no", "off":
		return true
	}
	return false
}

// get returns the graph's plan: the cached recipe on a hit, else a new compilation.
func (c *recipeCache) get(g *graph) (*plan, error) {
	words := g.canonical()
	h := hashWords(words)
	id := fmt.Sprintf("recipe_%016x", h)
	c.mu.Lock()
	if c.enabled {
		for _, r := range c.byHash[h] {
			if equalWords(r.words, words) {
				c.lru.MoveToFront(r.elem)
				c.totalHit++
				c.recipeHit[id]++
				c.lastID, c.lastHit = id, true
				c.mu.Unlock()
				logf(levelDebug, "graph #%d (%d ops, %s): recipe cache hit %s", g.seq, len(g.nodes), g.reason, id)
				return r.plan, nil
			}
		}
	}
	c.mu.Unlock()

	start := time.Now()
	p := compile(g)
	// GRAPH_COMPILE reports whole microseconds; a compilation is never free.
	us := max(1, (time.Since(start).Nanoseconds()+999)/1000)
	dumpGraph(g, p, id)

	c.mu.Lock()
	c.compiles++
	c.compileUs += us
	c.totalMiss++
	c.recipeMiss[id]++
	c.lastID, c.lastHit = id, false
	if c.enabled {
		r := &recipe{id: id, hash: h, words: words, plan: p}
		r.elem = c.lru.PushFront(r)
		c.byHash[h] = append(c.byHash[h], r)
		for c.lru.Len() > c.limit {
			c.evict(c.lru.Back().Value.(*recipe))
		}
	}
	c.mu.Unlock()
	logf(levelInfo, "graph #%d (%d ops, %s): compiled %s in %d us: %d removed as dead, %d fused in %d steps, %d intermediates not materialised, %d run in a reused buffer (%d B)",
		g.seq, len(g.nodes), g.reason, id, us, len(p.removed), p.fused, len(p.steps), p.virtuals, len(p.elided), p.reusedBytes)
	return p, nil
}

func (c *recipeCache) evict(r *recipe) {
	c.lru.Remove(r.elem)
	rs := c.byHash[r.hash]
	for i, x := range rs {
		if x == r {
			c.byHash[r.hash] = append(rs[:i], rs[i+1:]...)
			break
		}
	}
	if len(c.byHash[r.hash]) == 0 {
		delete(c.byHash, r.hash)
	}
	c.evictions++
	logf(levelDebug, "recipe cache full (%d): evicted %s", c.limit, r.id)
}

// Stats is the lazy engine's counters, for the metrics API.
type Stats struct {
	Lazy          bool             `json:"lazy"`
	Compilations  int64            `json:"compilations"`
	CompileTimeUs int64            `json:"compile_time_us"`
	TotalHit      int64            `json:"total_hit"`
	TotalMiss     int64            `json:"total_miss"`
	RecipeHit     map[string]int64 `json:"recipe_hit"`
	RecipeMiss    map[string]int64 `json:"recipe_miss"`
	CachedRecipes int              `json:"cached_recipes"`
	CacheLimit    int              `json:"cache_limit"`
	Evictions     int64            `json:"evictions"`
	GraphBreaks   int64            `json:"graph_breaks"`
	RecordedOps   int64            `json:"recorded_ops"`
	PendingOps    int              `json:"pending_ops"`
	Inflight      int              `json:"inflight"`
	RecordNsMed   int64            `json:"record_ns_median"`
	WorkerBusyNs  int64            `json:"worker_busy_ns"` // worker time spent running graphs
	HostWaitNs    int64            `json:"host_wait_ns"`   // host time blocked waiting for the worker
	StreamedOps   int64            `json:"streamed_ops"`   // nodes run while their graph was recorded
	ReusedBytes   int64            `json:"reused_bytes"`   // storages run in another's buffer (never touched)
	HostCalls     int64            `json:"host_calls"`     // calls that touched host memory (host reads)
	Launched      uint64           `json:"launched"`
	LastRecipe    string           `json:"last_recipe"`
	LastHit       bool             `json:"last_hit"`
}

// StatsJSON snapshots the counters as JSON.
func StatsJSON() string {
	c := cache
	c.mu.Lock()
	s := Stats{Lazy: Lazy(), Compilations: c.compiles, CompileTimeUs: c.compileUs, TotalHit: c.totalHit,
		TotalMiss: c.totalMiss, RecipeHit: map[string]int64{}, RecipeMiss: map[string]int64{},
		CachedRecipes: c.lru.Len(), CacheLimit: c.limit, Evictions: c.evictions,
		LastRecipe: c.lastID, LastHit: c.lastHit}
	for k, v := range c.recipeHit {
		s.RecipeHit[k] = v
	}
	for k, v := range c.recipeMiss {
		s.RecipeMiss[k] = v
	}
	c.mu.Unlock()
	if e := eng; e != nil {
		s.GraphBreaks = e.breaks.Load()
		s.RecordedOps = e.recorded.Load()
		s.PendingOps = PendingOps()
		s.RecordNsMed = RecordCostMedian()
		s.WorkerBusyNs = e.busyNs.Load()
		s.HostWaitNs = e.waitNs.Load()
		s.StreamedOps = e.streamed.Load()
		s.ReusedBytes = e.reusedBytes.Load()
		s.HostCalls = e.hostCalls.Load()
		e.qmu.Lock()
		s.Inflight = e.inflight
		e.qmu.Unlock()
		e.launchMu.Lock()
		s.Launched = e.seq
		e.launchMu.Unlock()
	}
	b, _ := json.Marshal(s)
	return string(b)
}
