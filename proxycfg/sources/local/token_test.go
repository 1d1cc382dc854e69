package local

import (
	"context"
	"sync"
	"testing"
	"time"

	agentlocal "github.com/trellis-mesh/trellis/agent/local"
	"github.com/trellis-mesh/trellis/agent/token"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/proxycfg/internal/mgrtest"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// tokenLeaves is mgrtest's stub leaf manager that also records the token
// each service's leaf was last asked with.
type tokenLeaves struct {
	mgrtest.StubLeaves
	mu   sync.Mutex
	last map[string]string
}

func (l *tokenLeaves) Watch(ctx context.Context, service, token string, fn func(*structs.IssuedCert, error)) error {
	l.mu.Lock()
	l.last[service] = token
	l.mu.Unlock()
	return l.StubLeaves.Watch(ctx, service, token, fn)
}

func (l *tokenLeaves) token(service string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[service]
}

// TestLocalProxyToken: a local proxy's watches run with the token its
// service was registered with; a new registration token restarts them
// with the new one; a proxy registered without a token uses the default
// token, and follows it when it changes.
func TestLocalProxyToken(t *testing.T) {
	store := state.NewStore()
	mgrtest.SeedCA(t, store, 1)
	leaves := &tokenLeaves{last: map[string]string{}}
	m := mgrtest.Manager(t, func() *state.Store { return store }, leaves)
	st, err := agentlocal.NewState(agentlocal.Config{NodeName: "n1", Datacenter: "dc1", AdvertiseAddr: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := token.New(token.Config{Configured: token.Tokens{Default: "default-token"}})
	if err != nil {
		t.Fatal(err)
	}
	// No periodic resync: the token store's change must do it.
	src, err := New(Config{NodeName: "n1", State: st, Manager: m, ResyncInterval: time.Hour, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	src.Start()
	t.Cleanup(src.Stop)
	f := &fixture{state: st, m: m, src: src}

	for _, tc := range []struct {
		service, token, want string
	}{
		{"web", "reg-a", "reg-a"},
		{"web", "reg-b", "reg-b"}, // replaced: the watches restart with it
		{"api", "", "default-token"},
	} {
		def := &structs.ServiceDefinition{Name: tc.service, Port: 8080,
			Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}}}
		if _, err := f.state.RegisterService(def, tc.token, false); err != nil {
			t.Fatal(err)
		}
		dstest.WaitFor(t, tc.service+"'s leaf asked with "+tc.want, func() bool { return leaves.token(tc.service) == tc.want })
	}
	// A new default token: the proxy without a token of its own follows
	// it, the others keep theirs.
	if err := tokens.Set(token.KindDefault, "new-default"); err != nil {
		t.Fatal(err)
	}
	dstest.WaitFor(t, "api's leaf asked with the new default token", func() bool { return leaves.token("api") == "new-default" })
	if got := leaves.token("web"); got != "reg-b" {
		t.Fatalf("web's leaf asked with %q, want its registration token", got)
	}
}
