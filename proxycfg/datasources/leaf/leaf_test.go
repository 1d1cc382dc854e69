package leaf

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/agent/leafcert"
	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func notify(s *Source, service string) dstest.NotifyFunc {
	req := &proxycfg.LeafRequest{Service: service, Datacenter: "dc1"}
	return func(ctx context.Context, corr string, ch chan<- proxycfg.UpdateEvent) error {
		return s.Notify(ctx, req, corr, ch)
	}
}

// TestLeafFollowsTheLeafManager: watchers of one service share one loop
// over a real leaf manager signing through a real server; a CA rotation
// reaches them as a new certificate from the new root.
func TestLeafFollowsTheLeafManager(t *testing.T) {
	srv, _ := dstest.StartServer(t, "s1")
	lm, err := leafcert.New(leafcert.Config{RPC: srv, Datacenter: "dc1", RootChangeJitter: -1, RootsWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lm.Start()
	defer lm.Stop()
	src, err := New(Config{Watcher: lm})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close() // before lm.Stop (deferred earlier, runs later)

	// Buffered, as the manager's are: the source sends to one watcher
	// after the other, in no set order.
	a := dstest.WatchBuffered(t, "a", 4, notify(src, "web"))
	b := dstest.WatchBuffered(t, "b", 4, notify(src, "web"))
	db := dstest.Watch(t, "db", notify(src, "db"))
	ca, cb := a.Next(t).(*structs.IssuedCert), b.Next(t).(*structs.IssuedCert)
	if ca != cb || ca.Service != "web" || ca.CertPEM == "" || ca.PrivateKeyPEM == "" {
		t.Fatalf("web leaves: %p %p %+v", ca, cb, ca)
	}
	if c := db.Next(t).(*structs.IssuedCert); c.Service != "db" {
		t.Fatalf("db leaf for %q", c.Service)
	}
	if st := src.Stats(); st.Queries != 2 || st.Subscribers != 3 {
		t.Fatalf("stats = %+v, want 2 loops for 3 watchers", st)
	}
	// Nothing new while the certificate stands.
	a.None(t, 500*time.Millisecond)

	dstest.RotateCA(t, srv, 384)
	next := a.Next(t).(*structs.IssuedCert)
	if next.SerialNumber == ca.SerialNumber || next.ModifyIndex <= ca.ModifyIndex {
		t.Fatalf("after rotation: serial %s (was %s), index %d (was %d)", next.SerialNumber, ca.SerialNumber, next.ModifyIndex, ca.ModifyIndex)
	}
	if b.Next(t) != next {
		t.Fatal("watchers of one service must share the new certificate")
	}
}

// failingWatcher reports the same failure each time fire is called, as
// the leaf manager does for each refused attempt.
type failingWatcher struct {
	fns chan func(*structs.IssuedCert, error)
}

func (f failingWatcher) Watch(ctx context.Context, _, _ string, fn func(*structs.IssuedCert, error)) error {
	fn(nil, errors.New("CA unavailable"))
	f.fns <- fn
	return nil
}

// TestLeafErrorsAreEvents: a failed attempt is an error event, sent once
// however often the manager repeats it; a certificate after it is a
// result; Notify refuses a request without a service.
func TestLeafErrorsAreEvents(t *testing.T) {
	w := failingWatcher{fns: make(chan func(*structs.IssuedCert, error), 1)}
	src, err := New(Config{Watcher: w})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Notify(context.Background(), &proxycfg.LeafRequest{}, "x", make(chan proxycfg.UpdateEvent)); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("Notify without service = %v", err)
	}
	sub := dstest.Watch(t, "web", notify(src, "web"))
	if err := sub.NextErr(t); err.Error() != "CA unavailable" {
		t.Fatalf("error event = %v", err)
	}
	var fn func(*structs.IssuedCert, error)
	select {
	case fn = <-w.fns:
	case <-time.After(dstest.Timeout):
		t.Fatal("no watch")
	}
	// The manager calls back from its own goroutines, which the
	// subscriber's channel may hold up.
	var wg sync.WaitGroup
	defer wg.Wait()
	call := func(c *structs.IssuedCert, err error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(c, err)
		}()
	}
	call(nil, errors.New("CA unavailable"))
	sub.None(t, 50*time.Millisecond)
	wg.Wait()
	c := &structs.IssuedCert{Service: "web", CertPEM: "CERT"}
	c.ModifyIndex = 7
	call(c, nil)
	if got := sub.Next(t).(*structs.IssuedCert); got.ModifyIndex != 7 {
		t.Fatalf("certificate after the failure: %+v", got)
	}
}
