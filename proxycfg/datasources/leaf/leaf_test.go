package leaf

import (
	"context"
	"errors"
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
	src, err := New(Config{Getter: lm, Wait: 2 * time.Second})
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
	// Nothing new while the certificate stands (the Get loop wakes every
	// Wait and finds the same certificate).
	a.None(t, 2500*time.Millisecond)

	dstest.RotateCA(t, srv, 384)
	next := a.Next(t).(*structs.IssuedCert)
	if next.SerialNumber == ca.SerialNumber || next.ModifyIndex <= ca.ModifyIndex {
		t.Fatalf("after rotation: serial %s (was %s), index %d (was %d)", next.SerialNumber, ca.SerialNumber, next.ModifyIndex, ca.ModifyIndex)
	}
	if b.Next(t) != next {
		t.Fatal("watchers of one service must share the new certificate")
	}
}

// failingGetter fails every Get, counting them.
type failingGetter struct{ calls chan struct{} }

func (f failingGetter) Get(ctx context.Context, _, _ string, _ uint64, _ time.Duration) (*structs.IssuedCert, error) {
	select {
	case f.calls <- struct{}{}:
	default:
	}
	return nil, errors.New("CA unavailable")
}

// TestLeafErrorsAreEventsAndRetried: a failing Get is an error event (sent
// once, not on every retry) and is retried; Notify refuses a request
// without a service.
func TestLeafErrorsAreEventsAndRetried(t *testing.T) {
	g := failingGetter{calls: make(chan struct{}, 100)}
	src, err := New(Config{Getter: g, ErrorPause: time.Millisecond})
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
	for range 5 {
		select {
		case <-g.calls:
		case <-time.After(dstest.Timeout):
			t.Fatal("the failed Get is not retried")
		}
	}
	sub.None(t, 50*time.Millisecond)
}
