package state

import (
	"errors"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// sessionFixture: node n1 with a passing serfHealth, service web1 with a
// passing check, node n2 without checks.
func sessionFixture(t *testing.T) *Store {
	t.Helper()
	s := NewStore()
	registerNode(t, s, 1, "n1")
	registerNode(t, s, 2, "n2")
	registerCheck(t, s, 3, "n1", structs.SerfCheckID, "", structs.HealthPassing)
	registerService(t, s, 4, "n1", "web1", "web")
	registerCheck(t, s, 5, "n1", "web-check", "web1", structs.HealthPassing)
	registerCheck(t, s, 6, "n1", "bad", "", structs.HealthCritical)
	return s
}

func TestSessionCreate(t *testing.T) {
	cases := []struct {
		name     string
		sess     structs.Session
		wantErr  error
		wantText string
	}{
		{"ok", structs.Session{ID: "s", Node: "n1", NodeChecks: []string{"serfHealth"},
			ServiceChecks: []structs.ServiceCheck{{ID: "web-check"}}}, nil, ""},
		{"no checks", structs.Session{ID: "s", Node: "n2"}, nil, ""},
		{"missing ID", structs.Session{Node: "n1"}, ErrMissingSessionID, ""},
		{"missing node", structs.Session{ID: "s", Node: "nope"}, ErrMissingNode, "Missing node registration"},
		{"missing check", structs.Session{ID: "s", Node: "n2", NodeChecks: []string{"serfHealth"}},
			ErrMissingSessionCheck, "Missing check 'serfHealth' registration"},
		{"critical check", structs.Session{ID: "s", Node: "n1", NodeChecks: []string{"bad"}},
			ErrSessionCheckCritical, "Check 'bad' is in critical state"},
		{"missing service check", structs.Session{ID: "s", Node: "n1", ServiceChecks: []structs.ServiceCheck{{ID: "nope"}}},
			ErrMissingSessionCheck, "Missing check 'nope' registration"},
		{"bad behavior", structs.Session{ID: "s", Node: "n1", Behavior: "explode"}, ErrInvalidSessionBehavior, "Invalid session behavior: explode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sessionFixture(t)
			err := s.SessionCreate(10, &tc.sess)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantText != "" && err.Error() != tc.wantText {
				t.Fatalf("text = %q, want %q", err.Error(), tc.wantText)
			}
			_, got, _ := s.SessionGet(nil, "s")
			if (got != nil) != (err == nil) {
				t.Fatalf("session stored = %v after err %v", got != nil, err)
			}
			if got != nil && (got.Behavior != structs.SessionKeysRelease || got.CreateIndex != 10 || got.ModifyIndex != 10) {
				t.Fatalf("session = %+v", got)
			}
		})
	}
	s := sessionFixture(t)
	must(t, s.SessionCreate(10, &structs.Session{ID: "s", Node: "n1"}))
	if err := s.SessionCreate(11, &structs.Session{ID: "s", Node: "n2"}); !errors.Is(err, ErrSessionExists) {
		t.Fatalf("duplicate ID err = %v", err)
	}
}

func TestSessionReads(t *testing.T) {
	s := sessionFixture(t)
	must(t, s.SessionCreate(10, &structs.Session{ID: "b", Node: "n1"}))
	must(t, s.SessionCreate(11, &structs.Session{ID: "a", Node: "n2"}))
	must(t, s.SessionCreate(12, &structs.Session{ID: "c", Node: "n1"}))

	idx, all, err := s.SessionList(nil)
	must(t, err)
	if idx != 12 || len(all) != 3 || all[0].ID != "a" || all[2].ID != "c" {
		t.Fatalf("list idx %d = %+v", idx, all)
	}
	_, mine, err := s.NodeSessions(nil, "N1")
	must(t, err)
	if len(mine) != 2 || mine[0].ID != "b" || mine[1].ID != "c" {
		t.Fatalf("node sessions = %+v", mine)
	}
	_, none, _ := s.NodeSessions(nil, "nobody")
	if none == nil || len(none) != 0 {
		t.Fatalf("sessions of unknown node = %#v", none)
	}
	_, missing, _ := s.SessionGet(nil, "zzz")
	if missing != nil {
		t.Fatal("unknown session found")
	}
}

func TestSessionDestroyReleasesOrDeletes(t *testing.T) {
	cases := []struct {
		behavior   structs.SessionBehavior
		wantKey    bool
		wantStones int
	}{
		{structs.SessionKeysRelease, true, 0},
		{structs.SessionKeysDelete, false, 1},
	}
	for _, tc := range cases {
		t.Run(string(tc.behavior), func(t *testing.T) {
			s := sessionFixture(t)
			must(t, s.SessionCreate(10, &structs.Session{ID: "s", Node: "n1", Behavior: tc.behavior, LockDelay: time.Minute}))
			mustOK(t)(s.KVSLock(11, &structs.DirEntry{Key: "lock", Value: []byte("v"), Session: "s"}))
			must(t, s.KVSSet(12, kv("free", "v")))

			must(t, s.SessionDestroy(13, "s"))
			must(t, s.SessionDestroy(14, "s")) // missing: fine

			_, e, _ := s.KVSGet(nil, "lock")
			if (e != nil) != tc.wantKey {
				t.Fatalf("key present = %v, want %v", e != nil, tc.wantKey)
			}
			if e != nil && (e.Session != "" || e.LockIndex != 1 || e.ModifyIndex != 13 || string(e.Value) != "v") {
				t.Fatalf("released key = %+v", e)
			}
			if n := len(tombstones(t, s)); n != tc.wantStones {
				t.Fatalf("tombstones = %d, want %d", n, tc.wantStones)
			}
			if d := s.KVSLockDelay("lock"); time.Until(d) < 50*time.Second {
				t.Fatalf("lock delay = %v, want about a minute from now", d)
			}
			if d := s.KVSLockDelay("free"); !d.IsZero() {
				t.Fatalf("lock delay on a key the session did not hold: %v", d)
			}
			if _, sess, _ := s.SessionGet(nil, "s"); sess != nil {
				t.Fatal("session survived destroy")
			}
		})
	}
}

func TestSessionInvalidation(t *testing.T) {
	cases := []struct {
		name string
		sess structs.Session
		act  func(t *testing.T, s *Store)
	}{
		{"node check turns critical", structs.Session{NodeChecks: []string{"serfHealth"}}, func(t *testing.T, s *Store) {
			registerCheck(t, s, 20, "n1", "serfHealth", "", structs.HealthCritical)
		}},
		{"service check turns critical via registration", structs.Session{ServiceChecks: []structs.ServiceCheck{{ID: "web-check"}}}, func(t *testing.T, s *Store) {
			must(t, s.EnsureRegistration(20, &structs.RegisterRequest{Node: "n1", SkipNodeUpdate: true,
				Check: &structs.HealthCheck{Node: "n1", CheckID: "web-check", ServiceID: "web1", Status: structs.HealthCritical}}))
		}},
		{"check deleted", structs.Session{NodeChecks: []string{"serfHealth"}}, func(t *testing.T, s *Store) {
			must(t, s.DeleteCheck(20, "n1", "serfHealth"))
		}},
		{"service deleted", structs.Session{ServiceChecks: []structs.ServiceCheck{{ID: "web-check"}}}, func(t *testing.T, s *Store) {
			must(t, s.DeleteService(20, "n1", "web1"))
		}},
		{"node deleted", structs.Session{}, func(t *testing.T, s *Store) {
			must(t, s.DeleteNode(20, "n1"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sessionFixture(t)
			sess := tc.sess
			sess.ID, sess.Node = "s", "n1"
			must(t, s.SessionCreate(10, &sess))
			// A session that does not depend on the check survives.
			must(t, s.SessionCreate(11, &structs.Session{ID: "other", Node: "n2"}))
			mustOK(t)(s.KVSLock(12, &structs.DirEntry{Key: "lock", Session: "s"}))

			tc.act(t, s)

			if _, got, _ := s.SessionGet(nil, "s"); got != nil {
				t.Fatal("session not invalidated")
			}
			if _, got, _ := s.SessionGet(nil, "other"); got == nil {
				t.Fatal("unrelated session invalidated")
			}
			if _, e, _ := s.KVSGet(nil, "lock"); e.Session != "" || e.ModifyIndex != 20 {
				t.Fatalf("lock not released: %+v", e)
			}
		})
	}
	// A passing update of the check leaves the session alone.
	s := sessionFixture(t)
	must(t, s.SessionCreate(10, &structs.Session{ID: "s", Node: "n1", NodeChecks: []string{"serfHealth"}}))
	must(t, s.EnsureCheck(11, &structs.HealthCheck{Node: "n1", CheckID: "serfHealth", Status: structs.HealthWarning}))
	if _, got, _ := s.SessionGet(nil, "s"); got == nil {
		t.Fatal("warning invalidated the session")
	}
}
