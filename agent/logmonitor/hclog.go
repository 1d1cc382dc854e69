package logmonitor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// hclogTimeFormat is hclog's timestamp, which Consul's log lines start
// with.
const hclogTimeFormat = "2006-01-02T15:04:05.000Z0700"

// moduleKey is the attribute that names the part of the agent a record
// comes from; it becomes the line's module name ("agent.http"), as
// Consul's named sub-loggers.
const moduleKey = "component"

// hclogHandler formats records as Consul's text log lines (hclog's
// format), which tools reading /v1/agent/monitor expect:
//
//	2026-01-02T15:04:05.000Z [INFO]  agent.http: request served: path=/v1/kv/a
//
// Levels are padded to the same width, the module follows, then the
// message and the attributes as key=value, a value with spaces quoted.
type hclogHandler struct {
	w           io.Writer
	level       slog.Leveler
	replaceAttr func(groups []string, a slog.Attr) slog.Attr
	module      string
	prefix      string // the open groups, "g1.g2."
	attrs       []string
}

func newHCLogHandler(w io.Writer, opts *slog.HandlerOptions) *hclogHandler {
	return &hclogHandler{w: w, level: opts.Level, replaceAttr: opts.ReplaceAttr, module: "agent"}
}

func (h *hclogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *hclogHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	b.WriteString(t.Format(hclogTimeFormat))
	b.WriteString(" ")
	fmt.Fprintf(&b, "%-8s", "["+h.levelName(r.Level)+"]")
	b.WriteString(h.moduleOf(r))
	b.WriteString(": ")
	b.WriteString(r.Message)
	attrs := append([]string(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		if h.prefix == "" && a.Key == moduleKey {
			return true
		}
		attrs = h.appendAttr(attrs, h.prefix, a)
		return true
	})
	if len(attrs) > 0 {
		b.WriteString(": ")
		b.WriteString(strings.Join(attrs, " "))
	}
	b.WriteString("\n")
	_, err := io.WriteString(h.w, b.String())
	return err
}

// levelName is the level as the line shows it, in capitals; ReplaceAttr
// may rename it (levels below debug are TRACE).
func (h *hclogHandler) levelName(l slog.Level) string {
	a := slog.Any(slog.LevelKey, l)
	if h.replaceAttr != nil {
		a = h.replaceAttr(nil, a)
	}
	return strings.ToUpper(a.Value.String())
}

// moduleOf is the record's module: a component attribute of the record
// itself names a sub-module of the handler's.
func (h *hclogHandler) moduleOf(r slog.Record) string {
	module := h.module
	if h.prefix != "" {
		return module
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == moduleKey {
			module = h.module + "." + a.Value.String()
			return false
		}
		return true
	})
	return module
}

func (h *hclogHandler) appendAttr(out []string, prefix string, a slog.Attr) []string {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			out = h.appendAttr(out, p, ga)
		}
		return out
	}
	if a.Equal(slog.Attr{}) {
		return out
	}
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " \t\n\"=") {
		v = fmt.Sprintf("%q", v)
	}
	return append(out, prefix+a.Key+"="+v)
}

func (h *hclogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]string(nil), h.attrs...)
	for _, a := range attrs {
		if h.prefix == "" && a.Key == moduleKey {
			c.module = h.module + "." + a.Value.String()
			continue
		}
		c.attrs = c.appendAttr(c.attrs, h.prefix, a)
	}
	return &c
}

func (h *hclogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}
