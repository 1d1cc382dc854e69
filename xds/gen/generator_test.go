package gen

import (
	"maps"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// TestGeneratorEqualsGenerate feeds a Generator a sequence of snapshots in
// which one input changes at a time, as proxycfg delivers them (changed
// values replaced, unchanged ones shared). Every result must equal
// Generate's, and the parts whose inputs did not change must be the very
// messages of the previous result.
func TestGeneratorEqualsGenerate(t *testing.T) {
	base := snapshot(t, transparentWorld(false)(), transparentSidecar(), 4)

	derive := deriveSnapshot
	newEndpoints := derive(base, func(_ *proxycfg.ConfigSnapshot, cp *proxycfg.ConnectProxySnapshot) {
		u := *cp.Upstreams.Get("db")
		u.Endpoints = map[string]structs.CheckServiceNodes{"db.default.default.dc1": sidecars("db", "dc1", inst{addr: "10.0.1.1"}, inst{addr: "10.0.1.9"})}
		cp.Upstreams = cp.Upstreams.With(&u)
	})
	newLeaf := derive(newEndpoints, func(_ *proxycfg.ConfigSnapshot, cp *proxycfg.ConnectProxySnapshot) {
		l := *cp.Leaf
		l.SerialNumber, l.CertPEM = "02", pem("CERTIFICATE", "LEAF-web-renewed")
		cp.Leaf = &l
	})
	newIntentions := derive(newLeaf, func(_ *proxycfg.ConfigSnapshot, cp *proxycfg.ConnectProxySnapshot) {
		cp.Intentions = structs.Intentions{intention("api", "web", structs.IntentionActionDeny)}
	})
	upstreamGone := derive(newIntentions, func(_ *proxycfg.ConfigSnapshot, cp *proxycfg.ConnectProxySnapshot) {
		cp.Upstreams = cp.Upstreams.Without("api")
	})
	rotated := derive(upstreamGone, func(s *proxycfg.ConfigSnapshot, _ *proxycfg.ConnectProxySnapshot) {
		r := *s.Roots
		r.Roots = append(structs.CARoots{}, r.Roots[1], &structs.CARoot{ID: "root-3", RootCert: pem("CERTIFICATE", "ROOT-3"), Active: true})
		s.Roots = &r
	})
	meshOnly := derive(rotated, func(s *proxycfg.ConfigSnapshot, _ *proxycfg.ConnectProxySnapshot) {
		s.MeshConfig = &structs.MeshConfigEntry{TransparentProxy: structs.TransparentProxyMeshConfig{MeshDestinationsOnly: true}}
	})

	var g Generator
	steps := []struct {
		name string
		snap *proxycfg.ConfigSnapshot
		// same and changed are clusters that must (not) be the previous
		// result's messages; sameEDS and changedEDS the same for endpoint
		// sets.
		same, changed       []string
		sameEDS, changedEDS []string
		// sameTypes must be the previous result's very maps.
		sameTypes []string
	}{
		{name: "first", snap: base},
		{name: "again", snap: base, same: []string{"local_app", "db.default.dc1.internal." + testTrustDomain},
			// The transparent listener depends on every upstream's
			// endpoints; it is rebuilt each time.
			sameTypes: []string{ClusterType, RouteType, EndpointType}},
		{name: "db endpoints", snap: newEndpoints,
			same:       []string{"local_app", "api.default.dc1.internal." + testTrustDomain, "db.default.dc1.internal." + testTrustDomain},
			sameEDS:    []string{"api.default.dc1.internal." + testTrustDomain},
			changedEDS: []string{"db.default.dc1.internal." + testTrustDomain},
			// The transparent listener claims the instances' addresses.
			sameTypes: []string{ClusterType, RouteType}},
		{name: "leaf renewed", snap: newLeaf, changed: []string{"api.default.dc1.internal." + testTrustDomain}},
		{name: "intentions", snap: newIntentions, same: []string{"api.default.dc1.internal." + testTrustDomain}},
		{name: "upstream removed", snap: upstreamGone, same: []string{"db.default.dc1.internal." + testTrustDomain}},
		{name: "roots rotated", snap: rotated, changed: []string{"local_app", "db.default.dc1.internal." + testTrustDomain}},
		{name: "mesh entry", snap: meshOnly},
		{name: "back to the start", snap: base},
	}
	var prev Resources
	for _, st := range steps {
		got := generateChecked(t, &g, st.name, st.snap)
		for _, name := range st.same {
			if got[ClusterType][name] != prev[ClusterType][name] {
				t.Errorf("%s: cluster %s was rebuilt", st.name, name)
			}
		}
		for _, name := range st.changed {
			if got[ClusterType][name] == prev[ClusterType][name] {
				t.Errorf("%s: cluster %s was reused", st.name, name)
			}
		}
		for _, name := range st.sameEDS {
			if got[EndpointType][name] != prev[EndpointType][name] {
				t.Errorf("%s: endpoints %s were rebuilt", st.name, name)
			}
		}
		for _, name := range st.changedEDS {
			if got[EndpointType][name] == prev[EndpointType][name] {
				t.Errorf("%s: endpoints %s were reused", st.name, name)
			}
		}
		for _, typeURL := range st.sameTypes {
			if reflect.ValueOf(got[typeURL]).UnsafePointer() != reflect.ValueOf(prev[typeURL]).UnsafePointer() {
				t.Errorf("%s: %s map was rebuilt", st.name, typeURL)
			}
		}
		if st.name == "db endpoints" && reflect.ValueOf(got[EndpointType]).UnsafePointer() == reflect.ValueOf(prev[EndpointType]).UnsafePointer() {
			t.Errorf("%s: the endpoint map was reused", st.name)
		}
		prev = got
	}
}

// TestGeneratorSharesUnchangedTypes: after an endpoint change of a plain
// sidecar, listeners, clusters and routes are the previous result's very
// maps (the ADS server then skips them), and endpoints a new one.
func TestGeneratorSharesUnchangedTypes(t *testing.T) {
	snap := benchSnapshot(t)
	var g Generator
	first, err := g.Generate(snap)
	if err != nil {
		t.Fatal(err)
	}
	second, err := g.Generate(withDBEndpoints(snap))
	if err != nil {
		t.Fatal(err)
	}
	same := func(typeURL string) bool {
		return reflect.ValueOf(first[typeURL]).UnsafePointer() == reflect.ValueOf(second[typeURL]).UnsafePointer()
	}
	for _, typeURL := range []string{ListenerType, ClusterType, RouteType} {
		if !same(typeURL) {
			t.Errorf("%s map was rebuilt", typeURL)
		}
	}
	if same(EndpointType) {
		t.Error("the endpoint map was reused")
	}
	want, err := Generate(withDBEndpoints(snap))
	if err != nil {
		t.Fatal(err)
	}
	if err := equalResources(want, second); err != nil {
		t.Fatal(err)
	}
}

// TestGeneratorsShareEndpointSets: two proxies whose snapshots carry the
// same instances (as proxycfg shares a data source's result) get the
// very same endpoint set from a shared EndpointCache, equal to what
// Generate builds; new instances give a new one.
func TestGeneratorsShareEndpointSets(t *testing.T) {
	cache := &EndpointCache{}
	a, b := &Generator{Endpoints: cache}, &Generator{Endpoints: cache}
	// Two proxies: the same upstreams (and instance slices), another
	// service each. Without the admin upstream, whose targets api's
	// router also lists: the test world gives each upstream its own
	// instance slices of a target (proxycfg shares one), so that the
	// two would take turns as the cache's latest.
	snapA := deriveSnapshot(benchSnapshot(t), func(_ *proxycfg.ConfigSnapshot, cp *proxycfg.ConnectProxySnapshot) {
		cp.Upstreams = cp.Upstreams.Without("admin")
	})
	snapB := *snapA
	svc := *snapA.Service
	svc.ID = "other-sidecar-proxy"
	snapB.Service = &svc
	const db = "db.default.dc1.internal." + testTrustDomain
	var prevDB proto.Message
	for _, step := range []struct {
		name string
		a, b *proxycfg.ConfigSnapshot
	}{
		{"first", snapA, &snapB},
		{"db changed", withDBEndpoints(snapA), nil},
	} {
		ra, err := a.Generate(step.a)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Generate(step.a)
		if err != nil {
			t.Fatal(err)
		}
		if err := equalResources(want, ra); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.b == nil {
			// The other proxy follows with the same instances.
			bs := *step.a
			bs.Service = &svc
			step.b = &bs
		}
		rb, err := b.Generate(step.b)
		if err != nil {
			t.Fatal(err)
		}
		if ra[EndpointType][db] == nil || ra[EndpointType][db] != rb[EndpointType][db] {
			t.Errorf("%s: the proxies got different endpoint sets for %s", step.name, db)
		}
		if ra[EndpointType][db] == prevDB {
			t.Errorf("%s: new instances gave the previous endpoint set", step.name)
		}
		if !sameMap(ra[EndpointType], rb[EndpointType]) {
			t.Errorf("%s: the proxies got different maps of the same endpoint sets", step.name)
		}
		prevDB = ra[EndpointType][db]
	}
	if n := cache.c.Len(); n == 0 {
		t.Error("nothing cached")
	}

	// Another proxy on the latest instances, one a change behind, one
	// with an upstream less: each gets its own instances' sets, equal to
	// what Generate builds, and only the first shares the latest map.
	newest := withDBEndpoints(snapA)
	latest, err := a.Generate(newest)
	if err != nil {
		t.Fatal(err)
	}
	fewer := deriveSnapshot(snapA, func(_ *proxycfg.ConfigSnapshot, cp *proxycfg.ConnectProxySnapshot) {
		cp.Upstreams = cp.Upstreams.Without("cache")
	})
	caughtUp := *newest // another service, the same upstreams
	caughtUp.Service = &svc
	var prev Resources
	for _, step := range []struct {
		name  string
		snap  *proxycfg.ConfigSnapshot
		share bool
	}{
		{"caught up", &caughtUp, true},
		{"a change behind", &snapB, false},
		{"an upstream less", fewer, false},
	} {
		got := generateChecked(t, &Generator{Endpoints: cache}, step.name, step.snap)
		if sameMap(got[EndpointType], latest[EndpointType]) != step.share {
			t.Errorf("%s: shares the latest endpoint map: %v, want %v", step.name, !step.share, step.share)
		}
		if prev != nil && sameMap(got[EndpointType], prev[EndpointType]) {
			t.Errorf("%s: got the previous proxy's endpoint map", step.name)
		}
		prev = got
	}
}

// sameMap reports whether a and b are the very same map.
func sameMap(a, b map[string]proto.Message) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// generateChecked runs g on snap and fails the test unless the result
// equals Generate's and validates.
func generateChecked(t *testing.T, g *Generator, step string, snap *proxycfg.ConfigSnapshot) Resources {
	t.Helper()
	got, err := g.Generate(snap)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	want, err := Generate(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := equalResources(want, got); err != nil {
		t.Fatalf("%s: Generator and Generate differ: %v", step, err)
	}
	if err := Validate(got); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	return got
}

// deriveSnapshot copies s and its connect-proxy part and applies edit to
// the copies (which replaces the upstreams it changes, With and Without
// copying the list, as proxycfg does).
func deriveSnapshot(s *proxycfg.ConfigSnapshot, edit func(s *proxycfg.ConfigSnapshot, cp *proxycfg.ConnectProxySnapshot)) *proxycfg.ConfigSnapshot {
	ns := *s
	cp := *s.ConnectProxy
	ns.ConnectProxy = &cp
	edit(&ns, &cp)
	return &ns
}

// TestGenerateIntoReusesOnlyTheOuterMap: a result handed back to
// GenerateInto becomes the next result (the very same outer map), equal
// to what Generate builds, while the type maps it held stay as they were:
// the ADS server keeps those.
func TestGenerateIntoReusesOnlyTheOuterMap(t *testing.T) {
	g := &Generator{Endpoints: &EndpointCache{}}
	snap := benchSnapshot(t)
	first, err := g.GenerateInto(nil, snap)
	if err != nil {
		t.Fatal(err)
	}
	held := maps.Clone(first) // the type maps, as the server holds them
	contents := map[string]map[string]proto.Message{}
	for typeURL, m := range first {
		contents[typeURL] = maps.Clone(m)
	}
	for _, next := range []*proxycfg.ConfigSnapshot{withDBEndpoints(snap), snap} {
		got, err := g.GenerateInto(first, next)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.ValueOf(got).UnsafePointer() != reflect.ValueOf(first).UnsafePointer() {
			t.Error("the outer map handed back was not reused")
		}
		want, err := Generate(next)
		if err != nil {
			t.Fatal(err)
		}
		if err := equalResources(want, got); err != nil {
			t.Fatal(err)
		}
		for typeURL, m := range held {
			if !maps.Equal(m, contents[typeURL]) {
				t.Fatalf("the first result's %s map was modified", typeURL)
			}
		}
	}
}
