package logmonitor

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
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
		{name: "info text", level: slog.LevelInfo, want: []string{
			`level=INFO msg=started component=http`, `level=WARN msg=slow component=http g.k=v`}},
		{name: "debug json", level: slog.LevelDebug, json: true, want: []string{
			`"level":"DEBUG","msg":"detail","component":"http"`, `"msg":"started","component":"http"`, `"g":{"k":"v"}`}},
		{name: "warn only", level: slog.LevelWarn, want: []string{`msg=slow`}},
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
