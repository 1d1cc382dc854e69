package proxycfg

import (
	"fmt"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// upstreamIDs checks a connect-proxy snapshot has exactly these upstreams.
func upstreamIDs(want ...UpstreamID) func(*ConfigSnapshot) error {
	return func(s *ConfigSnapshot) error {
		var got []UpstreamID
		for _, u := range s.ConnectProxy.Upstreams {
			got = append(got, u.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("upstreams %v, want %v", got, want)
		}
		return nil
	}
}

// A Connect-native gRPC application declares no upstreams: the xDS server
// sets them from the listeners it asks for, without restarting the proxy's
// other watches, and they outlive a re-registration.
func TestSetUpstreamsFollowsRunTimeNames(t *testing.T) {
	h := newHarness(t, nil)
	h.f.autoBasics()
	svc := testSidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191})
	id, ch := h.register(svc)
	waitSnap(t, ch, upstreamIDs("db"))
	leaf := h.f.leaf.waitSub(t, "leaf web", nil)

	steps := []struct {
		name  string
		names []string
		want  []UpstreamID
	}{
		{"a name is added", []string{"api"}, []UpstreamID{"api", "db"}},
		{"duplicates and a declared name collapse", []string{"db", "api", "api", "cache", ""}, []UpstreamID{"api", "cache", "db"}},
		{"a name is dropped", []string{"cache"}, []UpstreamID{"cache", "db"}},
		{"none left", nil, []UpstreamID{"db"}},
		{"back again", []string{"api"}, []UpstreamID{"api", "db"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			h.m.SetUpstreams(id, st.names)
			waitSnap(t, ch, upstreamIDs(st.want...))
			// Their central config is asked for with the declared ones.
			h.f.serviceConfig.waitSub(t, "config web", func(r *structs.ServiceConfigRequest) bool {
				return fmt.Sprint(r.Upstreams) == fmt.Sprint(st.want)
			})
		})
	}
	h.f.chain.waitSub(t, "chain api", chainFor("api"))
	h.f.chain.waitNone(t, "chain cache", chainFor("cache"))
	if leaf.cancelled() {
		t.Fatal("a run-time upstream restarted the proxy's leaf watch")
	}

	// A changed registration restarts the state; the names carry over.
	svc2 := svc.Clone()
	svc2.Port = 21001
	if err := h.m.Register(id, svc2, SourceLocal, "token-1", true); err != nil {
		t.Fatal(err)
	}
	waitSnap(t, ch, func(s *ConfigSnapshot) error {
		if s.Service.Port != 21001 {
			return fmt.Errorf("port %d", s.Service.Port)
		}
		return upstreamIDs("api", "db")(s)
	})
}

// Names set before the proxy registers are its upstreams from its first
// snapshot.
func TestSetUpstreamsBeforeRegister(t *testing.T) {
	h := newHarness(t, nil)
	h.f.autoBasics()
	svc := testSidecar("web")
	h.m.SetUpstreams(idFor(svc), []string{"api"})
	_, ch := h.register(svc)
	waitSnap(t, ch, upstreamIDs("api"))
}
