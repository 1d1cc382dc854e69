package config

import (
	"fmt"
	"log/slog"
	"strings"
)

// LevelTrace is Consul's TRACE level, below slog's Debug.
const LevelTrace = slog.LevelDebug - 4

// ParseLogLevel maps Consul's log level names (trace, debug, info, warn,
// err/error; any case) to slog levels.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "trace":
		return LevelTrace, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "err", "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("invalid log level %q: valid levels are trace, debug, info, warn, error", s)
}

// normalizeLogLevel returns the canonical lower-case name of a valid level.
func normalizeLogLevel(s string) (string, error) {
	l, err := ParseLogLevel(s)
	if err != nil {
		return "", err
	}
	switch l {
	case LevelTrace:
		return "trace", nil
	case slog.LevelDebug:
		return "debug", nil
	case slog.LevelWarn:
		return "warn", nil
	case slog.LevelError:
		return "error", nil
	}
	return "info", nil
}
