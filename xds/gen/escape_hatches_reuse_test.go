package gen

import (
	"maps"
	"reflect"
	"testing"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// TestEscapeHatchesGeneratorReuse: the escape hatches' inputs are the
// registration's values a part is keyed on (the *NodeService of the
// public listener and local_app, the *structs.Upstream and central
// *UpstreamConfig of an upstream), so a changed JSON rebuilds its part
// and leaves the others, and an unchanged snapshot rebuilds nothing;
// the injections follow their own inputs (intentions, the leaf).
func TestEscapeHatchesGeneratorReuse(t *testing.T) {
	base := snapshot(t, escapeHatchWorld(true)(), allEscapeHatches(), 1)

	// withProxyConfig and withDBConfig replace the registration's values
	// as proxycfg does: new values for what changed, shared for the rest.
	withProxyConfig := func(s *proxycfg.ConfigSnapshot, key, raw string) *proxycfg.ConfigSnapshot {
		ns := *s
		ns.Service = s.Service.Clone()
		ns.Service.Proxy.Config[key] = raw
		return &ns
	}
	withUpstream := func(s *proxycfg.ConfigSnapshot, edit func(u *proxycfg.UpstreamSnapshot)) *proxycfg.ConfigSnapshot {
		ns := *s
		cp := *s.ConnectProxy
		u := *cp.Upstreams.Get("db")
		edit(&u)
		cp.Upstreams = cp.Upstreams.With(&u)
		ns.ConnectProxy = &cp
		return &ns
	}
	withDBConfig := func(s *proxycfg.ConfigSnapshot, key, raw string) *proxycfg.ConfigSnapshot {
		return withUpstream(s, func(u *proxycfg.UpstreamSnapshot) {
			def := *u.Upstream
			def.Config = maps.Clone(def.Config)
			def.Config[key] = raw
			u.Upstream = &def
		})
	}
	withConnectProxy := func(s *proxycfg.ConfigSnapshot, edit func(cp *proxycfg.ConnectProxySnapshot)) *proxycfg.ConfigSnapshot {
		ns := *s
		cp := *s.ConnectProxy
		edit(&cp)
		ns.ConnectProxy = &cp
		return &ns
	}

	spec := publicListenerSpec(httpChain(nil))
	spec["per_connection_buffer_limit_bytes"] = 65536
	newPublic := withProxyConfig(base, cfgPublicListenerJSON, mustJSON(spec))
	dbSpec := dbClusterSpec(dbSNI)
	dbSpec["connect_timeout"] = "3s"
	newDBCluster := withDBConfig(newPublic, cfgClusterJSON, mustJSON(dbSpec))
	newEndpoints := withUpstream(newDBCluster, func(u *proxycfg.UpstreamSnapshot) {
		u.Endpoints = map[string]structs.CheckServiceNodes{"db.default.default.dc1": sidecars("db", "dc1", inst{addr: "10.0.1.9"})}
	})
	newIntentions := withConnectProxy(newEndpoints, func(cp *proxycfg.ConnectProxySnapshot) {
		cp.Intentions = structs.Intentions{intention("*", "web", structs.IntentionActionAllow)}
	})
	newLeaf := withConnectProxy(newIntentions, func(cp *proxycfg.ConnectProxySnapshot) {
		l := *cp.Leaf
		l.SerialNumber, l.CertPEM = "02", pem("CERTIFICATE", "LEAF-web-renewed")
		cp.Leaf = &l
	})

	const (
		public = "public_listener:10.0.0.1:21000"
		dbL    = "db_custom:127.0.0.1:9191"
	)
	type named struct{ typeURL, name string }
	var (
		publicL  = named{ListenerType, public}
		localApp = named{ClusterType, localAppCluster}
		dbC      = named{ClusterType, dbSNI}
		dbLis    = named{ListenerType, dbL}
		dbEDS    = named{EndpointType, dbSNI}
	)
	steps := []struct {
		name    string
		snap    *proxycfg.ConfigSnapshot
		same    []named // the previous result's very messages
		changed []named // rebuilt, with other content
		// sameTypes are the previous result's very maps.
		sameTypes []string
	}{
		{name: "first", snap: base},
		{name: "unchanged", snap: base, same: []named{publicL, localApp, dbC, dbLis, dbEDS},
			sameTypes: []string{ListenerType, ClusterType, RouteType, EndpointType}},
		{name: "public listener JSON", snap: newPublic, same: []named{dbC, dbLis, dbEDS}, changed: []named{publicL},
			sameTypes: []string{RouteType, EndpointType}},
		{name: "db cluster JSON", snap: newDBCluster, same: []named{publicL, localApp}, changed: []named{dbC}},
		{name: "db endpoints", snap: newEndpoints, same: []named{publicL, localApp, dbC, dbLis}, changed: []named{dbEDS},
			sameTypes: []string{ListenerType, ClusterType, RouteType}},
		{name: "intentions", snap: newIntentions, same: []named{dbC, dbLis, dbEDS}, changed: []named{publicL}},
		// The upstream's part is keyed on the leaf: its listener is rebuilt
		// too, equal.
		{name: "leaf", snap: newLeaf, same: []named{dbEDS}, changed: []named{publicL, dbC}},
		{name: "back to the start", snap: base, changed: []named{publicL, dbC, dbEDS}},
	}
	var g Generator
	var prev Resources
	for _, st := range steps {
		got := generateChecked(t, &g, st.name, st.snap)
		for _, n := range st.same {
			if got[n.typeURL][n.name] == nil || got[n.typeURL][n.name] != prev[n.typeURL][n.name] {
				t.Errorf("%s: %s %q was rebuilt", st.name, shortType(n.typeURL), n.name)
			}
		}
		for _, n := range st.changed {
			if equalResources(Resources{n.typeURL: {n.name: got[n.typeURL][n.name]}}, Resources{n.typeURL: {n.name: prev[n.typeURL][n.name]}}) == nil {
				t.Errorf("%s: %s %q did not change", st.name, shortType(n.typeURL), n.name)
			}
		}
		for _, typeURL := range st.sameTypes {
			if reflect.ValueOf(got[typeURL]).UnsafePointer() != reflect.ValueOf(prev[typeURL]).UnsafePointer() {
				t.Errorf("%s: %s map was rebuilt", st.name, shortType(typeURL))
			}
		}
		if st.name == "intentions" {
			// The injected RBAC filter follows the new intentions.
			c := &checkCtx{snap: st.snap, res: got, b: newBuilder(st.snap)}
			hcm := hcmOf(t, c.listener(t, public).FilterChains[0])
			if !reflect.DeepEqual(hcm.HttpFilters[0].GetTypedConfig().GetValue(), c.httpRBAC().GetTypedConfig().GetValue()) {
				t.Errorf("%s: the RBAC filter is not the new intentions'", st.name)
			}
		}
		prev = got
	}
}
