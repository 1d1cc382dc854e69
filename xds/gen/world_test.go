package gen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/connect/discoverychain"
	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

// The tests build snapshots the way production does: a real
// proxycfg.Manager runs the real state machines against fake data sources
// that answer every watch from a static description of the cluster (a
// world). Discovery chains come from the real compiler over the world's
// config entries, and subset filters are applied by the fake health
// source, so a snapshot is what the agent would build for that cluster.

const testTrustDomain = "11111111-2222-3333-4444-555555555555.consul"

// world is a static cluster: its config entries, intentions and service
// instances.
type world struct {
	dc          string
	defaultDeny bool
	entries     []structs.ConfigEntry
	// intentions by destination service.
	intentions map[string]structs.Intentions
	// intentionUpstreams by source service (transparent proxies).
	intentionUpstreams map[string][]string
	// connect holds Connect endpoints by "service/dc"; instances the
	// services' own instances (terminating gateways) by name.
	connect   map[string]structs.CheckServiceNodes
	instances map[string]structs.CheckServiceNodes
	// meshGateways by datacenter; datacenters and services as the catalog
	// lists them.
	meshGateways map[string]structs.CheckServiceNodes
	// virtualIPs by service, as the servers' chain reads add them.
	virtualIPs  map[string]*structs.ServiceVirtualIP
	datacenters []string
	services    []string
	// pemSize pads certificate and key bodies to a realistic size
	// (benchmarks); 0 keeps the short readable ones of the golden files.
	pemSize int
}

func newWorld() *world {
	return &world{
		dc:                 "dc1",
		intentions:         map[string]structs.Intentions{},
		intentionUpstreams: map[string][]string{},
		connect:            map[string]structs.CheckServiceNodes{},
		instances:          map[string]structs.CheckServiceNodes{},
		meshGateways:       map[string]structs.CheckServiceNodes{},
		datacenters:        []string{"dc1"},
	}
}

func (w *world) entry(kind, name string) structs.ConfigEntry {
	for _, e := range w.entries {
		if e.GetKind() == kind && e.GetName() == name {
			return e
		}
	}
	return nil
}

func (w *world) roots() *structs.IndexedCARoots {
	return &structs.IndexedCARoots{
		ActiveRootID: "root-2",
		TrustDomain:  testTrustDomain,
		Roots: structs.CARoots{
			{ID: "root-1", Name: "Trellis CA Root (rotated out)", RootCert: pem("CERTIFICATE", w.pad("ROOT-1"))},
			{ID: "root-2", Name: "Trellis CA Root", RootCert: pem("CERTIFICATE", w.pad("ROOT-2")), Active: true},
		},
	}
}

func pem(kind, body string) string {
	return "-----BEGIN " + kind + "-----\n" + body + "\n-----END " + kind + "-----\n"
}

// pad makes a PEM body pemSize bytes long.
func (w *world) pad(body string) string {
	if len(body) >= w.pemSize {
		return body
	}
	return body + strings.Repeat("A", w.pemSize-len(body))
}

func (w *world) leaf(service string) *structs.IssuedCert {
	return &structs.IssuedCert{
		SerialNumber:  "01:" + service,
		CertPEM:       pem("CERTIFICATE", w.pad("LEAF-"+service)),
		PrivateKeyPEM: pem("EC PRIVATE KEY", w.pad("KEY-"+service)),
		Service:       service,
		ServiceURI:    spiffeID(testTrustDomain, "dc1", service),
		ValidBefore:   time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
	}
}

// serviceConfig merges proxy-defaults and service-defaults as the server
// does (the fields generation reads; an upstream override replaces the
// upstream defaults instead of being merged field by field).
func (w *world) serviceConfig(name string, upstreams []string) *structs.ServiceConfigResponse {
	resp := &structs.ServiceConfigResponse{Protocol: structs.DefaultServiceProtocol}
	// Expose paths merge as the server merges them (its own function).
	pdEntry, _ := w.entry(structs.ProxyDefaults, structs.ProxyConfigGlobal).(*structs.ProxyConfigEntry)
	sdEntry, _ := w.entry(structs.ServiceDefaults, name).(*structs.ServiceConfigEntry)
	resp.Expose = query.MergeServiceConfig(pdEntry, sdEntry, nil).Expose
	if pd, ok := w.entry(structs.ProxyDefaults, structs.ProxyConfigGlobal).(*structs.ProxyConfigEntry); ok {
		if p := pd.Protocol(); p != "" {
			resp.Protocol = p
		}
		resp.ProxyConfig = maps.Clone(pd.Config)
		resp.Mode, resp.TransparentProxy, resp.MeshGateway = pd.Mode, pd.TransparentProxy, pd.MeshGateway
		resp.AccessLogs = pd.AccessLogs // as the server: proxy-defaults alone sets it
	}
	if sd, ok := w.entry(structs.ServiceDefaults, name).(*structs.ServiceConfigEntry); ok {
		if sd.Protocol != "" {
			resp.Protocol = sd.Protocol
			if resp.ProxyConfig != nil {
				resp.ProxyConfig["protocol"] = sd.Protocol
			}
		}
		if sd.Mode != "" {
			resp.Mode = sd.Mode
		}
		if sd.TransparentProxy.OutboundListenerPort != 0 {
			resp.TransparentProxy = sd.TransparentProxy
		}
		if sd.MeshGateway.Mode != "" {
			resp.MeshGateway = sd.MeshGateway
		}
		if uc := sd.UpstreamConfig; uc != nil {
			resp.UpstreamDefaults = uc.Defaults
			for _, up := range upstreams {
				cfg := uc.Defaults
				for _, o := range uc.Overrides {
					if o != nil && o.Name == up {
						cfg = o
					}
				}
				if cfg != nil {
					if resp.UpstreamConfigs == nil {
						resp.UpstreamConfigs = map[string]*structs.UpstreamConfig{}
					}
					resp.UpstreamConfigs[up] = cfg
				}
			}
		}
	}
	return resp
}

func (w *world) chain(req *structs.DiscoveryChainRequest) (*structs.DiscoveryChainResponse, error) {
	dc := req.EvaluateInDatacenter
	if dc == "" {
		dc = w.dc
	}
	chain, err := discoverychain.Compile(discoverychain.CompileRequest{
		ServiceName:            req.Name,
		EvaluateInDatacenter:   dc,
		EvaluateInTrustDomain:  testTrustDomain,
		OverrideMeshGateway:    req.OverrideMeshGateway,
		OverrideProtocol:       req.OverrideProtocol,
		OverrideConnectTimeout: req.OverrideConnectTimeout,
		Entries:                discoverychain.NewEntries().Add(w.entries...),
	})
	if err != nil {
		return nil, err
	}
	if v := w.virtualIPs[req.Name]; v != nil {
		chain.AutoVirtualIPs, chain.ManualVirtualIPs = []string{v.IP}, v.ManualIPs
	}
	return &structs.DiscoveryChainResponse{Chain: chain}, nil
}

func (w *world) health(req *structs.ServiceSpecificRequest) (*structs.IndexedCheckServiceNodes, error) {
	var nodes structs.CheckServiceNodes
	if req.Connect {
		nodes = w.connect[req.ServiceName+"/"+req.Datacenter]
	} else {
		nodes = w.instances[req.ServiceName]
	}
	out := structs.CheckServiceNodes{}
	if req.Filter == "" {
		return &structs.IndexedCheckServiceNodes{Nodes: append(out, nodes...)}, nil
	}
	f, err := structs.ParseFilter(req.Filter)
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		if f.Evaluate(&nodes[i]) {
			out = append(out, nodes[i])
		}
	}
	return &structs.IndexedCheckServiceNodes{Nodes: out}, nil
}

// gatewayServices lists a gateway's services from its config entry, as
// the catalog's gateway-services table does.
func (w *world) gatewayServices(gateway string) *structs.IndexedGatewayServices {
	out := &structs.IndexedGatewayServices{Services: []*structs.GatewayService{}}
	if ig, ok := w.entry(structs.IngressGateway, gateway).(*structs.IngressGatewayConfigEntry); ok {
		for _, l := range ig.Listeners {
			for _, s := range l.Services {
				out.Services = append(out.Services, &structs.GatewayService{
					Gateway: gateway, Service: s.Name, GatewayKind: structs.ServiceKindIngressGateway,
					Port: l.Port, Protocol: l.Protocol, Hosts: s.Hosts,
				})
			}
		}
	}
	if tg, ok := w.entry(structs.TerminatingGateway, gateway).(*structs.TerminatingGatewayConfigEntry); ok {
		for _, s := range tg.Services {
			out.Services = append(out.Services, &structs.GatewayService{
				Gateway: gateway, Service: s.Name, GatewayKind: structs.ServiceKindTerminatingGateway,
				CAFile: s.CAFile, CertFile: s.CertFile, KeyFile: s.KeyFile, SNI: s.SNI,
			})
		}
	}
	return out
}

// --- fake data sources -------------------------------------------------

// fakes answers every watch once, from the world, on a goroutine of its
// own (Notify must not send before it returns).
type fakes struct {
	t  testing.TB
	w  *world
	wg sync.WaitGroup
}

// source adapts an answer function to one data-source interface.
type source[R any] struct {
	f      *fakes
	answer func(R) (any, error)
}

func (s source[R]) Notify(ctx context.Context, req R, corr string, ch chan<- proxycfg.UpdateEvent) error {
	res, err := s.answer(req)
	if err != nil {
		s.f.t.Errorf("fake data source: %T %+v: %v", req, req, err)
		return nil
	}
	s.f.wg.Add(1)
	go func() {
		defer s.f.wg.Done()
		select {
		case ch <- proxycfg.UpdateEvent{CorrelationID: corr, Result: res}:
		case <-ctx.Done():
		}
	}()
	return nil
}

func answer[R any](f *fakes, fn func(R) (any, error)) source[R] { return source[R]{f: f, answer: fn} }

func (f *fakes) dataSources() proxycfg.DataSources {
	w := f.w
	return proxycfg.DataSources{
		CARoots: answer(f, func(*structs.DCSpecificRequest) (any, error) { return w.roots(), nil }),
		Leaf:    answer(f, func(r *proxycfg.LeafRequest) (any, error) { return w.leaf(r.Service), nil }),
		Intentions: answer(f, func(r *structs.ServiceSpecificRequest) (any, error) {
			ixns := slices.Clone(w.intentions[r.ServiceName])
			structs.SortIntentions(ixns)
			return &structs.IndexedIntentions{Intentions: append(structs.Intentions{}, ixns...)}, nil
		}),
		IntentionUpstreams: answer(f, func(r *structs.ServiceSpecificRequest) (any, error) {
			names := slices.Clone(w.intentionUpstreams[r.ServiceName])
			sort.Strings(names)
			return &structs.ServiceNames{Services: names}, nil
		}),
		ConfigEntry: answer(f, func(r *structs.ConfigEntryQuery) (any, error) {
			return &structs.ConfigEntryResponse{Entry: w.entry(r.Kind, r.Name)}, nil
		}),
		ConfigEntryList: answer(f, func(r *structs.ConfigEntryQuery) (any, error) {
			out := &structs.IndexedConfigEntries{Kind: r.Kind}
			for _, e := range w.entries {
				if e.GetKind() == r.Kind {
					out.Entries = append(out.Entries, e)
				}
			}
			sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].GetName() < out.Entries[j].GetName() })
			return out, nil
		}),
		ResolvedServiceConfig: answer(f, func(r *structs.ServiceConfigRequest) (any, error) { return w.serviceConfig(r.Name, r.Upstreams), nil }),
		CompiledDiscoveryChain: answer(f, func(r *structs.DiscoveryChainRequest) (any, error) {
			return w.chain(r)
		}),
		Health: answer(f, func(r *structs.ServiceSpecificRequest) (any, error) { return w.health(r) }),
		ServiceList: answer(f, func(*structs.DCSpecificRequest) (any, error) {
			out := &structs.IndexedServices{Services: map[string][]string{}}
			for _, s := range w.services {
				out.Services[s] = nil
			}
			return out, nil
		}),
		GatewayServices: answer(f, func(r *structs.ServiceSpecificRequest) (any, error) { return w.gatewayServices(r.ServiceName), nil }),
		ServicesByKind: answer(f, func(r *structs.ServiceKindRequest) (any, error) {
			return &structs.IndexedCheckServiceNodes{Nodes: append(structs.CheckServiceNodes{}, w.meshGateways[r.Datacenter]...)}, nil
		}),
		Datacenters: answer(f, func(*structs.DCSpecificRequest) (any, error) {
			return &proxycfg.DatacenterList{Datacenters: slices.Clone(w.datacenters)}, nil
		}),
	}
}

// snapshot registers svc with a manager over the world and returns the
// first snapshot in which everything is known (see complete); want is the
// number of upstreams (or gateway services) the snapshot must have.
func snapshot(t testing.TB, w *world, svc *structs.NodeService, want int) *proxycfg.ConfigSnapshot {
	t.Helper()
	return snapshotDialing(t, w, svc, want)
}

// snapshotDialing is snapshot for a proxy that also dials the services
// named by dial, set at run time (proxycfg.Manager.SetUpstreams) as a
// Connect-native gRPC application's xDS client asks for them.
func snapshotDialing(t testing.TB, w *world, svc *structs.NodeService, want int, dial ...string) *proxycfg.ConfigSnapshot {
	t.Helper()
	f := &fakes{t: t, w: w}
	policy := "allow"
	if w.defaultDeny {
		policy = "deny"
	}
	m, err := proxycfg.New(proxycfg.Config{
		DataSources:            f.dataSources(),
		Datacenter:             w.dc,
		DefaultIntentionPolicy: policy,
		Coalesce:               time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		m.Close()
		f.wg.Wait()
	}()
	id := proxycfg.ProxyID{Node: "node-1", ServiceID: svc.ID, Token: "token"}
	m.SetUpstreams(id, dial)
	if err := m.Register(id, svc, proxycfg.SourceLocal, "token", true); err != nil {
		t.Fatal(err)
	}
	ch, cancel := m.Watch(id)
	defer cancel()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	lastErr := errors.New("no snapshot")
	for {
		select {
		case snap, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed: %v", lastErr)
			}
			if lastErr = complete(snap, w.dc, want); lastErr == nil {
				return snap
			}
		case <-timer.C:
			t.Fatalf("no complete snapshot: %v", lastErr)
		}
	}
}

// complete reports what a snapshot still lacks: chains, target endpoints,
// gateway endpoints, linked services.
func complete(s *proxycfg.ConfigSnapshot, dc string, want int) error {
	upstreamsKnown := func(ups proxycfg.Upstreams) error {
		if len(ups) != want {
			return fmt.Errorf("%d upstreams, want %d", len(ups), want)
		}
		for _, u := range ups {
			id := u.ID
			if u.Chain == nil {
				return fmt.Errorf("upstream %s: no chain", id)
			}
			for tid, t := range u.Chain.Targets {
				if _, ok := u.Endpoints[tid]; !ok {
					return fmt.Errorf("upstream %s: no endpoints for %s", id, tid)
				}
				if gdc := proxycfg.MeshGatewayDatacenter(t, dc); gdc != "" {
					if _, ok := u.GatewayEndpoints[gdc]; !ok {
						return fmt.Errorf("upstream %s: no gateways of %s", id, gdc)
					}
				}
			}
		}
		return nil
	}
	switch {
	case s.ConnectProxy != nil:
		// The resolved service config carries proxy-defaults' Config and
		// central expose paths; a snapshot may be valid before it is in.
		if s.ConnectProxy.ServiceConfig == nil {
			return errors.New("no resolved service config")
		}
		return upstreamsKnown(s.ConnectProxy.Upstreams)
	case s.IngressGateway != nil:
		// Gateways too carry proxy-defaults (access logs) in their own
		// resolved service config, and are valid before it is in.
		if s.IngressGateway.ServiceConfig == nil {
			return errors.New("no resolved service config")
		}
		return upstreamsKnown(s.IngressGateway.Upstreams)
	case s.TerminatingGateway != nil:
		if s.TerminatingGateway.ServiceConfig == nil {
			return errors.New("no resolved service config")
		}
		if n := len(s.TerminatingGateway.Services); n != want {
			return fmt.Errorf("%d linked services, want %d", n, want)
		}
		for name, ts := range s.TerminatingGateway.Services {
			if !ts.Ready() {
				return fmt.Errorf("linked service %s not ready", name)
			}
		}
		return nil
	case s.MeshGateway != nil:
		mg := s.MeshGateway
		if mg.ServiceConfig == nil {
			return errors.New("no resolved service config")
		}
		if len(mg.Services) != want {
			return fmt.Errorf("%d services, want %d", len(mg.Services), want)
		}
		for _, d := range mg.Datacenters {
			if _, ok := mg.GatewaysByDatacenter[d]; !ok {
				return fmt.Errorf("no gateways of %s", d)
			}
		}
		return nil
	}
	return errors.New("snapshot of no known kind")
}
