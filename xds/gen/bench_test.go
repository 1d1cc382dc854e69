package gen

import (
	"testing"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// BenchmarkGenerateConnectProxy measures one generation for a sidecar
// with 5 upstreams (3 TCP with 3 instances each; an HTTP one behind a
// router, a splitter and two subsets; an HTTP one with failover) and L7
// intentions: the work the xDS server does for every snapshot.
func BenchmarkGenerateConnectProxy(b *testing.B) {
	snap := benchSnapshot(b)
	res, err := Generate(snap)
	if err != nil {
		b.Fatal(err)
	}
	if err := Validate(res); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, set := range res {
		n += len(set)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Generate(snap); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "resources/op")
}

// BenchmarkGeneratorEndpointChange measures the common case for a
// Generator: the endpoints of one upstream of the same sidecar changed
// since the previous snapshot.
func BenchmarkGeneratorEndpointChange(b *testing.B) {
	snap := benchSnapshot(b)
	other := withDBEndpoints(snap)
	var g Generator
	snaps := []*proxycfg.ConfigSnapshot{snap, other}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := g.Generate(snaps[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// withDBEndpoints is snap with one more instance of db, derived the way
// proxycfg derives snapshots (changed values replaced, the rest shared).
func withDBEndpoints(snap *proxycfg.ConfigSnapshot) *proxycfg.ConfigSnapshot {
	other := *snap
	cp := *snap.ConnectProxy
	db := *cp.Upstreams.Get("db")
	db.Endpoints = map[string]structs.CheckServiceNodes{
		"db.default.default.dc1": sidecars("db", "dc1", inst{addr: "10.1.0.1"}, inst{addr: "10.1.0.2"}, inst{addr: "10.1.0.4"}),
	}
	cp.Upstreams = cp.Upstreams.With(&db)
	other.ConnectProxy = &cp
	return &other
}

// benchSnapshot is a sidecar with 5 upstreams, built by the state
// machines.
func benchSnapshot(b testing.TB) *proxycfg.ConfigSnapshot {
	w := routedWorld()
	w.pemSize = 800 // an ECDSA P-256 leaf with its chain, roughly
	w.defaultDeny = true
	w.intentions["web"] = structs.Intentions{
		intention("ops", "web", structs.IntentionActionAllow),
		intention("api", "web", "", &structs.IntentionPermission{Action: structs.IntentionActionAllow, HTTP: &structs.IntentionHTTPPermission{PathPrefix: "/api/"}}),
	}
	ups := []structs.Upstream{
		{DestinationName: "api", LocalBindPort: 9000},
		{DestinationName: "admin", LocalBindPort: 9001},
	}
	for i, name := range []string{"db", "cache", "payments"} {
		w.connect[name+"/dc1"] = sidecars(name, "dc1", inst{addr: "10.1.0.1"}, inst{addr: "10.1.0.2"}, inst{addr: "10.1.0.3", status: structs.HealthWarning})
		ups = append(ups, structs.Upstream{DestinationName: name, LocalBindPort: 9100 + i})
	}
	return snapshot(b, w, sidecar("web", ups...), len(ups))
}

// BenchmarkGeneratorEndpointChangeShared is BenchmarkGeneratorEndpointChange
// as the agent runs it: many proxies' Generators share an EndpointCache,
// and every one of them regenerates after each endpoint change (an op is
// one proxy's generation). The endpoint set is built by the first proxy
// and shared by the others, so what is measured is mostly the per-proxy
// cost of a change.
func BenchmarkGeneratorEndpointChangeShared(b *testing.B) {
	const proxies = 100
	snap := benchSnapshot(b)
	snaps := []*proxycfg.ConfigSnapshot{snap, withDBEndpoints(snap)}
	cache := &EndpointCache{}
	gens := make([]Generator, proxies)
	for i := range gens {
		gens[i].Endpoints = cache
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := gens[i%proxies].Generate(snaps[i/proxies%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkGeneratorSameSnapshot measures a Generator given the snapshot
// it generated last, as an idle stream's periodic token re-check offers
// it (agent/xds.go, recheckIdle): every part is reused and no resource
// is rebuilt.
func BenchmarkGeneratorSameSnapshot(b *testing.B) {
	snap := benchSnapshot(b)
	var g Generator
	var last Resources
	b.ReportAllocs()
	for b.Loop() {
		res, err := g.GenerateInto(last, snap)
		if err != nil {
			b.Fatal(err)
		}
		last = res
	}
}
