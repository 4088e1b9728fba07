package bridge

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Logging of the lazy engine under the bridge's PT_LAZY module, with the same variables
// and line format as the Python side (utils/hl_logger.py), so both land in one log:
// LOG_LEVEL_PT_LAZY or LOG_LEVEL_ALL (0 trace .. 5 critical, 6 off; default 5), the
// legacy PT_HPU_LOG_MOD_MASK/PT_HPU_LOG_TYPE_MASK, ENABLE_CONSOLE and HABANA_LOGS.

const (
	levelTrace = iota
	levelDebug
	levelInfo
	levelWarning
	levelError
	levelCritical
)

const logModule = "PT_LAZY"
const logModuleBit = 0x20 // PT_LAZY's bit in PT_HPU_LOG_MOD_MASK

var (
	levelNames = [...]string{"trace", "debug", "info", "warning", "error", "critical"}
	logMu      sync.Mutex
	logFile    *os.File
)

func envIntOr(name string, def int64) (int64, bool) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def, false
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return def, false
	}
	return n, true
}

func logMasks() (mod, typ int64, ok bool) {
	mod, ok1 := envIntOr("PT_HPU_LOG_MOD_MASK", 0)
	typ, ok2 := envIntOr("PT_HPU_LOG_TYPE_MASK", 0)
	return mod, typ, ok1 && ok2
}

func logEnabled(level int) bool {
	if mod, typ, ok := logMasks(); ok && mod&logModuleBit != 0 && typ&(1<<level) != 0 {
		return true
	}
	th, ok := envIntOr("LOG_LEVEL_"+logModule, 0)
	if !ok {
		th, _ = envIntOr("LOG_LEVEL_ALL", 5)
	}
	return int64(level) >= th
}

func logf(level int, format string, args ...any) {
	if !logEnabled(level) {
		return
	}
	line := fmt.Sprintf("[%s][%-12s][%s][tid:%X] %s\n", time.Now().Format("15:04:05.000000"),
		logModule, levelNames[level], syscall.Gettid(), fmt.Sprintf(format, args...))
	logMu.Lock()
	defer logMu.Unlock()
	_, _, masks := logMasks()
	if masks || truthy(os.Getenv("ENABLE_CONSOLE")) {
		os.Stderr.WriteString(line)
		return
	}
	if logFile == nil {
		dir := os.Getenv("HABANA_LOGS")
		if dir == "" {
			home, _ := os.UserHomeDir()
			dir = filepath.Join(home, ".habana_logs")
		}
		_ = os.MkdirAll(dir, 0o755)
		f, err := os.OpenFile(filepath.Join(dir, "pytorch_log.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			os.Stderr.WriteString(line)
			return
		}
		logFile = f
	}
	logFile.WriteString(line)
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}
