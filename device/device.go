// Package device emulates Gaudi device memory (HBM): C-allocated host memory owned by Go,
// labelled as HPU, with the bridge's allocator statistics and out-of-memory behaviour.
package device

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"math/bits"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Generation is a Gaudi device generation.
type Generation int

const (
	Gaudi Generation = iota + 1
	Gaudi2
	Gaudi3
)

const gib = int64(1) << 30

// Name is the string synDeviceGetName returns, exactly as the bridge reports it.
func (g Generation) Name() string {
	switch g {
	case Gaudi:
		return "GAUDI"
	case Gaudi3:
		return "GAUDI3"
	default:
		return "GAUDI2"
	}
}

// DefaultCapacity is the HBM size of a generation.
func (g Generation) DefaultCapacity() int64 {
	switch g {
	case Gaudi:
		return 32 * gib
	case Gaudi3:
		return 128 * gib
	default:
		return 96 * gib
	}
}

// Stats are the bridge's memory_stats counters, in the bridge's key order.
type Stats struct {
	Limit, InUse, MaxInUse, NumAllocs, NumFrees, MaxAllocSize, TotalSystemAllocs, TotalSystemFrees int64
}

// Device is one emulated card.
type Device struct {
	Index int
	Gen   Generation
	mu    sync.Mutex
	stats Stats
	live  map[uintptr]int64
	// defrag counts the attempts to make room before reporting out of memory.
	defrag DefragStats
	// blocks keeps freed allocations by size class for reuse, as the bridge's pool
	// allocator keeps HBM: memory fresh from the host costs a page fault per 4 KiB on
	// first touch (about 1.7 µs here, 1.4 ms for a 3 MiB activation), every step.
	blocks      map[int64][]unsafe.Pointer
	cachedBytes int64
}

// DefragStats are the memory_defragmentation counters: attempts, attempts after which the
// allocation succeeded, and their total and longest duration.
type DefragStats struct {
	Number, Successful, TotalNs, MaxNs int64
}

// reclaimer releases memory held back by pending work (lazy mode's deferred frees); it
// calls more to learn whether it must go on. Set by the lazy engine.
var reclaimer atomic.Pointer[func(more func() bool)]

// SetReclaimer installs the defragmentation step Alloc runs before failing.
func SetReclaimer(f func(more func() bool)) { reclaimer.Store(&f) }

// Config is read once from the environment.
type Config struct {
	Gen      Generation
	Capacity int64
	Count    int
}

var (
	once    sync.Once
	devices []*Device
	cfg     Config
	cfgErr  error
	// owner maps every live pointer to its device, so Free needs no device argument.
	ownerMu sync.Mutex
	owner   = map[uintptr]*Device{}
	// bases is owner's keys in ascending order: Find resolves an interior pointer (a view)
	// to its allocation by binary search.
	bases []unsafe.Pointer
)

// ParseGeneration accepts GAUDI, GAUDI2, GAUDI3 (any case, also "gaudi1" and "1"/"2"/"3").
func ParseGeneration(s string) (Generation, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "GAUDI", "GAUDI1", "1":
		return Gaudi, nil
	case "", "GAUDI2", "2":
		return Gaudi2, nil
	case "GAUDI3", "3":
		return Gaudi3, nil
	}
	return 0, fmt.Errorf("HPUSIM_DEVICE_TYPE=%q: expected GAUDI, GAUDI2 or GAUDI3", s)
}

// ParseSize reads a byte count with an optional K/M/G/T suffix (binary units), e.g. "512MB", "2GiB".
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("invalid memory size %q", s)
	}
	return int64(v * float64(mult)), nil
}

func loadConfig() {
	gen, err := ParseGeneration(os.Getenv("HPUSIM_DEVICE_TYPE"))
	if err != nil {
		cfgErr = err
		gen = Gaudi2
	}
	cfg = Config{Gen: gen, Capacity: gen.DefaultCapacity(), Count: 1}
	if s := os.Getenv("HPUSIM_MEMORY_LIMIT"); s != "" {
		if c, err := ParseSize(s); err != nil {
			cfgErr = fmt.Errorf("HPUSIM_MEMORY_LIMIT: %v", err)
		} else {
			cfg.Capacity = c
		}
	}
	if s := os.Getenv("HPUSIM_DEVICE_COUNT"); s != "" {
		if n, err := strconv.Atoi(s); err != nil || n < 0 || n > 8 {
			cfgErr = fmt.Errorf("HPUSIM_DEVICE_COUNT=%q: expected 0..8", s)
		} else {
			cfg.Count = n
		}
	}
	if s := os.Getenv("HPUSIM_MEMORY_CACHE"); s != "" {
		if c, err := ParseSize(s); err == nil {
			cacheLimit.Store(c)
		} else if strings.TrimSpace(s) == "0" {
			cacheLimit.Store(0)
		} else {
			cfgErr = fmt.Errorf("HPUSIM_MEMORY_CACHE: %v", err)
		}
	}
	devices = make([]*Device, cfg.Count)
	for i := range devices {
		devices[i] = &Device{Index: i, Gen: cfg.Gen, live: map[uintptr]int64{}}
		devices[i].stats.Limit = cfg.Capacity
	}
}

// Init reads the configuration (once) and reports a configuration error, if any.
func Init() (Config, error) {
	once.Do(loadConfig)
	return cfg, cfgErr
}

// Count is the number of emulated devices.
func Count() int { Init(); return len(devices) }

// Get returns device i, or an error naming the bridge's assertion for a bad index.
func Get(i int) (*Device, error) {
	Init()
	if i < 0 || i >= len(devices) {
		return nil, fmt.Errorf("Invalid device id")
	}
	return devices[i], nil
}

// OOMError is the bridge's allocation failure.
type OOMError struct{ Size int64 }

func (e *OOMError) Error() string {
	return fmt.Sprintf("[Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::%d (%d)MB", e.Size, e.Size>>20)
}

const alignment = 64

// cacheLimit bounds the bytes of freed blocks a device keeps for reuse
// (HPUSIM_MEMORY_CACHE, default 1 GiB; 0 returns every free to the host at once).
var cacheLimit = func() *atomic.Int64 {
	v := new(atomic.Int64)
	v.Store(1 << 30)
	return v
}()

// sizeClass is the block size an allocation of nbytes gets: a multiple of 64 bytes, and
// above 64 KiB a multiple of 1/16 of the power of two below it (at most 6.25% more), so that
// tensors of nearby sizes share cached blocks.
func sizeClass(nbytes int64) int64 {
	c := (nbytes + alignment - 1) / alignment * alignment
	if c <= 64<<10 {
		return c
	}
	g := int64(1) << (bits.Len64(uint64(c-1)) - 5)
	return (c + g - 1) / g * g
}

// Alloc returns nbytes of zero-initialised-by-nobody device memory (64-byte aligned): a
// cached block of its size class when there is one, else a new one from the host.
func (d *Device) Alloc(nbytes int64) (unsafe.Pointer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("negative allocation size %d", nbytes)
	}
	if nbytes == 0 {
		return nil, nil
	}
	if !d.reserve(nbytes) && !d.defragment(nbytes) {
		return nil, &OOMError{Size: nbytes}
	}

	class := sizeClass(nbytes)
	p := d.takeCached(class)
	if p == nil {
		p = C.aligned_alloc(alignment, C.size_t(class))
		if p == nil {
			// The host is out of memory: give back the cache and try once more.
			d.EmptyCache()
			p = C.aligned_alloc(alignment, C.size_t(class))
		}
		if p == nil {
			d.mu.Lock()
			d.stats.InUse -= nbytes
			d.mu.Unlock()
			return nil, &OOMError{Size: nbytes}
		}
		d.mu.Lock()
		d.stats.TotalSystemAllocs++
		d.mu.Unlock()
	}
	d.mu.Lock()
	d.live[uintptr(p)] = nbytes
	s := &d.stats
	s.NumAllocs++
	if s.InUse > s.MaxInUse {
		s.MaxInUse = s.InUse
	}
	if nbytes > s.MaxAllocSize {
		s.MaxAllocSize = nbytes
	}
	d.mu.Unlock()
	ownerMu.Lock()
	owner[uintptr(p)] = d
	i := sort.Search(len(bases), func(i int) bool { return uintptr(bases[i]) >= uintptr(p) })
	bases = append(bases, nil)
	copy(bases[i+1:], bases[i:])
	bases[i] = p
	ownerMu.Unlock()
	return p, nil
}

// reserve counts nbytes as in use if they fit under Limit (before the malloc, so that
// concurrent allocations respect Limit).
func (d *Device) reserve(nbytes int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stats.InUse+nbytes > d.stats.Limit {
		return false
	}
	d.stats.InUse += nbytes
	return true
}

// defragment is the bridge's last step before an out-of-memory error: wait for in-flight
// work and release the frees it deferred, then retry the reservation. Every attempt is
// counted (the memory_defragmentation metric), successful or not.
func (d *Device) defragment(nbytes int64) bool {
	t0 := time.Now()
	if f := reclaimer.Load(); f != nil {
		(*f)(func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.stats.InUse+nbytes > d.stats.Limit
		})
	}
	ok := d.reserve(nbytes)
	ns := int64(time.Since(t0))
	d.mu.Lock()
	d.defrag.Number++
	if ok {
		d.defrag.Successful++
	}
	d.defrag.TotalNs += ns
	d.defrag.MaxNs = max(d.defrag.MaxNs, ns)
	d.mu.Unlock()
	return ok
}

// Defrag returns a snapshot of the defragmentation counters.
func (d *Device) Defrag() DefragStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.defrag
}

// Free releases memory from Alloc. Unknown pointers are reported, never freed.
func Free(p unsafe.Pointer) error {
	if p == nil {
		return nil
	}
	ownerMu.Lock()
	d, ok := owner[uintptr(p)]
	delete(owner, uintptr(p))
	if ok {
		i := sort.Search(len(bases), func(i int) bool { return uintptr(bases[i]) >= uintptr(p) })
		bases = append(bases[:i], bases[i+1:]...)
	}
	ownerMu.Unlock()
	if !ok {
		return fmt.Errorf("free of unknown device pointer %#x", uintptr(p))
	}
	d.mu.Lock()
	n := d.live[uintptr(p)]
	delete(d.live, uintptr(p))
	d.stats.InUse -= n
	d.stats.NumFrees++
	class := sizeClass(n)
	if d.cachedBytes+class <= cacheLimit.Load() {
		if d.blocks == nil {
			d.blocks = map[int64][]unsafe.Pointer{}
		}
		d.blocks[class] = append(d.blocks[class], p)
		d.cachedBytes += class
		d.mu.Unlock()
		return nil
	}
	d.stats.TotalSystemFrees++
	d.mu.Unlock()
	C.free(p)
	return nil
}

// takeCached pops a cached block of the class (the most recently freed, likeliest still
// in the CPU caches), or returns nil.
func (d *Device) takeCached(class int64) unsafe.Pointer {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs := d.blocks[class]
	if len(bs) == 0 {
		return nil
	}
	p := bs[len(bs)-1]
	d.blocks[class] = bs[:len(bs)-1]
	d.cachedBytes -= class
	return p
}

// EmptyCache returns every cached block to the host (torch.hpu.empty_cache).
func (d *Device) EmptyCache() {
	d.mu.Lock()
	blocks := d.blocks
	d.stats.TotalSystemFrees += int64(d.cachedBlocksLocked())
	d.blocks, d.cachedBytes = nil, 0
	d.mu.Unlock()
	for _, bs := range blocks {
		for _, p := range bs {
			C.free(p)
		}
	}
}

// Cached is the number of bytes held in cached blocks.
func (d *Device) Cached() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cachedBytes
}

func (d *Device) cachedBlocksLocked() int {
	n := 0
	for _, bs := range d.blocks {
		n += len(bs)
	}
	return n
}

// Owns reports whether p lies inside a live allocation (used to validate raw pointers).
func Owns(p uintptr, nbytes int64) bool {
	ownerMu.Lock()
	defer ownerMu.Unlock()
	for base, d := range owner {
		if p >= base {
			d.mu.Lock()
			n := d.live[base]
			d.mu.Unlock()
			if int64(p-base)+nbytes <= n {
				return true
			}
		}
	}
	return false
}

// Find resolves p to the live allocation containing it: its base and size. ok is false
// for memory the device does not own (host memory).
func Find(p uintptr) (base unsafe.Pointer, size int64, ok bool) {
	ownerMu.Lock()
	defer ownerMu.Unlock()
	i := sort.Search(len(bases), func(i int) bool { return uintptr(bases[i]) > p })
	if i == 0 {
		return nil, 0, false
	}
	base = bases[i-1]
	d := owner[uintptr(base)]
	d.mu.Lock()
	size = d.live[uintptr(base)]
	d.mu.Unlock()
	if p != uintptr(base) && p-uintptr(base) >= uintptr(size) {
		return nil, 0, false
	}
	return base, size, true
}

// Stats returns a snapshot of the counters.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// ResetPeak sets MaxInUse to the current InUse.
func (d *Device) ResetPeak() {
	d.mu.Lock()
	d.stats.MaxInUse = d.stats.InUse
	d.mu.Unlock()
}

// ResetAccumulated clears the allocation and free counters.
func (d *Device) ResetAccumulated() {
	d.mu.Lock()
	live := int64(len(d.live))
	d.stats.NumAllocs, d.stats.NumFrees = live, 0
	d.stats.TotalSystemAllocs, d.stats.TotalSystemFrees = live+int64(d.cachedBlocksLocked()), 0
	d.stats.MaxAllocSize = 0
	d.mu.Unlock()
}
