package xds

import (
	"bytes"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

func TestSubscriptionRules(t *testing.T) {
	type step struct {
		sub, unsub []string
	}
	tests := []struct {
		name         string
		typeURL      string
		delta        bool
		steps        []step // SotW: sub is resource_names
		wantWildcard bool
		wantNames    []string
	}{
		{"sotw clusters without names: wildcard", cdsURL, false, []step{{}}, true, nil},
		{"sotw listeners by name (gRPC)", ldsURL, false, []step{{sub: []string{"l1"}}}, false, []string{"l1"}},
		{"sotw endpoints without names: nothing", edsURL, false, []step{{sub: []string{"a"}}, {}}, false, nil},
		{"sotw routes without names: nothing", rdsURL, false, []step{{}}, false, nil},
		{"sotw explicit wildcard", edsURL, false, []step{{sub: []string{"*", "a"}}}, true, []string{"a"}},
		{"sotw unknown type without names: wildcard", "type.googleapis.com/x.Y", false, []step{{}}, true, nil},
		{"delta first request without names: legacy wildcard", cdsURL, true, []step{{}}, true, nil},
		{"delta endpoints first request without names: nothing", edsURL, true, []step{{}}, false, nil},
		{"delta later request without names keeps subscription", edsURL, true, []step{{sub: []string{"a"}}, {}}, false, []string{"a"}},
		{"delta names are not a wildcard", cdsURL, true, []step{{sub: []string{"c1"}}}, false, []string{"c1"}},
		{"delta subscribe and unsubscribe", edsURL, true, []step{{sub: []string{"a", "b"}}, {unsub: []string{"a"}}}, false, []string{"b"}},
		{"delta wildcard on and off", cdsURL, true, []step{{}, {sub: []string{"*", "x"}}, {unsub: []string{"*"}}}, false, []string{"x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTypeState(tc.typeURL, nil)
			for i, s := range tc.steps {
				if tc.delta {
					ts.applyDelta(i == 0, s.sub, s.unsub, nil)
				} else {
					ts.setSotWNames(s.sub)
				}
			}
			names := slices.Sorted(maps.Keys(ts.names))
			if ts.wildcard != tc.wantWildcard || !slices.Equal(names, tc.wantNames) {
				t.Errorf("wildcard=%v names=%v, want %v %v", ts.wildcard, names, tc.wantWildcard, tc.wantNames)
			}
		})
	}
}

// planned summarises plan's output as "TYPE:name,-removed".
func planned(rs []response) []string {
	var out []string
	for _, m := range rs {
		r := m.message().(*discoveryv3.DeltaDiscoveryResponse)
		s := typeOf(r.GetTypeUrl())
		if r.GetTypeUrl() == resource.SecretType {
			s = "SDS"
		}
		out = append(out, s+":"+joinNames(deltaNames(r)))
	}
	return out
}

func joinNames(n []string) string {
	s := ""
	for i, x := range n {
		if i > 0 {
			s += ","
		}
		s += x
	}
	return s
}

// ackAll acknowledges every response of a plan.
func ackAll(s *session, rs []response) {
	for _, m := range rs {
		r := m.message().(*discoveryv3.DeltaDiscoveryResponse)
		s.handle(request{typeURL: r.GetTypeUrl(), nonce: r.GetNonce()})
	}
}

func TestPlanOrder(t *testing.T) {
	secret := &tlsv3.Secret{Name: "leaf"}
	tests := []struct {
		name string
		// subscribe runs before the first resources arrive.
		subscribe []request
		res       Resources
		want      [][]string // one plan per round; every response is ACKed between rounds
	}{
		{
			name: "secrets before clusters, listeners after endpoints",
			subscribe: []request{
				{typeURL: ldsURL}, {typeURL: resource.SecretType, subscribe: []string{"leaf"}},
				{typeURL: cdsURL}, {typeURL: edsURL, subscribe: []string{"a"}},
			},
			res:  set(secret, cluster("a", 0), cla("a", 1), listener("l", 1)),
			want: [][]string{{"SDS:leaf", "CDS:a", "EDS:a"}, {"LDS:l"}, nil},
		},
		{
			name:      "other types are not held back",
			subscribe: []request{{typeURL: cdsURL}, {typeURL: "type.googleapis.com/x.Y"}},
			res:       set(cluster("a", 0), cla("a", 1)),
			want:      [][]string{{"CDS:a", `"type.googleapis.com/x.Y":`}, nil},
		},
		{
			name:      "cluster without endpoints does not hold listeners",
			subscribe: []request{{typeURL: cdsURL}, {typeURL: ldsURL}},
			res:       set(cluster("a", 0), listener("l", 1)),
			want:      [][]string{{"CDS:a"}, {"LDS:l"}, nil},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(true, slog.New(slog.DiscardHandler), time.Now)
			for _, r := range tc.subscribe {
				s.handle(r)
				if got := s.plan(); len(got) != 0 {
					t.Fatalf("plan before resources: %v", planned(got))
				}
			}
			s.setResources(prepare(tc.res, nil, nil, slog.New(slog.DiscardHandler)))
			for i, want := range tc.want {
				got := s.plan()
				if !slices.Equal(planned(got), want) {
					t.Fatalf("round %d: plan %v, want %v", i, planned(got), want)
				}
				ackAll(s, got)
			}
		})
	}
}

func TestVersionsFollowContent(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	p1 := prepare(set(cluster("a", 0), cluster("b", 0)), nil, nil, log)
	p2 := prepare(set(cluster("a", 0), cluster("b", 1)), p1, nil, log)
	if p1.get(cdsURL).get("a").version != p2.get(cdsURL).get("a").version {
		t.Error("equal content got different versions")
	}
	if p1.get(cdsURL).get("b").version == p2.get(cdsURL).get("b").version {
		t.Error("different content got equal versions")
	}
	if p1.get(cdsURL).get("a").any != p2.get(cdsURL).get("a").any {
		t.Error("unchanged resource was encoded again")
	}
	if names := entryNames(p2.get(cdsURL).sorted); !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("sorted entries %v, want [a b]", names)
	}
	bad := prepare(Resources{cdsURL: {"x": listener("x", 1), "y": nil}}, nil, nil, log)
	if len(bad.get(cdsURL).sorted) != 0 {
		t.Errorf("mistyped or nil resources kept: %v", entryNames(bad.get(cdsURL).sorted))
	}
}

// TestUnchangedMapIsSkipped: a type handed over as the very same map is
// the previous typeSet, without looking inside; an equal but distinct map
// is prepared again (reusing the encodings).
func TestUnchangedMapIsSkipped(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	res := set(cluster("a", 0), listener("l", 1))
	p1 := prepare(res, nil, nil, log)
	next := Resources{cdsURL: res[cdsURL], ldsURL: maps.Clone(res[ldsURL])}
	p2 := prepare(next, p1, nil, log)
	if p2.get(cdsURL) != p1.get(cdsURL) {
		t.Error("the same cluster map was prepared again")
	}
	if p2.get(ldsURL) == p1.get(ldsURL) {
		t.Error("a different listener map was taken as the same")
	}
	if p2.get(ldsURL).get("l").any != p1.get(ldsURL).get("l").any {
		t.Error("an unchanged listener was encoded again")
	}
}

func entryNames(es []*entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.name
	}
	return out
}

// TestSharedEndpointEncodings: streams given the very same endpoint set
// share one encoding through the server's cache; another message of the
// same name gets its own, and other types are never shared.
func TestSharedEndpointEncodings(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	var sh shared
	a, c := cla("a", 1), cluster("c", 0)
	s1 := prepare(set(a, c), nil, &sh, log)
	s2 := prepare(set(a, c), nil, &sh, log)
	if s1.get(edsURL).get("a") != s2.get(edsURL).get("a") {
		t.Error("two streams encoded the same endpoint set twice")
	}
	if s1.get(cdsURL).get("c") == s2.get(cdsURL).get("c") {
		t.Error("a cluster entry was shared between streams")
	}
	s3 := prepare(set(cla("a", 1)), s2, &sh, log)
	e2, e3 := s2.get(edsURL).get("a"), s3.get(edsURL).get("a")
	if e3 == e2 || e3.version != e2.version {
		t.Errorf("another message of equal content: entry reused %v, versions %s and %s", e3 == e2, e2.version, e3.version)
	}
	if s4 := prepare(set(cla("a", 2)), s3, &sh, log); s4.get(edsURL).get("a").version == e3.version {
		t.Error("different content got the same version")
	}
}

// TestSharedEndpointTypes: streams handed the very same map of endpoint
// sets (proxies with the same upstreams) share one typeSet; a new map
// under the same names gets a new one, and a stream still handed the
// previous map gets that map's resources, not the latest's.
func TestSharedEndpointTypes(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	var sh shared
	first := set(cla("a", 1), cla("b", 2))
	s1 := prepare(first, nil, &sh, log)
	s2 := prepare(first, nil, &sh, log)
	if s1.get(edsURL) != s2.get(edsURL) {
		t.Error("two streams handed the same map prepared it twice")
	}
	next := set(cla("a", 3), cla("b", 2))
	s3 := prepare(next, s1, &sh, log)
	if s3.get(edsURL) == s1.get(edsURL) {
		t.Fatal("a new map got the previous typeSet")
	}
	// A stream that is a change behind, then one that catches up.
	late := prepare(first, nil, &sh, log)
	caughtUp := prepare(next, late, &sh, log)
	for _, tc := range []struct {
		name string
		got  prepared
		want Resources
	}{
		{"behind", late, first},
		{"caught up", caughtUp, next},
	} {
		ts := tc.got.get(edsURL)
		if names := entryNames(ts.sorted); !slices.Equal(names, []string{"a", "b"}) {
			t.Fatalf("%s: entries %v", tc.name, names)
		}
		for _, e := range ts.sorted {
			if e.msg != tc.want[edsURL][e.name] {
				t.Errorf("%s: %s is another map's message", tc.name, e.name)
			}
		}
	}
}

// TestPlannedResponsesKeepTheirResources: a planned response is sent
// after the stream's lock is released, so planning the next one (which
// may reuse the storage of a type's view) must not change it.
func TestPlannedResponsesKeepTheirResources(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	s := newSession(false, log, time.Now)
	s.handle(request{typeURL: edsURL, names: []string{"a", "b"}})
	p1 := prepare(set(cla("a", 1), cla("b", 2)), nil, nil, log)
	s.setResources(p1)
	planned := s.plan()
	if len(planned) != 1 {
		t.Fatalf("%d responses, want 1", len(planned))
	}
	first := planned[0] // as outbox.push copies it
	want, err := proto.Marshal(first.message())
	if err != nil {
		t.Fatal(err)
	}
	// The client ACKs and changes its subscription; new endpoints arrive.
	s.handle(request{typeURL: edsURL, nonce: first.nonce, names: []string{"b", "c"}})
	s.setResources(prepare(set(cla("a", 3), cla("b", 4), cla("c", 5)), p1, nil, log))
	if got := s.plan(); len(got) != 1 {
		t.Fatalf("second plan: %d responses, want 1", len(got))
	}
	got, err := proto.Marshal(first.message())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the first response changed when the second was planned: now %v", first.message())
	}
}
