package device

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Module claims let hl-smi, a separate process, list the processes using each emulated
// card, as the real tool lists a card's compute processes: every process that opens a
// module (one per process in distributed runs) leaves a small file naming itself.

// Claim is one process using one module.
type Claim struct {
	Module int
	PID    int
	Name   string
}

// StatusDir is where claims live: $HPUSIM_STATUS_DIR, else <tmp>/hpusim-modules.
func StatusDir(getenv func(string) string) string {
	if d := getenv("HPUSIM_STATUS_DIR"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "hpusim-modules")
}

func claimFile(dir string, module, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("module%d-pid%d", module, pid))
}

// processName is this process's command line, as hl-smi prints it.
func processName() string {
	b, err := os.ReadFile("/proc/self/cmdline")
	if err != nil || len(b) == 0 {
		return filepath.Base(os.Args[0])
	}
	// One line for hl-smi's table: arguments may hold newlines (python -c "...").
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\x00", " ")), " ")
}

// ClaimModule records that this process uses module (replacing an earlier claim of it).
func ClaimModule(dir string, module int) error {
	if module < 0 || module >= 8 {
		return fmt.Errorf("module id %d: expected 0..7", module)
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	pid := os.Getpid()
	ReleaseModules(dir)
	// Written then renamed, so a reader never sees a half-written claim.
	tmp := claimFile(dir, module, pid) + ".tmp"
	if err := os.WriteFile(tmp, []byte(processName()), 0o666); err != nil {
		return err
	}
	return os.Rename(tmp, claimFile(dir, module, pid))
}

// ReleaseModules removes this process's claims.
func ReleaseModules(dir string) {
	old, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("module*-pid%d", os.Getpid())))
	for _, f := range old {
		os.Remove(f)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// Claims lists the claims of live processes by module and PID. Claims left by processes
// that are gone (killed before they could release them) are removed.
func Claims(dir string) []Claim {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Claim
	for _, e := range entries {
		var c Claim
		if n, err := fmt.Sscanf(e.Name(), "module%d-pid%d", &c.Module, &c.PID); n != 2 || err != nil ||
			e.Name() != fmt.Sprintf("module%d-pid%d", c.Module, c.PID) {
			continue
		}
		if !alive(c.PID) {
			os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		name, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		c.Name = string(name)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].PID < out[j].PID
	})
	return out
}
