package gen

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// TestGeneratorRecyclesItsMemo runs a Generator through snapshots whose
// upstreams come and go (shifting every part's position among the
// previous generation's, many at once, which makes the lookup index
// them) and through a failed generation. Every result must equal
// Generate's; every upstream whose inputs did not change must get the
// very messages of the last successful result; and no result may change
// after it was returned, although the Generator recycles its
// bookkeeping.
func TestGeneratorRecyclesItsMemo(t *testing.T) {
	const n = 24
	w := newWorld()
	var ups []structs.Upstream
	for i := range n {
		name := fmt.Sprintf("svc%02d", i)
		w.connect[name+"/dc1"] = sidecars(name, "dc1", inst{addr: fmt.Sprintf("10.1.%d.1", i)})
		ups = append(ups, structs.Upstream{DestinationName: name, LocalBindPort: 9000 + i})
	}
	full := snapshot(t, w, sidecar("web", ups...), n)

	// derive copies s with its upstreams and applies edit to them.
	derive := func(s *proxycfg.ConfigSnapshot, edit func(ups map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot)) *proxycfg.ConfigSnapshot {
		return deriveSnapshot(s, func(_ *proxycfg.ConfigSnapshot, cp *proxycfg.ConnectProxySnapshot) {
			ups := map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot{}
			for _, u := range cp.Upstreams {
				ups[u.ID] = u
			}
			edit(ups)
			cp.Upstreams = proxycfg.NewUpstreams(slices.Collect(maps.Values(ups))...)
		})
	}
	newEndpoints := func(id proxycfg.UpstreamID, addr string) func(map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot) {
		return func(ups map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot) {
			u := *ups[id]
			u.Endpoints = map[string]structs.CheckServiceNodes{}
			for tid := range ups[id].Endpoints {
				u.Endpoints[tid] = sidecars(string(id), "dc1", inst{addr: addr})
			}
			ups[id] = &u
		}
	}
	evens := derive(full, func(ups map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot) {
		for i := 1; i < n; i += 2 {
			delete(ups, proxycfg.UpstreamID(fmt.Sprintf("svc%02d", i)))
		}
	})
	// odds are as many upstreams as evens, other ones.
	odds := derive(full, func(ups map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot) {
		for i := 0; i < n; i += 2 {
			delete(ups, proxycfg.UpstreamID(fmt.Sprintf("svc%02d", i)))
		}
	})
	evensChanged := derive(evens, newEndpoints("svc04", "10.9.0.4"))
	all := derive(full, func(map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot) {})
	shifted := derive(all, func(ups map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot) {
		delete(ups, "svc00")
		delete(ups, "svc01")
		delete(ups, "svc02")
	})
	broken := derive(shifted, func(ups map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot) {
		u := *ups["svc10"]
		def := *u.Upstream
		def.Config = map[string]any{cfgClusterJSON: "{not json"}
		u.Upstream = &def
		ups["svc10"] = &u
	})
	shiftedChanged := derive(shifted, newEndpoints("svc07", "10.9.0.7"))

	var g Generator
	type result struct {
		snap *proxycfg.ConfigSnapshot
		res  Resources
	}
	var done []result
	var last result
	for _, step := range []struct {
		name    string
		snap    *proxycfg.ConfigSnapshot
		fails   bool
		changed proxycfg.UpstreamID // its endpoint set is new
	}{
		{name: "all", snap: full},
		{name: "evens", snap: evens},
		{name: "evens, svc04 changed", snap: evensChanged, changed: "svc04"},
		{name: "all again", snap: all},
		{name: "shifted", snap: shifted},
		{name: "broken", snap: broken, fails: true},
		{name: "shifted, svc07 changed", snap: shiftedChanged, changed: "svc07"},
		{name: "evens again", snap: evens},
		{name: "evens again, twice", snap: evens},
		{name: "odds", snap: odds},
	} {
		if step.fails {
			if _, err := g.Generate(step.snap); err == nil {
				t.Fatalf("%s: no error", step.name)
			}
			continue
		}
		got := generateChecked(t, &g, step.name, step.snap)
		for _, u := range step.snap.ConnectProxy.Upstreams {
			id := u.ID
			if last.snap == nil || last.snap.ConnectProxy.Upstreams.Get(id) == nil {
				continue // new
			}
			cluster := string(id) + ".default.dc1.internal." + testTrustDomain
			if got[ClusterType][cluster] == nil || got[ClusterType][cluster] != last.res[ClusterType][cluster] {
				t.Errorf("%s: cluster %s was rebuilt", step.name, cluster)
			}
			sameEDS := got[EndpointType][cluster] == last.res[EndpointType][cluster]
			if wantSame := id != step.changed && u == last.snap.ConnectProxy.Upstreams.Get(id); sameEDS != wantSame {
				t.Errorf("%s: endpoint set %s: reused %v, want %v", step.name, cluster, sameEDS, wantSame)
			}
		}
		last = result{step.snap, got}
		done = append(done, last)
	}
	for i, r := range done {
		want, err := Generate(r.snap)
		if err != nil {
			t.Fatal(err)
		}
		if err := equalResources(want, r.res); err != nil {
			t.Errorf("result %d changed after it was returned: %v", i, err)
		}
	}
}
