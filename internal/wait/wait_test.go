package wait

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("a full sleep reported as cut short")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("a sleep whose context ended reported as full")
	}
}

func TestJitter(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 0} {
		if got := Jitter(d); got != 0 {
			t.Fatalf("Jitter(%v) = %v, want 0", d, got)
		}
	}
	for range 1000 {
		if got := Jitter(10 * time.Millisecond); got < 0 || got >= 10*time.Millisecond {
			t.Fatalf("Jitter(10ms) = %v, outside [0, 10ms)", got)
		}
	}
}
