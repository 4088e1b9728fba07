package device

import (
	"strings"
	"testing"
	"unsafe"
)

func newDev(limit int64) *Device {
	d := &Device{Gen: Gaudi2, live: map[uintptr]int64{}}
	d.stats.Limit = limit
	return d
}

func TestAllocFreeStats(t *testing.T) {
	d := newDev(1 << 20)
	p, err := d.Alloc(1000)
	if err != nil || p == nil {
		t.Fatal(err)
	}
	q, _ := d.Alloc(3000)
	s := d.Stats()
	if s.InUse != 4000 || s.NumAllocs != 2 || s.MaxAllocSize != 3000 || s.MaxInUse != 4000 {
		t.Fatalf("stats %+v", s)
	}
	if uintptr(p)%64 != 0 {
		t.Fatal("not 64-byte aligned")
	}
	if err := Free(p); err != nil {
		t.Fatal(err)
	}
	Free(q)
	s = d.Stats()
	if s.InUse != 0 || s.NumFrees != 2 || s.MaxInUse != 4000 {
		t.Fatalf("stats %+v", s)
	}
	d.ResetPeak()
	if d.Stats().MaxInUse != 0 {
		t.Fatal("peak not reset")
	}
}

func TestOOM(t *testing.T) {
	d := newDev(1 << 20)
	_, err := d.Alloc(1 << 21)
	if err == nil || !strings.Contains(err.Error(), "FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::2097152 (2)MB") {
		t.Fatalf("err %v", err)
	}
	if d.Stats().InUse != 0 {
		t.Fatal("failed alloc leaked accounting")
	}
}

func TestFreeUnknown(t *testing.T) {
	x := 5
	if Free(unsafeAddr(&x)) == nil {
		t.Fatal("expected error for unknown pointer")
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"512MB": 512 << 20, "2GiB": 2 << 30, "1024": 1024, "1.5G": 3 << 29} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
	if _, err := ParseSize("lots"); err == nil {
		t.Error("expected error")
	}
	if g, _ := ParseGeneration("gaudi3"); g.Name() != "GAUDI3" {
		t.Error("gaudi3")
	}
	if _, err := ParseGeneration("tpu"); err == nil {
		t.Error("expected error")
	}
}

func TestFindResolvesInteriorPointers(t *testing.T) {
	d := newDev(1 << 20)
	p, _ := d.Alloc(1000)
	q, _ := d.Alloc(64)
	defer Free(p)
	defer Free(q)
	for _, c := range []struct {
		ptr  uintptr
		base uintptr
	}{{uintptr(p), uintptr(p)}, {uintptr(p) + 999, uintptr(p)}, {uintptr(q) + 8, uintptr(q)}, {uintptr(q), uintptr(q)}} {
		b, n, ok := Find(c.ptr)
		if !ok || uintptr(b) != c.base || (uintptr(b) == uintptr(p) && n != 1000) {
			t.Fatalf("Find(%#x) = %#x %d %v", c.ptr, b, n, ok)
		}
	}
	var host [8]byte
	if _, _, ok := Find(uintptr(unsafe.Pointer(&host[0]))); ok {
		t.Fatal("host memory resolved as device memory")
	}
}

func TestFreedBlocksAreReused(t *testing.T) {
	d := newDev(1 << 30)
	p, _ := d.Alloc(3 << 20)
	if err := Free(p); err != nil {
		t.Fatal(err)
	}
	if d.Cached() != sizeClass(3<<20) {
		t.Fatalf("cached %d", d.Cached())
	}
	// A slightly different size in the same class gets the same block back, and the
	// block is live again (Find resolves it), not cached.
	q, _ := d.Alloc(3<<20 - 1000)
	if q != p || d.Cached() != 0 {
		t.Fatalf("q %p p %p cached %d", q, p, d.Cached())
	}
	if _, n, ok := Find(uintptr(q) + 10); !ok || n != 3<<20-1000 {
		t.Fatalf("find %d %v", n, ok)
	}
	s := d.Stats()
	if s.NumAllocs != 2 || s.TotalSystemAllocs != 1 || s.NumFrees != 1 || s.TotalSystemFrees != 0 || s.InUse != 3<<20-1000 {
		t.Fatalf("stats %+v", s)
	}
	Free(q)
	if _, _, ok := Find(uintptr(q)); ok {
		t.Fatal("a cached block must not resolve as live memory")
	}
	d.EmptyCache()
	s = d.Stats()
	if d.Cached() != 0 || s.TotalSystemFrees != 1 || s.NumFrees != 2 {
		t.Fatalf("after empty: cached %d stats %+v", d.Cached(), s)
	}
}

func TestCacheLimit(t *testing.T) {
	old := cacheLimit.Load()
	defer cacheLimit.Store(old)
	cacheLimit.Store(1 << 20)
	d := newDev(1 << 30)
	a, _ := d.Alloc(600 << 10)
	b, _ := d.Alloc(600 << 10)
	Free(a)
	Free(b) // over the limit: back to the host
	if s := d.Stats(); d.Cached() != sizeClass(600<<10) || s.TotalSystemFrees != 1 {
		t.Fatalf("cached %d stats %+v", d.Cached(), s)
	}
	d.EmptyCache()
}

func TestSizeClass(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{
		{1, 64}, {64, 64}, {65, 128}, {64 << 10, 64 << 10}, {64<<10 + 1, 64<<10 + 4<<10},
		{3 << 20, 3 << 20}, {3<<20 + 1, 3<<20 + 128<<10}, {4 << 20, 4 << 20},
	} {
		if got := sizeClass(c.n); got != c.want {
			t.Errorf("sizeClass(%d) = %d, want %d", c.n, got, c.want)
		}
		if got := sizeClass(c.n); got < c.n || float64(got-c.n) > 0.0625*float64(c.n)+64 {
			t.Errorf("sizeClass(%d) = %d wastes too much", c.n, got)
		}
	}
}
