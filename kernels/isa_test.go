package kernels

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// HPUSIM_ISA=avx2 / generic switch the wider kernels off in a fresh process (the switches
// are read once, at package init), whatever the CPU has (a build with
// -DHPUSIM_ISA_GENERIC caps avx2 further).
func TestISASwitch(t *testing.T) {
	if want := os.Getenv("HPUSIM_ISA_CHILD"); want != "" {
		got := map[string]bool{"f32dot": f32DotCPU, "bf16dot": bf16DotCPU, "b2": b2CPU, "bnvec": bnF32Vec}
		level := ISALevel()
		switch want {
		case "generic":
			if level != 1 || got["f32dot"] || got["bf16dot"] || got["b2"] || got["bnvec"] {
				t.Fatalf("HPUSIM_ISA=generic: level %d, paths %v", level, got)
			}
		case "avx2":
			if level > 2 || got["f32dot"] || got["bf16dot"] {
				t.Fatalf("HPUSIM_ISA=avx2: level %d, paths %v", level, got)
			}
		}
		return
	}
	if testing.Short() || runtime.GOARCH != "amd64" {
		t.Skip("spawns the test binary")
	}
	for _, isa := range []string{"avx2", "generic"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestISASwitch$", "-test.count=1")
		cmd.Env = append(os.Environ(), "HPUSIM_ISA="+isa, "HPUSIM_ISA_CHILD="+isa)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("HPUSIM_ISA=%s: %v\n%s", isa, err, out)
		}
	}
}
