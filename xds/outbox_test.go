package xds

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestOutbox: responses go out in the order they were pushed, one sender
// at a time, and no sender goroutine outlives an empty queue; after a send
// fails nothing more is sent and the failure is reported once.
func TestOutbox(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		sent    []string
		running int // senders under way
		most    int
		fails   []error
	)
	release := make(chan struct{})
	failOn := "x"
	o := &outbox{
		ctx: ctx,
		send: func(r *response) error {
			mu.Lock()
			running++
			most = max(most, running)
			sent = append(sent, r.nonce)
			fail := r.nonce == failOn
			mu.Unlock()
			if r.nonce == "1" {
				<-release // hold the first send while more are pushed
			}
			mu.Lock()
			running--
			mu.Unlock()
			if fail {
				return errors.New("stream broken")
			}
			return nil
		},
		spawn: func(f func()) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f()
			}()
		},
		failed: func(err error) {
			mu.Lock()
			fails = append(fails, err)
			mu.Unlock()
		},
	}
	idle := func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return !o.sending
	}
	waitIdle := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !idle() {
			if time.Now().After(deadline) {
				t.Fatal("the sender kept running with nothing to send")
			}
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
	}

	o.push([]response{{nonce: "1"}})
	o.push([]response{{nonce: "2"}, {nonce: "3"}})
	o.push([]response{{nonce: "4"}})
	close(release)
	waitIdle()
	o.push(nil)
	o.push([]response{{nonce: "5"}})
	waitIdle()
	mu.Lock()
	if got := fmt.Sprint(sent); got != "[1 2 3 4 5]" || most != 1 {
		t.Fatalf("sent %s with up to %d senders at once, want [1 2 3 4 5] by one", got, most)
	}
	mu.Unlock()

	o.push([]response{{nonce: "x"}, {nonce: "6"}})
	waitIdle()
	o.push([]response{{nonce: "7"}})
	waitIdle()
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(sent); got != "[1 2 3 4 5 x]" || len(fails) != 1 {
		t.Fatalf("after a failed send: sent %s, %d failures reported; want [1 2 3 4 5 x] and 1", got, len(fails))
	}
}
