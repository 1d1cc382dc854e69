// Package hclogbridge sends the output of HashiCorp libraries that log
// through hclog (raft, consul/api's watch plans) to a log/slog logger, so
// that the agent has one log stream with one level setting.
package hclogbridge

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strconv"

	"github.com/hashicorp/go-hclog"
)

// hclogBridge is an hclog.Logger writing to slog.
type hclogBridge struct {
	hclog.Logger // null logger: supplies the methods nothing here needs
	slog         *slog.Logger
	name         string
	args         []any
}

// New returns an hclog.Logger that logs to l with the attribute
// subsystem=name; its level follows l's handler.
func New(l *slog.Logger, name string) hclog.Logger {
	return &hclogBridge{Logger: hclog.NewNullLogger(), slog: l.With("subsystem", name), name: name}
}

func hclogToSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (b *hclogBridge) Log(level hclog.Level, msg string, args ...any) {
	b.slog.Log(context.Background(), hclogToSlog(level), msg, hclogArgs(append(b.args[:len(b.args):len(b.args)], args...))...)
}

// hclogArgs renders the values hclog formats itself as hclog renders
// them: raft logs its initial configuration as hclog.Fmt("%+v", servers),
// which slog would otherwise print as the raw slice `[%+v [...]]`. Keys
// and other values pass through for slog to render.
func hclogArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if i%2 == 0 {
			out[i] = a
			continue
		}
		switch v := a.(type) {
		case hclog.Format:
			if len(v) > 0 {
				if f, ok := v[0].(string); ok {
					a = fmt.Sprintf(f, v[1:]...)
				}
			}
		case hclog.Hex:
			a = "0x" + strconv.FormatUint(uint64(v), 16) //nolint:gosec // hclog prints the bits as unsigned too
		case hclog.Octal:
			a = "0" + strconv.FormatUint(uint64(v), 8) //nolint:gosec // hclog prints the bits as unsigned too
		case hclog.Binary:
			a = "0b" + strconv.FormatUint(uint64(v), 2) //nolint:gosec // hclog prints the bits as unsigned too
		case hclog.Quote:
			a = strconv.Quote(string(v))
		case hclog.CapturedStacktrace:
			a = string(v)
		}
		out[i] = a
	}
	return out
}
func (b *hclogBridge) Trace(msg string, args ...any) { b.Log(hclog.Trace, msg, args...) }
func (b *hclogBridge) Debug(msg string, args ...any) { b.Log(hclog.Debug, msg, args...) }
func (b *hclogBridge) Info(msg string, args ...any)  { b.Log(hclog.Info, msg, args...) }
func (b *hclogBridge) Warn(msg string, args ...any)  { b.Log(hclog.Warn, msg, args...) }
func (b *hclogBridge) Error(msg string, args ...any) { b.Log(hclog.Error, msg, args...) }

func (b *hclogBridge) enabled(l slog.Level) bool { return b.slog.Enabled(context.Background(), l) }
func (b *hclogBridge) IsTrace() bool             { return b.enabled(slog.LevelDebug - 4) }
func (b *hclogBridge) IsDebug() bool             { return b.enabled(slog.LevelDebug) }
func (b *hclogBridge) IsInfo() bool              { return b.enabled(slog.LevelInfo) }
func (b *hclogBridge) IsWarn() bool              { return b.enabled(slog.LevelWarn) }
func (b *hclogBridge) IsError() bool             { return b.enabled(slog.LevelError) }
func (b *hclogBridge) ImpliedArgs() []any        { return b.args }
func (b *hclogBridge) Name() string              { return b.name }

func (b *hclogBridge) With(args ...any) hclog.Logger {
	c := *b
	c.args = append(b.args[:len(b.args):len(b.args)], args...)
	return &c
}

func (b *hclogBridge) Named(name string) hclog.Logger {
	c := *b
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	c.slog = b.slog.With("subsystem", name)
	return &c
}

func (b *hclogBridge) ResetNamed(name string) hclog.Logger {
	c := *b
	c.name = name
	c.slog = b.slog.With("subsystem", name)
	return &c
}

func (b *hclogBridge) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(b.slog.Handler(), slog.LevelInfo)
}

func (b *hclogBridge) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return b.StandardLogger(nil).Writer()
}
