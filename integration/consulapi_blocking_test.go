package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// blockingRead is one read endpoint seen through the official client: it
// returns a comparable rendering of the result and X-Consul-Index.
type blockingRead func(c *api.Client, q *api.QueryOptions) (string, uint64, error)

// apiBlocking: for a KV key and a health service, a blocking read
// (WaitIndex) with no change waits out its wait time instead of answering
// at once with the same index, and a blocking read on the first agent wakes
// promptly when the second agent takes a write.
func apiBlocking(t *testing.T, primary, secondary *api.Client) {
	const key = "apiblocking/key"
	const svc = "apiblocking-svc"
	kvRead := func(c *api.Client, q *api.QueryOptions) (string, uint64, error) {
		p, meta, err := c.KV().Get(key, q)
		if err != nil {
			return "", 0, err
		}
		if p == nil {
			return "<missing>", meta.LastIndex, nil
		}
		return string(p.Value), meta.LastIndex, nil
	}
	healthRead := func(c *api.Client, q *api.QueryOptions) (string, uint64, error) {
		entries, meta, err := c.Health().Service(svc, "", true, q)
		if err != nil {
			return "", 0, err
		}
		var ids []string
		for _, e := range entries {
			ids = append(ids, e.Service.ID)
		}
		slices.Sort(ids)
		return strings.Join(ids, ","), meta.LastIndex, nil
	}
	put := func(value string) func(*testing.T, *api.Client) {
		return func(t *testing.T, c *api.Client) {
			if _, err := c.KV().Put(&api.KVPair{Key: key, Value: []byte(value)}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	register := func(id string) func(*testing.T, *api.Client) {
		return func(t *testing.T, c *api.Client) {
			registerAll(t, c, extRegistration("apiblocking-node", "10.79.0.1", id, svc, nil, 7000, api.HealthPassing))
		}
	}
	tests := []struct {
		name   string
		read   blockingRead
		before func(*testing.T, *api.Client)
		write  func(*testing.T, *api.Client)
		want   string
	}{
		{"kv", kvRead, put("before"), put("after"), "after"},
		{"health service", healthRead, register("blk-1"), register("blk-2"), "blk-1,blk-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.before(t, secondary)
			// The write went through the other agent; wait until the
			// first one's (default-mode) reads show it.
			var content string
			var idx uint64
			eventually(t, 10*time.Second, "initial state visible", func() error {
				var err error
				content, idx, err = tt.read(primary, nil)
				if err == nil && (content == "" || content == "<missing>") {
					err = fmt.Errorf("initial write not visible yet (%q)", content)
				}
				return err
			})

			const wait = time.Second
			start := time.Now()
			got, idx2, err := tt.read(primary, &api.QueryOptions{WaitIndex: idx, WaitTime: wait})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if idx2 == idx && elapsed < wait-100*time.Millisecond {
				t.Errorf("blocking read with no change answered after %s with the same index %d: clients would spin", elapsed, idx)
			}
			if got != content {
				t.Errorf("content changed with no write: %q -> %q", content, got)
			}

			ctx := apiContext(t, 30*time.Second)
			type result struct {
				content string
				index   uint64
				err     error
				at      time.Time
			}
			res := make(chan result, 1)
			go func() {
				c, i, err := waitForChange(ctx, primary, tt.read, content, idx)
				res <- result{c, i, err, time.Now()}
			}()
			select {
			case r := <-res:
				t.Fatalf("blocking read returned before any write: %+v", r)
			case <-time.After(500 * time.Millisecond):
			}
			wroteAt := time.Now()
			tt.write(t, secondary)
			select {
			case r := <-res:
				if r.err != nil {
					t.Fatal(r.err)
				}
				if r.content != tt.want || r.index <= idx {
					t.Errorf("woke with %q at index %d, want %q past index %d", r.content, r.index, tt.want, idx)
				}
				if d := r.at.Sub(wroteAt); d > 5*time.Second {
					t.Errorf("blocking read woke %s after the write", d)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("blocking read did not wake within 15s of the write")
			}
		})
	}
}

// waitForChange issues blocking reads from index until the content differs
// from initial. A wake-up with a moved index and the same content is
// allowed (Consul may wake on a related write); one with the same index
// before the wait time is over is the spin bug clients choke on.
func waitForChange(ctx context.Context, c *api.Client, read blockingRead, initial string, index uint64) (string, uint64, error) {
	const wait = 20 * time.Second
	for {
		start := time.Now()
		got, idx, err := read(c, (&api.QueryOptions{WaitIndex: index, WaitTime: wait}).WithContext(ctx))
		if err != nil {
			return "", 0, err
		}
		if got != initial {
			return got, idx, nil
		}
		if idx == index && time.Since(start) < wait-time.Second {
			return got, idx, fmt.Errorf("blocking read at index %d returned after %s with the same index", index, time.Since(start))
		}
		index = idx
	}
}
