package agent

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// startTestProxycfg starts the proxy configuration of a started agent;
// the caller stops it before the agent.
//
// Until Start calls startProxycfg itself, the test starts it; afterwards
// this should return a.proxies instead.
func startTestProxycfg(t *testing.T, a *Agent) *proxyConfig {
	t.Helper()
	if a.proxies == nil {
		t.Fatal("agent started without proxycfg")
	}
	return a.proxies
}

func nextSnap(t *testing.T, ch <-chan *proxycfg.ConfigSnapshot, what string, ok func(*proxycfg.ConfigSnapshot) bool) *proxycfg.ConfigSnapshot {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case s, open := <-ch:
			if !open {
				t.Fatalf("%s: snapshot channel closed", what)
			}
			if ok(s) {
				return s
			}
		case <-deadline:
			t.Fatalf("%s: no matching snapshot", what)
		}
	}
}

func noSnap(t *testing.T, ch <-chan *proxycfg.ConfigSnapshot, what string, d time.Duration) {
	t.Helper()
	select {
	case s := <-ch:
		t.Fatalf("%s: unexpected snapshot version %d", what, s.Version)
	case <-time.After(d):
	}
}

func upstreamEndpoints(s *proxycfg.ConfigSnapshot, up string) int {
	u := s.ConnectProxy.Upstreams.Get(proxycfg.UpstreamID(up))
	if u == nil {
		return -1
	}
	n := 0
	for _, eps := range u.Endpoints {
		n += len(eps)
	}
	return n
}

// TestDevAgentProxySnapshots: on a -dev agent (a server that is also its
// own client), web's sidecar with the upstream api gets api's endpoints
// through the agent's config source, and each of: a new api instance, an
// intention change, a splitter change and a CA rotation produces a new
// snapshot for web's sidecar, while a proxy they do not concern (other,
// with the upstream zzz) gets none (except for the rotation, which
// concerns every proxy).
func TestDevAgentProxySnapshots(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, _, stopAgent := devAgent(t)
	defer stopAgent()
	p := startTestProxycfg(t, a)
	ctx := context.Background()
	entry := func(e structs.ConfigEntry) {
		t.Helper()
		var ok bool
		if err := structs.MethodConfigEntryApply.Call(ctx, a, &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert, Entry: e}, &ok); err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("entry %s/%s not applied", e.GetKind(), e.GetName())
		}
	}
	register := func(id, name string, port int, upstream string) {
		t.Helper()
		sc := &structs.ServiceDefinition{Proxy: &structs.ConnectProxyConfig{}}
		if upstream != "" {
			sc.Proxy.Upstreams = []structs.Upstream{{DestinationName: upstream, LocalBindPort: 9191}}
		}
		def := &structs.ServiceDefinition{ID: id, Name: name, Port: port, Connect: &structs.ServiceDefinitionConnect{SidecarService: sc}}
		if err := a.local.RegisterService(def, "", false); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
	}
	// http, so that a splitter may apply to api.
	entry(&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "api", Protocol: "http"})
	entry(&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "api-v2", Protocol: "http"})
	register("web", "web", 8080, "api")
	register("api", "api", 8081, "")
	register("other", "other", 8082, "zzz")

	src := p.Source()
	ctxWeb, cancelWeb := context.WithCancel(context.Background())
	web, err := src.Watch(ctxWeb, proxycfg.ProxyID{ServiceID: "web-sidecar-proxy"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancelWeb()
	ctxOther, cancelOther := context.WithCancel(context.Background())
	other, err := src.Watch(ctxOther, proxycfg.ProxyID{ServiceID: "other-sidecar-proxy"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancelOther()

	snap := nextSnap(t, web, "api endpoints", func(s *proxycfg.ConfigSnapshot) bool { return upstreamEndpoints(s, "api") == 1 })
	if snap.Leaf() == nil || snap.Roots == nil || snap.ConnectProxy.Upstreams.Get("api").Chain.Protocol != "http" {
		t.Fatalf("snapshot: leaf %v roots %v", snap.Leaf(), snap.Roots)
	}
	nextSnap(t, other, "other's first snapshot", func(s *proxycfg.ConfigSnapshot) bool { return true })
	// Let the start-up settle (anti-entropy, late first results), then
	// drain both: from here on every snapshot is a reaction.
	settle := func() {
		for {
			select {
			case <-web:
			case <-other:
			case <-time.After(500 * time.Millisecond):
				return
			}
		}
	}
	settle()

	const quiet = 700 * time.Millisecond
	steps := []struct {
		name       string
		change     func()
		ok         func(*proxycfg.ConfigSnapshot) bool
		otherToo   bool
		settleMore bool
	}{
		{
			name:   "new api instance",
			change: func() { register("api-2", "api", 8083, "") },
			ok:     func(s *proxycfg.ConfigSnapshot) bool { return upstreamEndpoints(s, "api") == 2 },
		},
		{
			name: "intention change",
			change: func() {
				entry(&structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: "web",
					Sources: []*structs.SourceIntention{{Name: "intruder", Action: structs.IntentionActionDeny}}})
			},
			ok: func(s *proxycfg.ConfigSnapshot) bool {
				return len(s.ConnectProxy.Intentions) == 1 && s.ConnectProxy.Intentions[0].SourceName == "intruder"
			},
		},
		{
			name: "splitter change",
			change: func() {
				entry(&structs.ServiceSplitterConfigEntry{Kind: structs.ServiceSplitter, Name: "api",
					Splits: []structs.ServiceSplit{{Weight: 90}, {Weight: 10, Service: "api-v2"}}})
			},
			ok: func(s *proxycfg.ConfigSnapshot) bool {
				c := s.ConnectProxy.Upstreams.Get("api").Chain
				return c != nil && len(c.Targets) == 2
			},
		},
		{
			name: "CA rotation",
			change: func() {
				cfg := &structs.CAConfiguration{Provider: structs.ConsulCAProvider, Config: map[string]any{
					"LeafCertTTL": "72h", "PrivateKeyType": "ec", "PrivateKeyBits": 384}}
				if err := structs.MethodConnectCAConfigurationSet.Call(ctx, a, &structs.CARequest{Config: cfg}, &struct{}{}); err != nil {
					t.Fatal(err)
				}
			},
			ok: func(s *proxycfg.ConfigSnapshot) bool {
				return s.Roots.ActiveRootID != snap.Roots.ActiveRootID && len(s.Roots.Roots) == 2
			},
			otherToo: true,
		},
	}
	for _, st := range steps {
		st.change()
		snap2 := nextSnap(t, web, st.name, st.ok)
		if snap2.Version <= snap.Version {
			t.Fatalf("%s: version %d after %d", st.name, snap2.Version, snap.Version)
		}
		if st.otherToo {
			nextSnap(t, other, st.name+" (other)", st.ok)
		} else {
			noSnap(t, other, st.name+" (other)", quiet)
		}
		if st.name != "CA rotation" {
			snap = snap2
		}
	}
}
