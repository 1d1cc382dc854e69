package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// aclCase is one (method, path) of the endpoint table and what each caller
// gets from it, as Consul's "ACL Required" column says.
type aclCase struct {
	name string
	// server sends the request to a follower instead of the client agent.
	server bool
	// method, path and body of the request; "{tok}" becomes the caller's
	// name and "{seed}" what seed returned, so that each caller writes
	// its own object.
	method, path, body string
	// allow are the callers that pass; open means that Consul asks nothing
	// of the token, so every caller passes, unknown tokens too.
	allow []aclTok
	open  bool
	// perm is what a refusal names, in Consul's words (`'key:read' on
	// "x"`); refused callers get 403 with deniedText.
	perm string
	// ok is the status of an allowed call (200 when 0); status overrides it
	// per caller (a recursive KV read that finds nothing is 404).
	ok     int
	status map[aclTok]int
	// list turns an allowed answer into the names it lists, compared with
	// items (absent means an empty list).
	list  func([]byte) ([]string, error)
	items map[aclTok][]string
	// filtered are the callers whose answer carries
	// X-Consul-Results-Filtered-By-ACLs: true.
	filtered []aclTok
	// seed prepares the caller's object with the management token.
	seed func(ctx context.Context, k aclTok) (string, error)
	// unchanged checks, with the management token, that a refused write
	// changed nothing; undo reverts an allowed one.
	unchanged func(ctx context.Context, k aclTok, seed string) error
	undo      func(ctx context.Context, k aclTok, seed string) error
	// expect, when set, replaces the generic checks of the answer.
	expect func(k aclTok, r aclResp) error
}

func (tc aclCase) allows(k aclTok) bool {
	return tc.open || slices.Contains(tc.allow, k)
}

// Consul's 403 text for a token that does not resolve, and what the
// agent's own endpoints answer instead: the agent/authz wrapping of the
// servers' error reaches the body (Consul answers "ACL not found" there
// too).
const (
	aclNotFound      = "ACL not found"
	aclAgentNotFound = "authz: ask the servers: ACL not found"
)

// agentDecided reports whether the client agent decides path itself (its
// own endpoints and events), asking the servers about the token.
func agentDecided(path string) bool {
	return strings.HasPrefix(path, "/v1/agent/") || strings.HasPrefix(path, "/v1/event/")
}

func expandCase(s string, k aclTok, seed string) string {
	return strings.NewReplacer("{tok}", k.String(), "{seed}", seed).Replace(s)
}

// TestACLEndpointMatrix: every endpoint family × every kind of caller
// against 3 servers and a client agent with default deny. The requests go
// to the client agent, whose RPCs carry the caller's token to the servers,
// and a few to a follower. The other ACL scenarios share the cluster and
// run while the expiring token's minute passes; its column runs last.
func TestACLEndpointMatrix(t *testing.T) {
	f := startACLFixture(t)
	start := time.Now()
	f.seedMatrix(t)
	cases := f.matrixCases()
	t.Run("table", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				for _, k := range []aclTok{tokNone, tokAnon, tokRead, tokWrite, tokMgmt, tokDeleted} {
					f.runCase(t, tc, k)
				}
			})
		}
	})
	t.Logf("table of %d endpoints × 6 callers took %s", len(cases), time.Since(start).Round(time.Millisecond))

	// A client agent with token persistence, for agent-tokens and cli;
	// started after the table, whose lists it would change.
	f.second = f.c.AddClient(t, configFile(t, "persist.json", map[string]any{"acl": map[string]any{"enable_token_persistence": true}})...)

	t.Run("blocking-query-token-deleted", func(t *testing.T) { f.blockingTokenDeleted(t) })
	t.Run("go-client-acl", func(t *testing.T) { f.goClientACL(t) })
	t.Run("agent-tokens", func(t *testing.T) { f.agentTokens(t) })
	t.Run("cli", func(t *testing.T) { f.aclCLI(t) })

	t.Run("expired", func(t *testing.T) {
		// The servers' clocks are this machine's; a second covers the
		// rounding of ExpirationTime.
		if d := time.Until(f.expires.Add(time.Second)); d > 0 {
			t.Logf("waiting %s for the token to expire", d.Round(time.Millisecond))
			time.Sleep(d)
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { f.runCase(t, tc, tokExpired) })
		}
	})
}

// runCase sends tc's request as caller k and checks the answer and, for a
// refused write, that nothing changed.
func (f *aclFixture) runCase(t *testing.T, tc aclCase, k aclTok) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	seed := ""
	if tc.seed != nil {
		var err error
		if seed, err = tc.seed(ctx, k); err != nil {
			t.Fatalf("%s: seed: %v", k, err)
		}
	}
	addr := f.client.HTTPAddr()
	if tc.server {
		addr = f.follower.HTTPAddr()
	}
	path := expandCase(tc.path, k, seed)
	r, err := f.do(ctx, k, tc.method, addr, path, expandCase(tc.body, k, seed))
	if err != nil {
		t.Fatalf("%s: %v", k, err)
	}
	if tc.expect != nil {
		err = tc.expect(k, r)
	} else {
		err = f.checkAnswer(tc, k, seed, r)
	}
	if err != nil {
		t.Errorf("%s %s as %s: %v", tc.method, path, k, err)
	}
	allowed := tc.allows(k)
	if !allowed && tc.unchanged != nil {
		if err := tc.unchanged(ctx, k, seed); err != nil {
			t.Errorf("%s %s refused to %s changed what is stored: %v", tc.method, path, k, err)
		}
	}
	if allowed && tc.undo != nil {
		if err := tc.undo(ctx, k, seed); err != nil {
			t.Fatalf("%s: undo: %v", k, err)
		}
	}
}

// checkAnswer is the generic check: the status, the exact list and the
// filtered header of an allowed call; Consul's 403 text for a refused one.
func (f *aclFixture) checkAnswer(tc aclCase, k aclTok, seed string, r aclResp) error {
	if !tc.allows(k) {
		want := f.deniedText(k, expandCase(tc.perm, k, seed))
		got := strings.TrimSpace(string(r.body))
		if r.status == 403 && (got == want || (want == aclNotFound && agentDecided(tc.path) && got == aclAgentNotFound)) {
			return nil
		}
		return fmt.Errorf("got %s, want 403 %s", r, want)
	}
	want := tc.ok
	if s, ok := tc.status[k]; ok {
		want = s
	}
	if want == 0 {
		want = 200
	}
	if r.status != want {
		return fmt.Errorf("got %s, want status %d", r, want)
	}
	if got, wantF := r.header.Get("X-Consul-Results-Filtered-By-ACLs") == "true", slices.Contains(tc.filtered, k); got != wantF {
		return fmt.Errorf("X-Consul-Results-Filtered-By-ACLs is %v, want %v (%s)", got, wantF, r)
	}
	if tc.list == nil || r.status != 200 {
		return nil
	}
	got, err := tc.list(r.body)
	if err != nil {
		return err
	}
	if wantItems := tc.items[k]; !slices.Equal(got, wantItems) && (len(got) != 0 || len(wantItems) != 0) {
		return fmt.Errorf("lists %q, want %q", got, wantItems)
	}
	return nil
}
