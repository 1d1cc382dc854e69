package leafcert

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newManager starts a manager on f with fast test timings; it is stopped
// at the end of the test.
func newManager(t testing.TB, f *fakeCA, tweak func(*Config)) *Manager {
	t.Helper()
	cfg := Config{RPC: f, Datacenter: "dc1", RootChangeJitter: 50 * time.Millisecond, RateLimitRetry: 50 * time.Millisecond,
		RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, FirstFetchTimeout: 5 * time.Second}
	if tweak != nil {
		tweak(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Stop)
	return m
}

func get(t testing.TB, m *Manager, service string, minIndex uint64, wait time.Duration) *structs.IssuedCert {
	t.Helper()
	c, err := m.Get(context.Background(), service, "", minIndex, wait)
	if err != nil {
		t.Fatalf("Get(%s, %d): %v", service, minIndex, err)
	}
	return c
}

func TestGetIssuesAndCaches(t *testing.T) {
	f := newFakeCA(t, true)
	m := newManager(t, f, nil)
	first := get(t, m, "web", 0, 0)
	checkLeaf(t, first, f.currentRoots().Roots, "web")
	if first.ModifyIndex == 0 || first.SerialNumber == "" {
		t.Fatalf("leaf %+v", first)
	}
	// Repeated requests get the same certificate (Consul's agent cache).
	for range 3 {
		if again := get(t, m, "web", 0, 0); again.SerialNumber != first.SerialNumber || again.PrivateKeyPEM != first.PrivateKeyPEM {
			t.Fatalf("second Get = %s, want cached %s", again.SerialNumber, first.SerialNumber)
		}
	}
	// Another service gets its own.
	db := get(t, m, "db", 0, 0)
	checkLeaf(t, db, f.currentRoots().Roots, "db")
	if db.SerialNumber == first.SerialNumber || f.signCount() != 2 {
		t.Fatalf("db serial %s, %d signs", db.SerialNumber, f.signCount())
	}
	// Returned values are copies.
	first.CertPEM = "mutated"
	if get(t, m, "web", 0, 0).CertPEM == "mutated" {
		t.Fatal("Get returned the cached value itself")
	}
	if _, err := m.Get(context.Background(), "", "", 0, 0); !errors.Is(err, ErrMissingService) {
		t.Fatalf("empty service: %v", err)
	}
}

func TestBlockingGet(t *testing.T) {
	f := newFakeCA(t, true)
	m := newManager(t, f, nil)
	first := get(t, m, "web", 0, 0)
	// Nothing changes: the wait elapses and the same leaf comes back.
	start := time.Now()
	same := get(t, m, "web", first.ModifyIndex, 200*time.Millisecond)
	if same.SerialNumber != first.SerialNumber || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("timed-out blocking Get = %s after %s", same.SerialNumber, time.Since(start))
	}
	// A rotation wakes it with a leaf of the new root.
	type result struct {
		c   *structs.IssuedCert
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := m.Get(context.Background(), "web", "", first.ModifyIndex, 10*time.Second)
		done <- result{c, err}
	}()
	time.Sleep(100 * time.Millisecond)
	f.rotate("ec", 384)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		roots := f.currentRoots()
		leaf := checkLeaf(t, r.c, roots.Roots, "web")
		if connect.HexString(leaf.AuthorityKeyId) != roots.Roots.Active().SigningKeyID || r.c.ModifyIndex <= first.ModifyIndex {
			t.Fatalf("leaf after rotation is not from the new root: %+v", r.c)
		}
		// And it chains to the old root alone through its cross-signed
		// intermediate.
		checkLeaf(t, r.c, roots.Roots[:1], "web")
	case <-time.After(5 * time.Second):
		t.Fatal("blocking Get did not return after the rotation")
	}
	// A context that ends stops the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	cur := get(t, m, "web", 0, 0)
	if _, err := m.Get(ctx, "web", "", cur.ModifyIndex, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled Get: %v", err)
	}
}

func TestRenewsBeforeExpiry(t *testing.T) {
	f := newFakeCA(t, true)
	f.set(func(f *fakeCA) { f.leafTTL = 2 * time.Second })
	m := newManager(t, f, nil)
	first := get(t, m, "web", 0, 0)
	// Renewal comes between 60 % and 90 % of the lifetime (1.2-1.8 s),
	// and at least a second after issue.
	start := time.Now()
	next := get(t, m, "web", first.ModifyIndex, 5*time.Second)
	elapsed := time.Since(start)
	if next.SerialNumber == first.SerialNumber || elapsed < time.Second || elapsed > 2*time.Second {
		t.Fatalf("renewed %s -> %s after %s", first.SerialNumber, next.SerialNumber, elapsed)
	}
	if !time.Now().Before(first.ValidBefore) {
		t.Fatal("renewed only after expiry")
	}
}

func TestRenewAtWindow(t *testing.T) {
	f := newFakeCA(t, true)
	m := newManager(t, f, nil)
	now := time.Now()
	e := &entry{cert: &structs.IssuedCert{ValidAfter: now, ValidBefore: now.Add(100 * time.Hour)},
		signer: f.currentRoots().Roots.Active().SigningKeyID}
	for range 100 {
		m.mu.Lock()
		at := m.renewAtLocked(e, now)
		m.mu.Unlock()
		if at.Before(now.Add(60*time.Hour)) || at.After(now.Add(90*time.Hour)) {
			t.Fatalf("renewal at %s, outside 60%%-90%% of the lifetime", at.Sub(now))
		}
	}
}

func TestFirstGetWaitsForTheCA(t *testing.T) {
	f := newFakeCA(t, false)
	m := newManager(t, f, nil)
	done := make(chan *structs.IssuedCert, 1)
	go func() {
		c, err := m.Get(context.Background(), "web", "", 0, 0)
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	time.Sleep(200 * time.Millisecond)
	f.rotate("ec", 256) // the CA comes up
	select {
	case c := <-done:
		if c != nil {
			checkLeaf(t, c, f.currentRoots().Roots, "web")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get did not get a leaf once the CA was up")
	}
	// Without a CA at all the wait is bounded.
	m2 := newManager(t, newFakeCA(t, false), func(c *Config) { c.FirstFetchTimeout = 100 * time.Millisecond })
	if _, err := m2.Get(context.Background(), "web", "", 0, 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Get without a CA: %v", err)
	}
}

func TestRateLimitedFirstGet(t *testing.T) {
	f := newFakeCA(t, true)
	f.set(func(f *fakeCA) { f.rateLimit = 2 })
	m := newManager(t, f, nil)
	// As in Consul, a first request that meets the rate limit fails with it
	// (HTTP 429)...
	if _, err := m.Get(context.Background(), "web", "", 0, 0); !errors.Is(err, structs.ErrRateLimited) {
		t.Fatalf("rate-limited first Get: %v", err)
	}
	// ...while the manager retries in the background within the jitter
	// window, so a later request finds the leaf.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := m.Get(context.Background(), "web", "", 0, 0)
		if err == nil {
			checkLeaf(t, c, f.currentRoots().Roots, "web")
			break
		}
		if !errors.Is(err, structs.ErrRateLimited) || time.Now().After(deadline) {
			t.Fatalf("Get: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if f.signCount() != 3 {
		t.Fatalf("%d sign calls, want 2 refused and 1 signed", f.signCount())
	}
}

func TestFailures(t *testing.T) {
	f := newFakeCA(t, true)
	boom := errors.New("boom")
	f.set(func(f *fakeCA) { f.failWith = boom })
	m := newManager(t, f, nil)
	if _, err := m.Get(context.Background(), "web", "", 0, 0); !errors.Is(err, boom) {
		t.Fatalf("first Get with a failing CA: %v", err)
	}
	// The manager retries by itself; once the CA recovers, Gets succeed.
	f.set(func(f *fakeCA) { f.failWith = nil })
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := m.Get(context.Background(), "web", "", 0, 0)
		if err == nil {
			checkLeaf(t, c, f.currentRoots().Roots, "web")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// With a leaf cached, failures keep serving it.
	c := get(t, m, "web", 0, 0)
	f.set(func(f *fakeCA) { f.rateLimit = 1000 })
	f.rotate("ec", 256)
	time.Sleep(300 * time.Millisecond)
	if again := get(t, m, "web", 0, 0); again.SerialNumber != c.SerialNumber {
		t.Fatal("leaf changed while the CA refused to sign")
	}
}

func TestIdleLeavesAreDropped(t *testing.T) {
	f := newFakeCA(t, true)
	m := newManager(t, f, func(c *Config) { c.IdleTTL = 100 * time.Millisecond })
	get(t, m, "web", 0, 0)
	deadline := time.Now().Add(2 * time.Second)
	for {
		m.mu.Lock()
		n := len(m.entries)
		m.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("idle leaf kept")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Asking again issues a new one.
	get(t, m, "web", 0, 0)
	if f.signCount() != 2 {
		t.Fatalf("%d signs", f.signCount())
	}
}

func TestStopAndConfig(t *testing.T) {
	f := newFakeCA(t, true)
	m := newManager(t, f, nil)
	get(t, m, "web", 0, 0)
	done := make(chan error, 1)
	cur := get(t, m, "web", 0, 0)
	go func() {
		_, err := m.Get(context.Background(), "web", "", cur.ModifyIndex, time.Minute)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	m.Stop()
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("blocked Get after Stop: %v", err)
	}
	if _, err := m.Get(context.Background(), "web", "", 0, 0); !errors.Is(err, ErrStopped) {
		t.Fatalf("Get after Stop: %v", err)
	}
	for _, bad := range []Config{{Datacenter: "dc1"}, {RPC: f}} {
		if _, err := New(bad); err == nil {
			t.Fatalf("config %+v accepted", bad)
		}
	}
}

// TestGetWithMetaSaysHitAndAge: the first request waits for the signing
// (a miss); later ones are answered from what the manager holds (hits,
// aged from the signing); a blocking request woken by a new leaf is a
// miss again, as Consul's agent cache reports them.
func TestGetWithMetaSaysHitAndAge(t *testing.T) {
	f := newFakeCA(t, true)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
	m := newManager(t, f, func(c *Config) { c.Now = clock })
	ctx := context.Background()
	first, meta, err := m.GetWithMeta(ctx, "web", "", 0, 0)
	if err != nil || meta.Hit {
		t.Fatalf("first GetWithMeta: hit=%v err=%v, want a miss", meta.Hit, err)
	}
	advance(42 * time.Second)
	again, meta, err := m.GetWithMeta(ctx, "web", "", 0, 0)
	if err != nil || !meta.Hit || meta.Age != 42*time.Second || again.SerialNumber != first.SerialNumber {
		t.Fatalf("second GetWithMeta: %+v err=%v serial %s, want a hit aged 42s of %s", meta, err, again.SerialNumber, first.SerialNumber)
	}
	if _, meta, err = m.GetWithMeta(ctx, "web", "", first.ModifyIndex-1, time.Second); err != nil || !meta.Hit {
		t.Fatalf("GetWithMeta below the held index: %+v err=%v, want a hit", meta, err)
	}
	done := make(chan CacheMeta, 1)
	go func() {
		_, meta, err := m.GetWithMeta(ctx, "web", "", first.ModifyIndex, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- meta
	}()
	time.Sleep(100 * time.Millisecond)
	f.rotate("ec", 384)
	if meta := <-done; meta.Hit {
		t.Fatalf("a blocking GetWithMeta woken by a new leaf reported %+v, want a miss", meta)
	}
}

// TestLeafPerToken: the same service asked with two tokens is two leaves,
// each signed with its own token, so that a token the servers refuse gets
// their denial rather than the other token's certificate; a request
// without a token is signed with Config.Token's, read at signing.
func TestLeafPerToken(t *testing.T) {
	f := newFakeCA(t, true)
	f.refuse = map[string]bool{"weak": true}
	def := "default-token"
	m := newManager(t, f, func(c *Config) { c.Token = func() string { return def } })
	ctx := context.Background()
	a, err := m.Get(ctx, "web", "tok-a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Get(ctx, "web", "tok-b", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.SerialNumber == b.SerialNumber {
		t.Fatalf("two tokens share leaf %s", a.SerialNumber)
	}
	if again, err := m.Get(ctx, "web", "tok-a", 0, 0); err != nil || again.SerialNumber != a.SerialNumber {
		t.Fatalf("tok-a again: %v %v, want cached %s", again, err, a.SerialNumber)
	}
	if _, err := m.Get(ctx, "web", "weak", 0, 0); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("refused token: %v, want permission denied", err)
	}
	if _, err := m.Get(ctx, "web", "", 0, 0); err != nil {
		t.Fatal(err)
	}
	// The refused leaf is retried in the background, so its token may
	// repeat; every signing carries one of the four tokens.
	f.mu.Lock()
	got := append([]string(nil), f.tokens...)
	f.mu.Unlock()
	seen := map[string]bool{}
	for _, tok := range got {
		seen[tok] = true
	}
	for _, w := range []string{"tok-a", "tok-b", "weak", "default-token"} {
		if !seen[w] {
			t.Fatalf("signed with %q, want %q among them", got, w)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("signed with %q, want only the four tokens", got)
	}
}

// TestLeafOfADeletedTokenIsDropped: once the servers no longer know a
// token, its leaf entry is dropped at the next signing instead of being
// retried until it goes idle, and a request with the token gets the
// servers' answer, not the certificate signed before the deletion.
func TestLeafOfADeletedTokenIsDropped(t *testing.T) {
	f := newFakeCA(t, true)
	m := newManager(t, f, nil)
	entries := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.entries)
	}
	waitDropped := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for entries() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("the leaf entry of an unknown token was kept")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// A token the servers never knew.
	f.set(func(f *fakeCA) { f.unknown = map[string]bool{"gone": true} })
	if _, err := m.Get(context.Background(), "web", "gone", 0, 0); !errors.Is(err, structs.ErrACLNotFound) {
		t.Fatalf("Get with an unknown token = %v, want ErrACLNotFound", err)
	}
	waitDropped()
	signs := f.signCount()
	time.Sleep(300 * time.Millisecond) // three times RetryMax
	if n := f.signCount(); n != signs {
		t.Fatalf("%d more signings for a dropped entry", n-signs)
	}

	// A token deleted after its leaf was signed: the re-issue a root
	// rotation asks for fails, and the entry goes.
	if _, err := m.Get(context.Background(), "web", "old", 0, 0); err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeCA) { f.unknown["old"] = true })
	f.rotate("ec", 256)
	waitDropped()
	if _, err := m.Get(context.Background(), "web", "old", 0, 0); !errors.Is(err, structs.ErrACLNotFound) {
		t.Fatalf("Get with the deleted token = %v, want ErrACLNotFound", err)
	}

	// A watched entry is kept: its proxy holds a certificate that is
	// still valid, and the token may be re-created with the same secret.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan error, 16)
	if err := m.Watch(ctx, "web", "watched", func(_ *structs.IssuedCert, err error) { got <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("first leaf for the watched token: %v", err)
	}
	f.set(func(f *fakeCA) { f.unknown["watched"] = true })
	signs = f.signCount()
	f.rotate("ec", 256)
	deadline := time.Now().Add(5 * time.Second)
	for f.signCount() < signs+2 { // the re-issue and one retry, both refused
		if time.Now().After(deadline) {
			t.Fatal("the watched entry was not re-issued after the rotation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := entries(); n != 1 {
		t.Fatalf("%d entries with a watcher, want 1", n)
	}
}
