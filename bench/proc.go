package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for user space on every architecture Go runs
// on, whatever the kernel's own HZ.
const clockTick = 10 * time.Millisecond

// ProcSample is what /proc says about a process at one moment.
type ProcSample struct {
	// RSS is the resident set (VmRSS of /proc/<pid>/status), in bytes.
	RSS int64
	// CPU is the user plus system time the process used so far
	// (/proc/<pid>/stat), with a resolution of 10 ms.
	CPU time.Duration
}

// ReadProc samples process pid. pid 0 returns a zero sample and no error:
// the target's figures are then left out.
func ReadProc(pid int) (ProcSample, error) {
	if pid == 0 {
		return ProcSample{}, nil
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, fmt.Errorf("bench: read the target's status: %w", err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, fmt.Errorf("bench: read the target's stat: %w", err)
	}
	return parseProc(status, stat)
}

// parseProc reads VmRSS from a /proc/<pid>/status and utime and stime
// from a /proc/<pid>/stat.
func parseProc(status, stat []byte) (ProcSample, error) {
	var s ProcSample
	found := false
	for line := range strings.SplitSeq(string(status), "\n") {
		v, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return ProcSample{}, fmt.Errorf("bench: malformed VmRSS line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return ProcSample{}, fmt.Errorf("bench: malformed VmRSS line %q: %w", line, err)
		}
		s.RSS, found = kb*1024, true
	}
	if !found {
		return ProcSample{}, fmt.Errorf("bench: no VmRSS in the target's status (a zombie?)")
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses itself: the fields after it start after the last ')'.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return ProcSample{}, fmt.Errorf("bench: malformed stat %.60q", stat)
	}
	f := strings.Fields(string(stat[end+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return ProcSample{}, fmt.Errorf("bench: stat has %d fields after the name, want at least 13", len(f))
	}
	for _, x := range f[11:13] {
		ticks, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return ProcSample{}, fmt.Errorf("bench: malformed stat CPU field %q: %w", x, err)
		}
		s.CPU += time.Duration(ticks) * clockTick
	}
	return s, nil
}
