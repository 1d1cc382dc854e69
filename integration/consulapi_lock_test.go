package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// lockResult is the outcome of api.Lock.Lock run in the background.
type lockResult struct {
	lost <-chan struct{}
	err  error
	at   time.Time
}

// lockAsync runs l.Lock in a goroutine. The test's cleanup aborts a pending
// attempt, waits for the goroutine and releases the lock if it was taken,
// which also stops the lock's session renewal.
func lockAsync(t *testing.T, l *api.Lock) <-chan lockResult {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	out := make(chan lockResult, 1)
	go func() {
		defer close(done)
		ch, err := l.Lock(stop)
		out <- lockResult{lost: ch, err: err, at: time.Now()}
	}()
	t.Cleanup(func() {
		close(stop)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("api.Lock did not return after its stop channel closed")
		}
		if err := l.Unlock(); err != nil && !errors.Is(err, api.ErrLockNotHeld) {
			t.Logf("unlock in cleanup: %v", err)
		}
	})
	return out
}

// lockNow acquires l or fails the test within 15 s.
func lockNow(t *testing.T, l *api.Lock) <-chan struct{} {
	t.Helper()
	select {
	case r := <-lockAsync(t, l):
		if r.err != nil || r.lost == nil {
			t.Fatalf("Lock = %v, %v; want the lock", r.lost, r.err)
		}
		return r.lost
	case <-time.After(15 * time.Second):
		t.Fatal("an uncontended lock was not acquired within 15s")
	}
	return nil
}

// lockHolder returns the key's session and LockIndex.
func lockHolder(t *testing.T, c *api.Client, key string) (string, uint64) {
	t.Helper()
	p, _, err := c.KV().Get(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		t.Fatalf("lock key %s does not exist", key)
	}
	if p.Flags != api.LockFlagValue {
		t.Errorf("lock key %s has flags %#x, want api.LockFlagValue", key, p.Flags)
	}
	return p.Session, p.LockIndex
}

// apiLockSessionDestroyed: holder A (on the first agent) has the lock;
// holder B (on the last agent) waits. Destroying A's session closes A's
// leadership channel and hands the lock to B, no sooner than A's
// lock-delay after the destroy.
func apiLockSessionDestroyed(t *testing.T, a, b *api.Client) {
	const key = "apilock/destroyed"
	const lockDelay = 3 * time.Second
	opts := func() *api.LockOptions {
		return &api.LockOptions{Key: key, SessionTTL: "15s", LockDelay: lockDelay, LockWaitTime: 2 * time.Second}
	}
	lockA, err := a.LockOpts(opts())
	if err != nil {
		t.Fatal(err)
	}
	lostA := lockNow(t, lockA)
	sessA, lockIndex := lockHolder(t, a, key)
	if sessA == "" || lockIndex != 1 {
		t.Fatalf("after A's Lock: session %q, LockIndex %d; want a session and 1", sessA, lockIndex)
	}
	info, _, err := a.Session().Info(sessA, nil)
	if err != nil || info == nil {
		t.Fatalf("Session().Info(%s) = %+v, %v", sessA, info, err)
	}
	if info.LockDelay != lockDelay || info.TTL != "15s" || info.Behavior != api.SessionBehaviorRelease {
		t.Errorf("session %s: LockDelay %s, TTL %q, Behavior %q; want %s, 15s, release", sessA, info.LockDelay, info.TTL, info.Behavior, lockDelay)
	}

	lockB, err := b.LockOpts(opts())
	if err != nil {
		t.Fatal(err)
	}
	resB := lockAsync(t, lockB)
	select {
	case r := <-resB:
		t.Fatalf("B got the lock while A held it: %+v", r)
	case <-time.After(time.Second):
	}

	destroyedAt := time.Now()
	if _, err := a.Session().Destroy(sessA, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lostA:
	case <-time.After(10 * time.Second):
		t.Fatal("A's leadership channel stayed open after its session was destroyed")
	}
	select {
	case r := <-resB:
		if r.err != nil || r.lost == nil {
			t.Fatalf("B's Lock = %v, %v", r.lost, r.err)
		}
		waited := r.at.Sub(destroyedAt)
		if waited < lockDelay {
			t.Errorf("B acquired %s after the destroy, inside A's %s lock-delay", waited, lockDelay)
		}
		t.Logf("B acquired %s after A's session was destroyed (lock-delay %s)", waited.Round(time.Millisecond), lockDelay)
	case <-time.After(lockDelay + 20*time.Second):
		t.Fatal("B never acquired the lock after A's session was destroyed")
	}
	sessB, lockIndex := lockHolder(t, b, key)
	if sessB == "" || sessB == sessA || lockIndex != 2 {
		t.Errorf("after B's Lock: session %q (A had %q), LockIndex %d; want B's session and 2", sessB, sessA, lockIndex)
	}
	if info, _, err := a.Session().Info(sessA, nil); err != nil || info != nil {
		t.Errorf("destroyed session still has info: %+v, %v", info, err)
	}
	if err := lockB.Unlock(); err != nil {
		t.Fatalf("B's Unlock: %v", err)
	}
	if s, _ := lockHolder(t, a, key); s != "" {
		t.Errorf("after Unlock the key is still held by %q", s)
	}
}

// apiLockSessionTTL: holder A uses a session with a 10 s TTL that nobody
// renews. The servers invalidate it after the TTL (Consul allows up to
// twice the TTL), A's leadership channel closes, and waiting holder B
// acquires the lock, after A's lock-delay.
func apiLockSessionTTL(t *testing.T, a, b *api.Client) {
	const key = "apilock/ttl"
	const ttl = 10 * time.Second
	const lockDelay = time.Second
	createdAt := time.Now()
	sessA, _, err := a.Session().Create(&api.SessionEntry{
		Name: "ttl-holder", TTL: ttl.String(), LockDelay: lockDelay, Behavior: api.SessionBehaviorRelease,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A passes its own session, so api.Lock does not renew it.
	lockA, err := a.LockOpts(&api.LockOptions{Key: key, Session: sessA, LockWaitTime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lostA := lockNow(t, lockA)
	if s, _ := lockHolder(t, a, key); s != sessA {
		t.Fatalf("key held by %q, want A's session %q", s, sessA)
	}

	lockB, err := b.LockOpts(&api.LockOptions{Key: key, SessionTTL: "15s", LockDelay: lockDelay, LockWaitTime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	resB := lockAsync(t, lockB)

	var lostAt time.Time
	select {
	case <-lostA:
		lostAt = time.Now()
	case r := <-resB:
		t.Fatalf("B acquired the lock while A's session was alive: %+v", r)
	case <-time.After(2*ttl + 10*time.Second):
		t.Fatalf("A's unrenewed %s session was not invalidated within %s", ttl, 2*ttl+10*time.Second)
	}
	if d := lostAt.Sub(createdAt); d < ttl {
		t.Errorf("A lost the lock %s after creating its session, before the %s TTL", d, ttl)
	}
	t.Logf("A's session expired %s after creation", lostAt.Sub(createdAt).Round(time.Millisecond))

	select {
	case r := <-resB:
		if r.err != nil || r.lost == nil {
			t.Fatalf("B's Lock = %v, %v", r.lost, r.err)
		}
		if d := r.at.Sub(createdAt); d < ttl+lockDelay {
			t.Errorf("B acquired %s after A's session was created, before TTL + lock-delay (%s)", d, ttl+lockDelay)
		}
	case <-time.After(lockDelay + 20*time.Second):
		t.Fatal("B never acquired the lock after A's session expired")
	}
	if s, idx := lockHolder(t, b, key); s == "" || s == sessA || idx != 2 {
		t.Errorf("after expiry: key held by %q with LockIndex %d; want B's session and 2", s, idx)
	}
	if info, _, err := a.Session().Info(sessA, nil); err != nil || info != nil {
		t.Errorf("expired session still has info: %+v, %v", info, err)
	}
}

// apiLockDelay pins the lock-delay rules with plain sessions and
// ?acquire: an explicit release lets another session acquire at once, but
// after the holder's session is invalidated (destroyed) nobody can acquire
// the key until the delay has passed.
func apiLockDelay(t *testing.T, a, b *api.Client) {
	const key = "apilock/delay"
	const delay = 3 * time.Second
	newSession := func(c *api.Client, name string) string {
		t.Helper()
		id, _, err := c.Session().Create(&api.SessionEntry{Name: name, TTL: "30s", LockDelay: delay}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.Session().Destroy(id, nil) })
		return id
	}
	acquire := func(c *api.Client, s string) bool {
		t.Helper()
		ok, _, err := c.KV().Acquire(&api.KVPair{Key: key, Value: []byte(s), Session: s}, nil)
		if err != nil {
			t.Fatalf("acquire with %s: %v", s, err)
		}
		return ok
	}
	release := func(c *api.Client, s string) {
		t.Helper()
		ok, _, err := c.KV().Release(&api.KVPair{Key: key, Session: s}, nil)
		if err != nil || !ok {
			t.Fatalf("release by %s = %v, %v", s, ok, err)
		}
	}
	s1 := newSession(a, "delay-1")
	s2 := newSession(b, "delay-2")

	if !acquire(a, s1) {
		t.Fatal("s1 could not acquire a free key")
	}
	if acquire(b, s2) {
		t.Fatal("s2 acquired a key held by s1")
	}
	release(a, s1)
	if !acquire(b, s2) {
		t.Fatal("s2 could not acquire right after an explicit release (no lock-delay applies to a release)")
	}
	release(b, s2)
	if !acquire(a, s1) {
		t.Fatal("s1 could not re-acquire")
	}

	destroyedAt := time.Now()
	if _, err := a.Session().Destroy(s1, nil); err != nil {
		t.Fatal(err)
	}
	ok := acquire(b, s2)
	answeredIn := time.Since(destroyedAt)
	if answeredIn < delay && ok {
		t.Fatalf("s2 acquired %s after s1's session was destroyed, inside the %s lock-delay", answeredIn, delay)
	}
	for !ok {
		if time.Since(destroyedAt) > delay+10*time.Second {
			t.Fatalf("s2 still cannot acquire %s after the destroy (lock-delay %s)", time.Since(destroyedAt), delay)
		}
		time.Sleep(200 * time.Millisecond)
		ok = acquire(b, s2)
	}
	acquiredIn := time.Since(destroyedAt)
	if acquiredIn < delay {
		t.Errorf("s2 acquired %s after the destroy, inside the %s lock-delay", acquiredIn, delay)
	}
	t.Logf("s2 acquired %s after s1's session was destroyed (lock-delay %s)", acquiredIn.Round(time.Millisecond), delay)
	if s, idx := keyHolder(t, b, key); s != s2 || idx != 4 {
		t.Errorf("key held by %q with LockIndex %d; want %q and 4 (one per acquisition)", s, idx, s2)
	}
}

// keyHolder returns the session and LockIndex of a key taken with a plain
// ?acquire (no api.Lock flags).
func keyHolder(t *testing.T, c *api.Client, key string) (string, uint64) {
	t.Helper()
	p, _, err := c.KV().Get(key, nil)
	if err != nil || p == nil {
		t.Fatalf("Get %s = %+v, %v", key, p, err)
	}
	return p.Session, p.LockIndex
}
