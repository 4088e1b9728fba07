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
