package gen

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// TestGenerateRefusesIncompleteSnapshots checks the errors for snapshots
// that lack what their kind needs.
func TestGenerateRefusesIncompleteSnapshots(t *testing.T) {
	good := snapshot(t, newWorld(), sidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191}), 1)
	with := func(edit func(s *proxycfg.ConfigSnapshot)) *proxycfg.ConfigSnapshot {
		s := *good
		cp := *good.ConnectProxy
		s.ConnectProxy = &cp
		edit(&s)
		return &s
	}
	brokenChain := func(s *proxycfg.ConfigSnapshot) {
		u := *s.ConnectProxy.Upstreams.Get("db")
		chain := *u.Chain
		chain.StartNode = "resolver:nowhere"
		u.Chain = &chain
		s.ConnectProxy.Upstreams = proxycfg.NewUpstreams(&u)
	}
	cases := []struct {
		name string
		snap *proxycfg.ConfigSnapshot
		want error
	}{
		{"nil", nil, ErrInvalidSnapshot},
		{"no roots", with(func(s *proxycfg.ConfigSnapshot) { s.Roots = nil }), ErrInvalidSnapshot},
		{"no service", with(func(s *proxycfg.ConfigSnapshot) { s.Service = nil }), ErrInvalidSnapshot},
		{"no connect-proxy part", with(func(s *proxycfg.ConfigSnapshot) { s.ConnectProxy = nil }), ErrInvalidSnapshot},
		{"no leaf", with(func(s *proxycfg.ConfigSnapshot) { s.ConnectProxy.Leaf = nil }), ErrInvalidSnapshot},
		{"chain without its start node", with(brokenChain), ErrInvalidSnapshot},
		{"typical service", with(func(s *proxycfg.ConfigSnapshot) { s.Kind = structs.ServiceKindTypical }), ErrUnsupportedKind},
		{"ingress without its part", with(func(s *proxycfg.ConfigSnapshot) { s.Kind = structs.ServiceKindIngressGateway }), ErrInvalidSnapshot},
		{"terminating without its part", with(func(s *proxycfg.ConfigSnapshot) { s.Kind = structs.ServiceKindTerminatingGateway }), ErrInvalidSnapshot},
		{"mesh without its part", with(func(s *proxycfg.ConfigSnapshot) { s.Kind = structs.ServiceKindMeshGateway }), ErrInvalidSnapshot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Generate(tc.snap)
			if !errors.Is(err, tc.want) || res != nil {
				t.Fatalf("Generate = %v, %v; want error %v", res, err, tc.want)
			}
		})
	}
	// The unbroken snapshot generates (the cases above fail for their own
	// reason).
	if _, err := Generate(good); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateIsPureAndDeterministic generates every golden case several
// times: the results are equal, and the snapshot is left as it was.
func TestGenerateIsPureAndDeterministic(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot(t, tc.world(), tc.svc, tc.want)
			before := dump(snap)
			first, err := Generate(snap)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(first); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				again, err := Generate(snap)
				if err != nil {
					t.Fatal(err)
				}
				if err := equalResources(first, again); err != nil {
					t.Fatal(err)
				}
			}
			if after := dump(snap); before != after {
				t.Fatal("Generate modified the snapshot")
			}
		})
	}
}

func equalResources(a, b Resources) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d types vs %d", len(a), len(b))
	}
	for typeURL, set := range a {
		if len(set) != len(b[typeURL]) {
			return fmt.Errorf("%s: %d resources vs %d", typeURL, len(set), len(b[typeURL]))
		}
		for name, m := range set {
			other, ok := b[typeURL][name]
			if !ok || !proto.Equal(m, other) {
				return fmt.Errorf("%s %q differs", shortType(typeURL), name)
			}
			// Equal content must also encode equally: the ADS server
			// versions resources by their deterministic encoding.
			x, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			y, _ := proto.MarshalOptions{Deterministic: true}.Marshal(other)
			if !bytes.Equal(x, y) {
				return fmt.Errorf("%s %q encodes differently", shortType(typeURL), name)
			}
		}
	}
	return nil
}

// TestUnknownUpstreamsAreLeftOut: an upstream whose chain is not known yet
// has no listener or cluster, and a target whose endpoints are not known
// yet has an empty endpoint set; the set stays valid.
func TestUnknownUpstreamsAreLeftOut(t *testing.T) {
	w := newWorld()
	w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"})
	snap := snapshot(t, w, sidecar("web",
		structs.Upstream{DestinationName: "db", LocalBindPort: 9191},
		structs.Upstream{DestinationName: "cache", LocalBindPort: 9292},
	), 2)
	s := *snap
	cp := *snap.ConnectProxy
	s.ConnectProxy = &cp
	cache := *cp.Upstreams.Get("cache")
	cache.Chain = nil
	db := *cp.Upstreams.Get("db")
	db.Endpoints = nil
	cp.Upstreams = proxycfg.NewUpstreams(&cache, &db)

	res, err := Generate(&s)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(res); err != nil {
		t.Fatal(err)
	}
	requireNames(t, res, ListenerType, "public_listener:10.0.0.1:21000", "db:127.0.0.1:9191")
	requireNames(t, res, ClusterType, "local_app", "db.default.dc1.internal."+testTrustDomain)
	if got := endpointsOf(t, res, "db.default.dc1.internal."+testTrustDomain); len(got) != 0 {
		t.Fatalf("endpoints of a target not known yet: %v", got)
	}
}

// TestTransparentVirtualIPsAreClaimedOnce: the outbound listener matches
// virtual IPs only, on any port; two upstreams claiming the same address
// (here a Kubernetes ClusterIP) cannot both have it (Envoy refuses equal
// matches), so the first by ID keeps it; an upstream without any virtual
// IP has no chain.
func TestTransparentVirtualIPsAreClaimedOnce(t *testing.T) {
	w := newWorld()
	w.intentionUpstreams["web"] = []string{"cache", "db", "legacy"}
	w.virtualIPs = map[string]*structs.ServiceVirtualIP{
		"cache": {Service: "cache", IP: "240.0.0.1"},
		"db":    {Service: "db", IP: "240.0.0.2", ManualIPs: []string{"10.100.0.2"}},
	}
	shared := map[string]structs.ServiceAddress{"virtual": {Address: "10.96.0.1", Port: 80}}
	w.connect["cache/dc1"] = sidecars("cache", "dc1", inst{addr: "10.0.1.1", tagged: shared})
	w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1", port: 21001, tagged: shared}, inst{addr: "10.0.1.2"})
	w.connect["legacy/dc1"] = sidecars("legacy", "dc1", inst{addr: "10.0.1.3"})
	svc := sidecar("web")
	svc.Proxy.Mode = structs.ProxyModeTransparent
	res, err := Generate(snapshot(t, w, svc, 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(res); err != nil {
		t.Fatal(err)
	}
	l := res[ListenerType]["outbound_listener:127.0.0.1:15001"].(*listenerv3.Listener)
	var got []string
	for _, fc := range l.FilterChains {
		if fc.GetFilterChainMatch().GetDestinationPort() != nil {
			t.Errorf("chain %s matches a port", fc.GetName())
		}
		for _, r := range fc.GetFilterChainMatch().GetPrefixRanges() {
			got = append(got, fmt.Sprintf("%s=%s", fc.GetName(), r.GetAddressPrefix()))
		}
	}
	if want := "[cache=10.96.0.1 cache=240.0.0.1 db=10.100.0.2 db=240.0.0.2]"; fmt.Sprint(got) != want {
		t.Fatalf("filter chains %v, want %s", got, want)
	}
}

// TestUpstreamSettings: central upstream limits and passive health checks
// reach the clusters, and an upstream bound on the public listener's
// address is left out rather than breaking the whole listener set.
func TestUpstreamSettings(t *testing.T) {
	w := newWorld()
	maxConns, maxPending, eject := 10, 0, uint32(50)
	base := 30 * time.Second
	w.entries = []structs.ConfigEntry{&structs.ServiceConfigEntry{
		Kind: structs.ServiceDefaults, Name: "web",
		UpstreamConfig: &structs.UpstreamConfiguration{Overrides: []*structs.UpstreamConfig{{
			Name:               "db",
			Limits:             &structs.UpstreamLimits{MaxConnections: &maxConns, MaxPendingRequests: &maxPending},
			PassiveHealthCheck: &structs.PassiveHealthCheck{Interval: 10 * time.Second, MaxFailures: 5, MaxEjectionPercent: &eject, BaseEjectionTime: &base},
			ConnectTimeoutMs:   1500,
		}}},
	}}
	w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"})
	w.connect["cache/dc1"] = sidecars("cache", "dc1", inst{addr: "10.0.1.2"})
	res, err := Generate(snapshot(t, w, sidecar("web",
		structs.Upstream{DestinationName: "db", LocalBindPort: 9191},
		structs.Upstream{DestinationName: "cache", LocalBindAddress: "10.0.0.1", LocalBindPort: 21000},
	), 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(res); err != nil {
		t.Fatal(err)
	}
	requireNames(t, res, ListenerType, "public_listener:10.0.0.1:21000", "db:127.0.0.1:9191")
	db := res[ClusterType][nameWithSuffix(t, res, ClusterType, "~db.default.dc1.internal."+testTrustDomain)].(*clusterv3.Cluster)
	th := db.GetCircuitBreakers().GetThresholds()
	od := db.GetOutlierDetection()
	switch {
	case db.GetConnectTimeout().AsDuration() != 1500*time.Millisecond:
		t.Errorf("connect timeout %v", db.GetConnectTimeout().AsDuration())
	case len(th) != 1 || th[0].GetMaxConnections().GetValue() != 10 || th[0].GetMaxPendingRequests() == nil || th[0].GetMaxRequests() != nil:
		t.Errorf("circuit breakers %v", th)
	case od.GetInterval().AsDuration() != 10*time.Second || od.GetConsecutive_5Xx().GetValue() != 5 ||
		od.GetMaxEjectionPercent().GetValue() != 50 || od.GetBaseEjectionTime().AsDuration() != base:
		t.Errorf("outlier detection %v", od)
	}
}

func TestEndpointHealth(t *testing.T) {
	node := func(weights *structs.Weights, statuses ...string) *structs.CheckServiceNode {
		n := &structs.CheckServiceNode{Service: &structs.NodeService{Weights: weights}}
		for _, s := range statuses {
			n.Checks = append(n.Checks, &structs.HealthCheck{Status: s})
		}
		return n
	}
	w := &structs.Weights{Passing: 10, Warning: 2}
	cases := []struct {
		name        string
		n           *structs.CheckServiceNode
		onlyPassing bool
		status      corev3.HealthStatus
		weight      uint32
		ok          bool
	}{
		{"no checks", node(nil), false, corev3.HealthStatus_HEALTHY, 1, true},
		{"passing", node(w, "passing", "passing"), false, corev3.HealthStatus_HEALTHY, 10, true},
		{"warning", node(w, "passing", "warning"), false, corev3.HealthStatus_DEGRADED, 2, true},
		{"warning, unweighted", node(nil, "warning"), false, corev3.HealthStatus_DEGRADED, 1, true},
		{"warning, only passing", node(w, "warning"), true, 0, 0, false},
		{"critical", node(w, "passing", "critical"), false, 0, 0, false},
		{"critical beats warning", node(w, "warning", "critical"), false, 0, 0, false},
		{"maintenance", node(w, "maintenance"), false, 0, 0, false},
		{"zero warning weight", node(&structs.Weights{Passing: 1}, "warning"), false, corev3.HealthStatus_UNHEALTHY, 1, true},
		{"zero weights (consul/api catalog default)", node(&structs.Weights{}, "passing"), false, corev3.HealthStatus_UNHEALTHY, 1, true},
		{"capped weight", node(&structs.Weights{Passing: 1000}, "passing"), false, corev3.HealthStatus_HEALTHY, 128, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, weight, ok := endpointHealth(tc.n, tc.onlyPassing)
			if status != tc.status || weight != tc.weight || ok != tc.ok {
				t.Fatalf("endpointHealth = %v, %d, %v; want %v, %d, %v", status, weight, ok, tc.status, tc.weight, tc.ok)
			}
		})
	}
}

// dump renders a value deeply (pointers followed, map entries sorted), so
// that two dumps differ exactly when some reachable content changed.
func dump(v any) string {
	var b strings.Builder
	dumpValue(&b, reflect.ValueOf(v), 0)
	return b.String()
}

func dumpValue(b *strings.Builder, v reflect.Value, depth int) {
	if depth > 100 {
		b.WriteString("<deep>")
		return
	}
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("<nil>")
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		dumpValue(b, v.Elem(), depth+1)
	case reflect.Struct:
		b.WriteString("{")
		for i := 0; i < v.NumField(); i++ {
			b.WriteString(v.Type().Field(i).Name + ":")
			dumpValue(b, v.Field(i), depth+1)
			b.WriteString(" ")
		}
		b.WriteString("}")
	case reflect.Slice, reflect.Array:
		b.WriteString("[")
		for i := 0; i < v.Len(); i++ {
			dumpValue(b, v.Index(i), depth+1)
			b.WriteString(",")
		}
		b.WriteString("]")
	case reflect.Map:
		entries := make([]string, 0, v.Len())
		it := v.MapRange()
		for it.Next() {
			var e strings.Builder
			dumpValue(&e, it.Key(), depth+1)
			e.WriteString("=")
			dumpValue(&e, it.Value(), depth+1)
			entries = append(entries, e.String())
		}
		sort.Strings(entries)
		b.WriteString("map[" + strings.Join(entries, ",") + "]")
	case reflect.String:
		fmt.Fprintf(b, "%q", v.String())
	case reflect.Bool:
		fmt.Fprint(b, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		fmt.Fprint(b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		fmt.Fprint(b, v.Uint())
	case reflect.Float32, reflect.Float64:
		fmt.Fprint(b, v.Float())
	default:
		fmt.Fprintf(b, "<%s>", v.Kind())
	}
}

// TestTransparentListenerIgnoresInstances: instances coming and going (with
// the same virtual IPs) leave the outbound listener exactly as it was, so
// the ADS server does not send it again.
func TestTransparentListenerIgnoresInstances(t *testing.T) {
	outbound := func(w *world) proto.Message {
		t.Helper()
		res, err := Generate(snapshot(t, w, transparentSidecar(), 4))
		if err != nil {
			t.Fatal(err)
		}
		return res[ListenerType]["outbound_listener:127.0.0.1:15001"]
	}
	before := transparentWorld(false)()
	after := transparentWorld(false)()
	tags := after.connect["api/dc1"][0].Service.TaggedAddresses
	after.connect["api/dc1"] = sidecars("api", "dc1", inst{addr: "10.0.2.7", tagged: tags}, inst{addr: "10.0.2.8", port: 21005, tagged: tags})
	after.connect["db/dc1"] = nil // db's last instance left; its virtual IP is the chain's
	if a, b := outbound(before), outbound(after); !proto.Equal(a, b) {
		t.Fatalf("outbound listener changed with the instances:\n%v\n%v", a, b)
	}
}
