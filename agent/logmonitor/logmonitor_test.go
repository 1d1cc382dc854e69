package logmonitor

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// drain returns what the subscription holds now.
func drain(ch <-chan []byte) []string {
	var out []string
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, string(l))
		default:
			return out
		}
	}
}

func TestSubscribers(t *testing.T) {
	tests := []struct {
		name  string
		level slog.Level
		json  bool
		want  []string // substrings, one per line, in order
	}{
		// Consul's (hclog's) text lines: level, module, message, attributes.
		{name: "info text", level: slog.LevelInfo, want: []string{
			`Z [INFO]  agent.http: started` + "\n", `Z [WARN]  agent.http: slow: g.k=v` + "\n"}},
		{name: "debug json", level: slog.LevelDebug, json: true, want: []string{
			`"level":"DEBUG","msg":"detail","component":"http"`, `"msg":"started","component":"http"`, `"g":{"k":"v"}`}},
		{name: "warn only", level: slog.LevelWarn, want: []string{`[WARN]  agent.http: slow`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var own bytes.Buffer
			h := New(Config{})
			log := slog.New(h.Handler(slog.NewTextHandler(&own, &slog.HandlerOptions{Level: slog.LevelWarn}))).With("component", "http")
			lines, cancel, err := h.Subscribe(tt.level, tt.json)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("detail")
			log.Info("started")
			log.WithGroup("g").Warn("slow", "k", "v")
			got := drain(lines)
			if len(got) != len(tt.want) {
				t.Fatalf("lines %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("line %d %q lacks %q", i, got[i], w)
				}
			}
			// The agent's own handler keeps its level whatever subscribers ask.
			if strings.Contains(own.String(), "started") || !strings.Contains(own.String(), "slow") {
				t.Errorf("own output %q", own.String())
			}
			cancel()
			cancel()
			if _, ok := <-lines; ok {
				t.Fatal("channel open after cancel")
			}
			log.Error("after")
		})
	}
}

func TestCloseAndDrops(t *testing.T) {
	h := New(Config{Buffer: 2})
	log := slog.New(h.Handler(slog.DiscardHandler))
	lines, cancel, err := h.Subscribe(slog.LevelInfo, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	for range 5 {
		log.Info("x") // never blocks on the full subscriber
	}
	if got := drain(lines); len(got) != 2 {
		t.Fatalf("%d lines kept, want the buffer's 2", len(got))
	}
	h.Close()
	if _, ok := <-lines; ok {
		t.Fatal("channel open after Close")
	}
	if _, _, err := h.Subscribe(slog.LevelInfo, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
	if log.Enabled(t.Context(), slog.LevelError) {
		t.Fatal("enabled with no subscriber and a discarding handler")
	}
}

// TestHCLogFormat: the text lines are hclog's, as Consul writes them.
func TestHCLogFormat(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 6_000_000, time.UTC)
	trace := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.LevelKey && a.Value.Any().(slog.Level) < slog.LevelDebug {
			a.Value = slog.StringValue("TRACE")
		}
		return a
	}
	tests := []struct {
		name  string
		log   func(h slog.Handler) slog.Handler
		level slog.Level
		msg   string
		attrs []slog.Attr
		want  string
	}{
		{"plain", func(h slog.Handler) slog.Handler { return h }, slog.LevelInfo, "agent started", nil,
			"2026-01-02T15:04:05.006Z [INFO]  agent: agent started\n"},
		{"module and attrs", func(h slog.Handler) slog.Handler {
			return h.WithAttrs([]slog.Attr{slog.String("component", "anti-entropy"), slog.Int("n", 2)})
		}, slog.LevelDebug, "synced service", []slog.Attr{slog.String("service", "redis"), slog.String("why", "a b"), slog.String("e", "")},
			`2026-01-02T15:04:05.006Z [DEBUG] agent.anti-entropy: synced service: n=2 service=redis why="a b" e=""` + "\n"},
		{"component on the record", func(h slog.Handler) slog.Handler { return h }, slog.LevelError, "failed",
			[]slog.Attr{slog.String("component", "http"), slog.Any("error", errors.New("boom"))},
			"2026-01-02T15:04:05.006Z [ERROR] agent.http: failed: error=boom\n"},
		{"groups", func(h slog.Handler) slog.Handler { return h.WithGroup("g") }, slog.LevelWarn, "slow",
			[]slog.Attr{slog.Group("h", slog.Int("k", 1)), slog.String("component", "not a module")},
			`2026-01-02T15:04:05.006Z [WARN]  agent: slow: g.h.k=1 g.component="not a module"` + "\n"},
		{"trace", func(h slog.Handler) slog.Handler { return h }, slog.LevelDebug - 4, "detail", nil,
			"2026-01-02T15:04:05.006Z [TRACE] agent: detail\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := tt.log(newHCLogHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4, ReplaceAttr: trace}))
			r := slog.NewRecord(at, tt.level, tt.msg, 0)
			r.AddAttrs(tt.attrs...)
			if err := h.Handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got  %q\nwant %q", buf.String(), tt.want)
			}
		})
	}
}
