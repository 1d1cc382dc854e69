package leafcert

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/structs"
)

// watchRecorder collects one Watch's calls.
type watchRecorder struct {
	mu    sync.Mutex
	certs []*structs.IssuedCert
	errs  []error
}

func (r *watchRecorder) fn(c *structs.IssuedCert, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.certs = append(r.certs, c)
}

func (r *watchRecorder) waitCerts(t *testing.T, n int) []*structs.IssuedCert {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		got := append([]*structs.IssuedCert(nil), r.certs...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d certificates delivered, want %d", len(got), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatch: a watch gets the first certificate, the failures of a
// refused first signing before it, the re-issue after a rotation, and
// nothing once its ctx ends.
func TestWatch(t *testing.T) {
	f := newFakeCA(t, true)
	f.set(func(f *fakeCA) { f.rateLimit = 2 })
	m := newManager(t, f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rec watchRecorder
	if err := m.Watch(ctx, "web", "", rec.fn); err != nil {
		t.Fatal(err)
	}
	first := rec.waitCerts(t, 1)[0]
	checkLeaf(t, first, f.currentRoots().Roots, "web")
	rec.mu.Lock()
	refused := len(rec.errs)
	rec.mu.Unlock()
	if refused != 2 {
		t.Fatalf("%d failures delivered before the certificate, want the 2 refusals", refused)
	}
	for _, err := range rec.errs {
		if !errors.Is(err, structs.ErrRateLimited) {
			t.Fatalf("failure %v, want the rate limit", err)
		}
	}

	f.rotate("ec", 384)
	second := rec.waitCerts(t, 2)[1]
	if second.ModifyIndex <= first.ModifyIndex || connect.HexString(checkLeaf(t, second, f.currentRoots().Roots, "web").AuthorityKeyId) != f.currentRoots().Roots.Active().SigningKeyID {
		t.Fatalf("after rotation: %+v", second)
	}
	cancel()
	f.rotate("ec", 256)
	// The Get sees the re-issue; the ended watch does not.
	get(t, m, "web", second.ModifyIndex, 5*time.Second)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.certs) != 2 {
		t.Fatalf("%d certificates delivered after the watch ended", len(rec.certs)-2)
	}
}

// TestWatchedLeavesHoldNoGoroutine: a cached, watched leaf is a runtime
// timer and a callback, not a goroutine.
func TestWatchedLeavesHoldNoGoroutine(t *testing.T) {
	const n = 100
	f := newFakeCA(t, true)
	m := newManager(t, f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := runtime.NumGoroutine()
	recs := make([]watchRecorder, n)
	for i := range recs {
		if err := m.Watch(ctx, fmt.Sprintf("svc-%d", i), "", recs[i].fn); err != nil {
			t.Fatal(err)
		}
	}
	for i := range recs {
		recs[i].waitCerts(t, 1)
	}
	if grown := runtime.NumGoroutine() - before; grown > n/10 {
		t.Fatalf("%d watched leaves hold %d goroutines", n, grown)
	}
}
