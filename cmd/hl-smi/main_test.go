package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// hlsmi runs the command in-process with env as its whole environment.
func hlsmi(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"-v"}, {"--version"}} {
		out, _, code := hlsmi(t, nil, args...)
		if code != 0 || !strings.Contains(out, "Habana") || strings.Count(out, "\n") != 1 {
			t.Fatalf("%v: code %d, output %q", args, code, out)
		}
		// The regexes framework version checks use.
		if m := regexp.MustCompile(`hl-([\d\.]+)`).FindStringSubmatch(out); m == nil || m[1] != "1.22.0" {
			t.Errorf("%v: hl- version %v in %q", args, m, out)
		}
		if m := regexp.MustCompile(`fw-([\d\.]+)`).FindStringSubmatch(out); m == nil || m[1] != "59.1.1.1" {
			t.Errorf("%v: fw- version %v in %q", args, m, out)
		}
	}
}

func TestListGeneration(t *testing.T) {
	genRe := regexp.MustCompile(`hl-gaudi([\d\-])`)
	for _, tc := range []struct{ typ, digit, product, memory string }{
		{"GAUDI", "-", "HL-205", "32768 MiB"},
		{"gaudi1", "-", "HL-205", "32768 MiB"},
		{"", "2", "HL-225", "98304 MiB"},
		{"Gaudi2", "2", "HL-225", "98304 MiB"},
		{"3", "3", "HL-325L", "131072 MiB"},
	} {
		out, errOut, code := hlsmi(t, map[string]string{"HPUSIM_DEVICE_TYPE": tc.typ, "HPUSIM_DEVICE_COUNT": "2"}, "-L")
		if code != 0 {
			t.Fatalf("%q: code %d, stderr %q", tc.typ, code, errOut)
		}
		if m := genRe.FindStringSubmatch(out); m == nil || m[1] != tc.digit {
			t.Errorf("%q: generation %v, want %q", tc.typ, m, tc.digit)
		}
		for _, want := range []string{
			"[0] AIP (accel0) 0000:09:00.0\n",
			"[1] AIP (accel1) 0000:0a:00.0\n",
			"        Product Name : " + tc.product + "\n",
			"        Module ID : 1\n",
			"        Memory Total : " + tc.memory + "\n",
			"        Firmware [SPI] Version : Preboot version hl-gaudi",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: missing %q in\n%s", tc.typ, want, out)
			}
		}
	}
}

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		rows []string // device rows that must appear
	}{
		{"default", nil, []string{
			"|   0  HL-225              N/A  | 0000:09:00.0     N/A |                   0  |",
			"| N/A   26C   N/A    87W / 600W |    768MiB / 98304MiB |     0%           N/A |",
		}},
		{"eight gaudi3", map[string]string{"HPUSIM_DEVICE_TYPE": "GAUDI3", "HPUSIM_DEVICE_COUNT": "8"}, []string{
			"|   7  HL-325L             N/A  | 0000:9b:00.0     N/A |                   0  |",
			"|   768MiB / 131072MiB |",
		}},
		{"gaudi1 memory limit", map[string]string{"HPUSIM_DEVICE_TYPE": "GAUDI", "HPUSIM_MEMORY_LIMIT": "1.5G"}, []string{
			"| N/A   26C   N/A    87W / 350W |     768MiB / 1536MiB |",
		}},
		{"limit below reserve", map[string]string{"HPUSIM_MEMORY_LIMIT": "512MB"}, []string{"|      512MiB / 512MiB |"}},
		{"no devices", map[string]string{"HPUSIM_DEVICE_COUNT": "0"}, nil},
	} {
		out, errOut, code := hlsmi(t, tc.env)
		if code != 0 {
			t.Fatalf("%s: code %d, stderr %q", tc.name, code, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		for i, l := range lines {
			if len(l) != 79 {
				t.Errorf("%s: line %d is %d chars: %q", tc.name, i, len(l), l)
			}
		}
		// How clients read the driver version: line 2, spaces removed, split on ":" then "-".
		if len(lines) < 3 {
			t.Fatalf("%s: only %d lines", tc.name, len(lines))
		}
		parts := strings.Split(strings.ReplaceAll(lines[2], " ", ""), ":")
		if len(parts) < 2 || strings.Split(parts[1], "-")[0] != "1.22.0" {
			t.Errorf("%s: driver version line %q", tc.name, lines[2])
		}
		for _, r := range tc.rows {
			if !strings.Contains(out, r) {
				t.Errorf("%s: missing %q in\n%s", tc.name, r, out)
			}
		}
	}
}

func TestQuery(t *testing.T) {
	two := map[string]string{"HPUSIM_DEVICE_COUNT": "2"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"short flags", two, []string{"-Q", "index,module_id", "-f", "csv"}, "index, module_id\n0, 0\n1, 1\n"},
		{"long flags", two, []string{"--query-aip=index,name,bus_id", "--format=csv"},
			"index, name, bus_id\n0, HL-225, 0000:09:00.0\n1, HL-225, 0000:0a:00.0\n"},
		{"noheader", nil, []string{"-Q", "memory.total,memory.used,memory.free", "-f", "csv,noheader"},
			"98304 MiB, 768 MiB, 97536 MiB\n"},
		{"nounits", nil, []string{"-Q", "memory.total,power.draw", "-f", "csv,noheader,nounits"}, "98304, 87\n"},
		{"memory limit", map[string]string{"HPUSIM_MEMORY_LIMIT": "2GiB"}, []string{"-Q", "memory.total", "-f", "csv"},
			"memory.total\n2048 MiB\n"},
		{"all fields", map[string]string{"HPUSIM_DEVICE_TYPE": "gaudi3"},
			[]string{"-Q", "driver_version,serial,uuid,temperature.aip,utilization.aip,power.draw,power.limit", "-f", "csv,noheader"},
			"1.22.0-e8ee9c8, AN03000100, 01P0-HL3080A0-15-SIM000-00-00-00, 26 C, 0 %, 87 W, 900 W\n"},
		{"visible modules", map[string]string{"HABANA_VISIBLE_MODULES": "2, 5"}, []string{"-Q", "index,module_id,bus_id", "-f", "csv,noheader"},
			"0, 2, 0000:33:00.0\n1, 5, 0000:4e:00.0\n"},
		{"visible restricts count", map[string]string{"HPUSIM_DEVICE_COUNT": "4", "HABANA_VISIBLE_MODULES": "3,6,1"},
			[]string{"-Q", "module_id", "-f", "csv,noheader"}, "3\n1\n"},
		{"no devices", map[string]string{"HPUSIM_DEVICE_COUNT": "0"}, []string{"-Q", "index", "-f", "csv"}, "index\n"},
	} {
		out, errOut, code := hlsmi(t, tc.env, tc.args...)
		if code != 0 || out != tc.want {
			t.Errorf("%s: code %d, stderr %q, got\n%s\nwant\n%s", tc.name, code, errOut, out, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{"bad field", nil, []string{"-Q", "index,bogus", "-f", "csv"}, `Field "bogus" is not a valid field`},
		{"bad field without devices", map[string]string{"HPUSIM_DEVICE_COUNT": "0"}, []string{"-Q", "bogus"}, "bogus"},
		{"bad format", nil, []string{"-Q", "index", "-f", "json"}, "invalid format"},
		{"missing query value", nil, []string{"-Q"}, "needs a field list"},
		{"bad flag", nil, []string{"-x"}, "Usage: hl-smi"},
		{"bad long flag", nil, []string{"--bogus"}, "unknown option"},
		{"bad type", map[string]string{"HPUSIM_DEVICE_TYPE": "gaudi4"}, nil, "HPUSIM_DEVICE_TYPE"},
		{"bad count", map[string]string{"HPUSIM_DEVICE_COUNT": "9"}, nil, "HPUSIM_DEVICE_COUNT"},
		{"bad limit", map[string]string{"HPUSIM_MEMORY_LIMIT": "lots"}, []string{"-L"}, "HPUSIM_MEMORY_LIMIT"},
		{"bad visible", map[string]string{"HABANA_VISIBLE_MODULES": "0,0"}, nil, "HABANA_VISIBLE_MODULES"},
	} {
		out, errOut, code := hlsmi(t, tc.env, tc.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("%s: code %d, stdout %q, stderr %q, want %q", tc.name, code, out, errOut, tc.wantErr)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		out, errOut, code := hlsmi(t, nil, arg)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: hl-smi") {
			t.Errorf("%s: code %d, stdout %q, stderr %q", arg, code, out, errOut)
		}
	}
}
