// Command hl-smi emulates Habana's hl-smi for hpusim's fake Gaudi devices.
//
// Clients (framework version checks, schedulers, monitoring) parse its output
// with regexes and fixed line positions, so the layouts below copy the real
// tool byte for byte where a parser depends on them.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"hpusim/device"
)

// Emulated software stack; every version string is derived from these.
const (
	version     = "1.22.0"
	firmware    = "59.1.1.1"
	buildDate   = "Jan 16 2025 - 17:51:04"
	driverHash  = "e8ee9c8"
	nicHash     = "2c6b9b1"
	reservedMiB = 768 // what a fresh card reports in use (driver-reserved HBM)
	maxModules  = 8   // module ids of one HLS box
	tableWidth  = 79
	driverCol   = 54 // column of the value on the Driver Version lines
	hlsmiVerCol = 47 // column of the value on the HL-SMI Version line
)

var (
	fullVersion   = "hl-" + version + "-fw-" + firmware
	driverVersion = version + "-" + driverHash
	// PCI bus numbers by module id, so each card keeps its address when others are hidden.
	busNumbers = [maxModules]int{0x09, 0x0a, 0x33, 0x34, 0x4d, 0x4e, 0x9a, 0x9b}
)

const usage = `Usage: hl-smi [OPTION]...
Emulated Habana Labs System Management Interface (hpusim).

  (no option)               print the device table
  -L, --list-aips           list devices with product and firmware details
  -Q, --query-aip=FIELDS    query comma-separated FIELDS of every device
  -f, --format=FORMAT       output format for -Q: csv[,noheader][,nounits]
  -v, --version             print the hl-smi version
  -h, --help                print this help

Query fields: index, module_id, name, bus_id, driver_version, memory.total,
  memory.used, memory.free, serial, uuid, temperature.aip, utilization.aip,
  power.draw, power.limit

Configured by HPUSIM_DEVICE_TYPE, HPUSIM_DEVICE_COUNT, HPUSIM_MEMORY_LIMIT and
HABANA_VISIBLE_MODULES.
`

// card is one listed device with the values every output format shares.
type card struct {
	index, module int
	gen           device.Generation
	totalMiB      int64
}

func (c card) name() string {
	switch c.gen {
	case device.Gaudi:
		return "HL-205"
	case device.Gaudi3:
		return "HL-325L"
	}
	return "HL-225"
}

func (c card) genDigit() int { return int(c.gen) }

// genTag is the generation part of firmware strings; Gaudi1 has no digit,
// which is how clients (regex `hl-gaudi([\d\-])`) tell it apart.
func (c card) genTag() string {
	if c.gen == device.Gaudi {
		return "gaudi"
	}
	return fmt.Sprintf("gaudi%d", c.gen)
}

func (c card) busID() string  { return fmt.Sprintf("0000:%02x:00.0", busNumbers[c.module]) }
func (c card) serial() string { return fmt.Sprintf("AN%02d%06d", c.genDigit(), 100+c.module) }
func (c card) uuid() string {
	return fmt.Sprintf("01P0-HL%d080A0-15-SIM%03d-00-00-%02d", c.genDigit(), c.module, c.module)
}
func (c card) usedMiB() int64 { return min(reservedMiB, c.totalMiB) }
func (c card) tempC() int     { return 26 + c.module%4 }
func (c card) powerW() int    { return 87 + 2*c.module }
func (c card) powerCapW() int {
	switch c.gen {
	case device.Gaudi:
		return 350
	case device.Gaudi3:
		return 900
	}
	return 600
}

// loadCards reads the hpusim configuration through getenv (os.Getenv in
// production, a map in tests). device.Init is not used because it reads the
// process environment once and allocates device state hl-smi does not need.
func loadCards(getenv func(string) string) ([]card, error) {
	gen, err := device.ParseGeneration(getenv("HPUSIM_DEVICE_TYPE"))
	if err != nil {
		return nil, err
	}
	capacity := gen.DefaultCapacity()
	if s := getenv("HPUSIM_MEMORY_LIMIT"); s != "" {
		if capacity, err = device.ParseSize(s); err != nil {
			return nil, fmt.Errorf("HPUSIM_MEMORY_LIMIT: %v", err)
		}
	}
	count, countSet := 1, false
	if s := getenv("HPUSIM_DEVICE_COUNT"); s != "" {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 || n > maxModules {
			return nil, fmt.Errorf("HPUSIM_DEVICE_COUNT=%q: expected 0..%d", s, maxModules)
		}
		count, countSet = n, true
	}
	modules := make([]int, 0, maxModules)
	if s := strings.TrimSpace(getenv("HABANA_VISIBLE_MODULES")); s != "" {
		// An explicit device count is the box size, so visible modules only
		// restrict it; without one the list alone says which cards exist.
		seen := map[int]bool{}
		for _, f := range strings.Split(s, ",") {
			m, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || m < 0 || m >= maxModules || seen[m] {
				return nil, fmt.Errorf("HABANA_VISIBLE_MODULES=%q: expected distinct module ids 0..%d", s, maxModules-1)
			}
			seen[m] = true
			if !countSet || m < count {
				modules = append(modules, m)
			}
		}
	} else {
		for m := range count {
			modules = append(modules, m)
		}
	}
	cards := make([]card, len(modules))
	for i, m := range modules {
		cards[i] = card{index: i, module: m, gen: gen, totalMiB: capacity >> 20}
	}
	return cards, nil
}

func writeVersion(w io.Writer) {
	fmt.Fprintf(w, "Habanalabs hl-smi/hlml version %s (%s)\n", fullVersion, buildDate)
}

func writeList(w io.Writer, cards []card) {
	for _, c := range cards {
		fw := fmt.Sprintf("hl-%s-%s-fw-%s-sec-9", c.genTag(), version, firmware)
		fmt.Fprintf(w, "[%d] AIP (accel%d) %s\n", c.index, c.module, c.busID())
		for _, kv := range [][2]string{
			{"Product Name", c.name()},
			{"Model Number", c.name()},
			{"Serial Number", c.serial()},
			{"Module ID", strconv.Itoa(c.module)},
			{"PCI Bus Id", c.busID()},
			{"UUID", c.uuid()},
			{"Driver Version", driverVersion},
			{"Memory Total", fmt.Sprintf("%d MiB", c.totalMiB)},
			{"Firmware [FIT] Version", fmt.Sprintf("Linux %s 5.10.18-%s (%s)", c.genTag(), fw, buildDate)},
			{"Firmware [SPI] Version", fmt.Sprintf("Preboot version %s (%s)", fw, buildDate)},
		} {
			fmt.Fprintf(w, "        %s : %s\n", kv[0], kv[1])
		}
		fmt.Fprintln(w)
	}
}

// kvLine puts value at column col of a boxed header line, padded to the table width.
func kvLine(label, value string, col int) string {
	s := "| " + label
	s += strings.Repeat(" ", max(col-len(s), 1)) + value
	return s + strings.Repeat(" ", max(tableWidth-1-len(s), 0)) + "|"
}

// writeTable prints the device table; claims (device.Claims) fill its compute processes.
func writeTable(w io.Writer, cards []card, claims []device.Claim) {
	sep := "|-------------------------------+----------------------+----------------------|"
	lines := []string{
		"+" + strings.Repeat("-", tableWidth-2) + "+",
		kvLine("HL-SMI Version:", fullVersion, hlsmiVerCol),
		kvLine("Driver Version:", driverVersion, driverCol), // clients read this as line index 2
		kvLine("Nic Driver Version:", version+"-"+nicHash, driverCol),
		"|-------------------------------+----------------------+----------------------+",
		// The real tool prints this line one char short; it is padded here so every line is 79 wide.
		"| AIP  Name       Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |",
		"| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | AIP-Util  Compute M. |",
		"|===============================+======================+======================|",
	}
	for _, c := range cards {
		mem := fmt.Sprintf("%dMiB / %dMiB", c.usedMiB(), c.totalMiB)
		lines = append(lines,
			fmt.Sprintf("| %3d  %-20sN/A  | %s     N/A |                   0  |", c.index, c.name(), c.busID()),
			fmt.Sprintf("| N/A  %3dC   N/A  %4dW / %3dW |%21s |%6d%%           N/A |", c.tempC(), c.powerW(), c.powerCapW(), mem, 0),
			sep)
	}
	lines = append(lines,
		"| Compute Processes:                                               AIP Memory |",
		"|  AIP       PID   Type   Process name                             Usage      |",
		"|=============================================================================|")
	for _, c := range cards {
		n := 0
		for _, p := range claims {
			if p.Module == c.module {
				name := p.Name
				if len(name) > 40 {
					name = name[:37] + "..."
				}
				lines = append(lines, fmt.Sprintf("| %3d%11d   %-4s   %-40s %-11s|", c.index, p.PID, "C", name, "N/A"))
				n++
			}
		}
		if n == 0 {
			lines = append(lines, fmt.Sprintf("| %3d%11s   %-4s   %-40s %-11s|", c.index, "N/A", "N/A", "N/A", "N/A"))
		}
	}
	lines = append(lines, "+"+strings.Repeat("=", tableWidth-2)+"+")
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}

// queryValue returns one CSV cell; ok is false for an unknown field.
func queryValue(c card, field string, units bool) (string, bool) {
	unit := func(n int64, u string) string {
		if units {
			return fmt.Sprintf("%d %s", n, u)
		}
		return strconv.FormatInt(n, 10)
	}
	switch field {
	case "index":
		return strconv.Itoa(c.index), true
	case "module_id":
		return strconv.Itoa(c.module), true
	case "name":
		return c.name(), true
	case "bus_id":
		return c.busID(), true
	case "driver_version":
		return driverVersion, true
	case "memory.total":
		return unit(c.totalMiB, "MiB"), true
	case "memory.used":
		return unit(c.usedMiB(), "MiB"), true
	case "memory.free":
		return unit(c.totalMiB-c.usedMiB(), "MiB"), true
	case "serial":
		return c.serial(), true
	case "uuid":
		return c.uuid(), true
	case "temperature.aip":
		return unit(int64(c.tempC()), "C"), true
	case "utilization.aip":
		return unit(0, "%"), true
	case "power.draw":
		return unit(int64(c.powerW()), "W"), true
	case "power.limit":
		return unit(int64(c.powerCapW()), "W"), true
	}
	return "", false
}

// writeQuery validates every field before printing, so a bad field prints nothing to w.
func writeQuery(w io.Writer, cards []card, fieldList, format string) error {
	header, units := true, true
	for i, opt := range strings.Split(format, ",") {
		switch opt = strings.TrimSpace(opt); {
		case i == 0 && opt == "csv":
		case i > 0 && opt == "noheader":
			header = false
		case i > 0 && opt == "nounits":
			units = false
		default:
			return fmt.Errorf("invalid format %q: expected csv[,noheader][,nounits]", format)
		}
	}
	var fields []string
	for _, f := range strings.Split(fieldList, ",") {
		if f = strings.TrimSpace(f); f != "" {
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return fmt.Errorf("no query fields given")
	}
	// Checked against a dummy card so a bad field fails even with no devices.
	for _, f := range fields {
		if _, ok := queryValue(card{}, f, units); !ok {
			return fmt.Errorf("Field \"%s\" is not a valid field to query.", f)
		}
	}
	if header {
		fmt.Fprintln(w, strings.Join(fields, ", "))
	}
	for _, c := range cards {
		cells := make([]string, len(fields))
		for i, f := range fields {
			cells[i], _ = queryValue(c, f, units)
		}
		fmt.Fprintln(w, strings.Join(cells, ", "))
	}
	return nil
}

// run is main without the process: it returns the exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var mode, query, format string
	format = "csv"
	badUsage := func(msg string) int {
		fmt.Fprintf(stderr, "hl-smi: %s\n%s", msg, usage)
		return 1
	}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		// takeValue accepts both "-Q x" and "-Q=x" / "--query-aip=x".
		takeValue := func() (string, bool) {
			if hasValue {
				return value, true
			}
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return "", false
		}
		var ok bool
		switch name {
		case "-h", "--help":
			fmt.Fprint(stdout, usage)
			return 0
		case "-v", "--version":
			mode = "version"
		case "-L", "--list-aips":
			mode = "list"
		case "-Q", "--query-aip":
			if query, ok = takeValue(); !ok {
				return badUsage(name + " needs a field list")
			}
			mode = "query"
		case "-f", "--format":
			if format, ok = takeValue(); !ok {
				return badUsage(name + " needs a format")
			}
		default:
			return badUsage(fmt.Sprintf("unknown option %q", args[i]))
		}
	}
	// A bad configuration fails every mode, as a missing driver would on real hardware.
	cards, err := loadCards(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "hl-smi: %v\n", err)
		return 1
	}
	switch mode {
	case "version":
		writeVersion(stdout)
	case "list":
		writeList(stdout, cards)
	case "query":
		if err := writeQuery(stdout, cards, query, format); err != nil {
			fmt.Fprintf(stderr, "hl-smi: %v\n", err)
			return 1
		}
	default:
		writeTable(stdout, cards, device.Claims(device.StatusDir(getenv)))
	}
	return 0
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
