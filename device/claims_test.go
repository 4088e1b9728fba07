package device

import (
	"os"
	"path/filepath"
	"testing"
)

func TestClaimsListLiveProcessesAndDropDeadOnes(t *testing.T) {
	dir := t.TempDir()
	if err := ClaimModule(dir, 3); err != nil {
		t.Fatal(err)
	}
	// A second claim replaces the first: one process, one module.
	if err := ClaimModule(dir, 5); err != nil {
		t.Fatal(err)
	}
	// A claim left by a process that is gone (pid far above pid_max) is dropped on read.
	stale := filepath.Join(dir, "module1-pid999999999")
	if err := os.WriteFile(stale, []byte("gone"), 0o666); err != nil {
		t.Fatal(err)
	}
	got := Claims(dir)
	if len(got) != 1 || got[0].Module != 5 || got[0].PID != os.Getpid() || got[0].Name == "" {
		t.Fatalf("claims = %+v, want this process on module 5", got)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale claim not removed: %v", err)
	}
	if err := ClaimModule(dir, 8); err == nil {
		t.Fatal("module 8 accepted")
	}
	ReleaseModules(dir)
	if got := Claims(dir); len(got) != 0 {
		t.Fatalf("after release: %+v", got)
	}
}

func TestStatusDir(t *testing.T) {
	env := map[string]string{"HPUSIM_STATUS_DIR": "/x/y"}
	if d := StatusDir(func(k string) string { return env[k] }); d != "/x/y" {
		t.Fatal(d)
	}
	if d := StatusDir(func(string) string { return "" }); d != filepath.Join(os.TempDir(), "hpusim-modules") {
		t.Fatal(d)
	}
}
