package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"hpusim/device"
)

func TestTableListsProcessesUsingAModule(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"HPUSIM_DEVICE_COUNT": "2", "HPUSIM_STATUS_DIR": dir}
	out, _, _ := hlsmi(t, env)
	if strings.Contains(out, fmt.Sprint(os.Getpid())) {
		t.Fatalf("a process listed before any claim:\n%s", out)
	}
	if err := device.ClaimModule(dir, 1); err != nil {
		t.Fatal(err)
	}
	out, _, code := hlsmi(t, env)
	if code != 0 {
		t.Fatalf("code %d", code)
	}
	want := fmt.Sprintf("|   1%11d   C   ", os.Getpid())
	found := false
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if len(l) != 79 {
			t.Errorf("line is %d chars: %q", len(l), l)
		}
		found = found || strings.HasPrefix(l, want)
	}
	if !found || !strings.Contains(out, "|   0        N/A   N/A    N/A ") {
		t.Fatalf("module 1 should list this process, module 0 none:\n%s", out)
	}
}
