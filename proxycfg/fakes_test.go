package proxycfg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/structs"
)

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait of the tests.
const waitTimeout = 5 * time.Second

// sub is one Notify call a fake data source received.
type sub[R any] struct {
	ctx  context.Context
	req  R
	corr string
	ch   chan<- UpdateEvent
}

// send delivers a result as a real source would (giving up when the watch
// is cancelled).
func (s *sub[R]) send(t testing.TB, result any) {
	t.Helper()
	s.sendEvent(t, UpdateEvent{CorrelationID: s.corr, Result: result})
}

func (s *sub[R]) sendEvent(t testing.TB, ev UpdateEvent) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case s.ch <- ev:
	case <-s.ctx.Done():
		t.Fatalf("send on cancelled watch %s", s.corr)
	case <-timer.C:
		t.Fatalf("send on %s blocked", s.corr)
	}
}

// sendFast is send for benchmarks: no timer, no checks.
func (s *sub[R]) sendFast(result any) {
	select {
	case s.ch <- UpdateEvent{CorrelationID: s.corr, Result: result}:
	case <-s.ctx.Done():
	}
}

func (s *sub[R]) cancelled() bool { return s.ctx.Err() != nil }

// fakeSource implements every data-source interface for its request type:
// it records Notify calls, lets the test push results to them, and can
// answer new watches with a current value (asynchronously, as the
// contract requires).
type fakeSource[R any] struct {
	name string
	wg   *sync.WaitGroup

	mu    sync.Mutex
	subs  []*sub[R]
	calls int
	// respond, when set, gives the current value for a new watch (nil:
	// none yet).
	respond func(R) any
	// refuse, when set, makes Notify fail for the requests it returns an
	// error for.
	refuse func(R) error
}

func (f *fakeSource[R]) Notify(ctx context.Context, req R, corr string, ch chan<- UpdateEvent) error {
	f.mu.Lock()
	if f.refuse != nil {
		if err := f.refuse(req); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	f.subs = append(f.subs, &sub[R]{ctx: ctx, req: req, corr: corr, ch: ch})
	f.calls++
	respond := f.respond
	f.mu.Unlock()
	if respond == nil {
		return nil
	}
	if r := respond(req); r != nil {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			select {
			case ch <- UpdateEvent{CorrelationID: corr, Result: r}:
			case <-ctx.Done():
			}
		}()
	}
	return nil
}

func (f *fakeSource[R]) setRespond(fn func(R) any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.respond = fn
}

// callCount is the number of Notify calls so far.
func (f *fakeSource[R]) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// matching returns the watches match accepts; only the running ones
// unless all is set.
func (f *fakeSource[R]) matching(all bool, match func(R) bool) []*sub[R] {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*sub[R]
	for _, s := range f.subs {
		if (all || !s.cancelled()) && (match == nil || match(s.req)) {
			out = append(out, s)
		}
	}
	return out
}

// active returns the running watches match accepts.
func (f *fakeSource[R]) active(match func(R) bool) []*sub[R] { return f.matching(false, match) }

// waitSub waits for exactly one running watch match accepts.
func (f *fakeSource[R]) waitSub(t testing.TB, what string, match func(R) bool) *sub[R] {
	t.Helper()
	var got []*sub[R]
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		if got = f.active(match); len(got) == 1 {
			return got[0]
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s: want 1 running %s watch, have %d", f.name, what, len(got))
	return nil
}

// waitNone waits until no running watch matches.
func (f *fakeSource[R]) waitNone(t testing.TB, what string, match func(R) bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		if len(f.active(match)) == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s: %s watch still running", f.name, what)
}

// fakes is a full set of fake data sources.
type fakes struct {
	wg sync.WaitGroup

	roots              *fakeSource[*structs.DCSpecificRequest]
	leaf               *fakeSource[*LeafRequest]
	intentions         *fakeSource[*structs.ServiceSpecificRequest]
	intentionUpstreams *fakeSource[*structs.ServiceSpecificRequest]
	configEntry        *fakeSource[*structs.ConfigEntryQuery]
	configEntryList    *fakeSource[*structs.ConfigEntryQuery]
	serviceConfig      *fakeSource[*structs.ServiceConfigRequest]
	chain              *fakeSource[*structs.DiscoveryChainRequest]
	health             *fakeSource[*structs.ServiceSpecificRequest]
	serviceList        *fakeSource[*structs.DCSpecificRequest]
	gatewayServices    *fakeSource[*structs.ServiceSpecificRequest]
	byKind             *fakeSource[*structs.ServiceKindRequest]
	datacenters        *fakeSource[*structs.DCSpecificRequest]
}

func newFakeSource[R any](f *fakes, name string) *fakeSource[R] {
	return &fakeSource[R]{name: name, wg: &f.wg}
}

func newFakes() *fakes {
	f := &fakes{}
	f.roots = newFakeSource[*structs.DCSpecificRequest](f, "CARoots")
	f.leaf = newFakeSource[*LeafRequest](f, "Leaf")
	f.intentions = newFakeSource[*structs.ServiceSpecificRequest](f, "Intentions")
	f.intentionUpstreams = newFakeSource[*structs.ServiceSpecificRequest](f, "IntentionUpstreams")
	f.configEntry = newFakeSource[*structs.ConfigEntryQuery](f, "ConfigEntry")
	f.configEntryList = newFakeSource[*structs.ConfigEntryQuery](f, "ConfigEntryList")
	f.serviceConfig = newFakeSource[*structs.ServiceConfigRequest](f, "ResolvedServiceConfig")
	f.chain = newFakeSource[*structs.DiscoveryChainRequest](f, "CompiledDiscoveryChain")
	f.health = newFakeSource[*structs.ServiceSpecificRequest](f, "Health")
	f.serviceList = newFakeSource[*structs.DCSpecificRequest](f, "ServiceList")
	f.gatewayServices = newFakeSource[*structs.ServiceSpecificRequest](f, "GatewayServices")
	f.byKind = newFakeSource[*structs.ServiceKindRequest](f, "ServicesByKind")
	f.datacenters = newFakeSource[*structs.DCSpecificRequest](f, "Datacenters")
	return f
}

func (f *fakes) dataSources() DataSources {
	return DataSources{
		CARoots:                f.roots,
		Leaf:                   f.leaf,
		Intentions:             f.intentions,
		IntentionUpstreams:     f.intentionUpstreams,
		ConfigEntry:            f.configEntry,
		ConfigEntryList:        f.configEntryList,
		ResolvedServiceConfig:  f.serviceConfig,
		CompiledDiscoveryChain: f.chain,
		Health:                 f.health,
		ServiceList:            f.serviceList,
		GatewayServices:        f.gatewayServices,
		ServicesByKind:         f.byKind,
		Datacenters:            f.datacenters,
	}
}

// Shared results the basic responders hand out (read-only, like a
// deduplicating source's).
var (
	basicRoots      = testRoots("11111111-2222-3333-4444-555555555555.consul", "root-1")
	basicIntentions = &structs.IndexedIntentions{Intentions: structs.Intentions{}}
	noEntry         = &structs.ConfigEntryResponse{}
	basicSvcConfig  = &structs.ServiceConfigResponse{Protocol: "tcp"}
)

// autoBasics makes the sources answer what every proxy needs at once:
// roots, a leaf per service, no intentions, no mesh entry (or gateway
// entry, or resolver), and an empty central config.
func (f *fakes) autoBasics() {
	f.roots.setRespond(func(*structs.DCSpecificRequest) any { return basicRoots })
	leaves := sync.Map{}
	f.leaf.setRespond(func(r *LeafRequest) any {
		l, _ := leaves.LoadOrStore(r.Service, testLeaf(r.Service, "01"))
		return l
	})
	f.intentions.setRespond(func(*structs.ServiceSpecificRequest) any { return basicIntentions })
	f.configEntry.setRespond(func(*structs.ConfigEntryQuery) any { return noEntry })
	f.serviceConfig.setRespond(func(*structs.ServiceConfigRequest) any { return basicSvcConfig })
}

// --- fixtures ---------------------------------------------------------

func testRoots(trustDomain, id string) *structs.IndexedCARoots {
	return &structs.IndexedCARoots{
		ActiveRootID: id,
		TrustDomain:  trustDomain,
		Roots:        structs.CARoots{{ID: id, Name: "Trellis CA Root", RootCert: "-----BEGIN CERTIFICATE-----\n" + id, Active: true}},
	}
}

func testLeaf(service, serial string) *structs.IssuedCert {
	return &structs.IssuedCert{
		SerialNumber:  serial,
		CertPEM:       "cert:" + service + ":" + serial,
		PrivateKeyPEM: "key:" + service + ":" + serial,
		Service:       service,
		ServiceURI:    "spiffe://11111111-2222-3333-4444-555555555555.consul/ns/default/dc/dc1/svc/" + service,
		ValidBefore:   time.Now().Add(72 * time.Hour),
	}
}

// target is a chain target spec: service, subset (with its filter), dc
// and mesh gateway mode.
type target struct {
	service, subset, filter, dc, mgw string
}

func (t target) id() string {
	return structs.DiscoveryTargetID(structs.DiscoveryTargetOpts{
		Service: t.service, ServiceSubset: t.subset, Namespace: "default", Partition: "default", Datacenter: t.dc,
	})
}

// testChain compiles (by hand) a chain for service that resolves to the
// given targets: one resolver for a single target, a splitter over
// resolvers for several.
func testChain(service string, targets ...target) *structs.DiscoveryChainResponse {
	c := &structs.CompiledDiscoveryChain{
		ServiceName: service, Namespace: "default", Partition: "default", Datacenter: "dc1", Protocol: "tcp",
		Nodes:   map[string]*structs.DiscoveryGraphNode{},
		Targets: map[string]*structs.DiscoveryTarget{},
	}
	var splits []*structs.DiscoverySplit
	for _, t := range targets {
		id := t.id()
		c.Targets[id] = &structs.DiscoveryTarget{
			ID: id, Service: t.service, ServiceSubset: t.subset, Namespace: "default", Partition: "default",
			Datacenter: t.dc, MeshGateway: structs.MeshGatewayConfig{Mode: t.mgw},
			Subset: structs.ServiceResolverSubset{Filter: t.filter},
			SNI:    fmt.Sprintf("%s.default.%s.internal.test.consul", t.service, t.dc),
		}
		n := &structs.DiscoveryGraphNode{Type: structs.DiscoveryGraphNodeTypeResolver, Name: id,
			Resolver: &structs.DiscoveryResolver{Target: id}}
		c.Nodes[n.MapKey()] = n
		splits = append(splits, &structs.DiscoverySplit{Weight: 100 / float32(len(targets)), NextNode: n.MapKey()})
	}
	if len(targets) == 1 {
		c.StartNode = "resolver:" + targets[0].id()
		c.Default = true
	} else {
		c.Protocol = "http"
		n := &structs.DiscoveryGraphNode{Type: structs.DiscoveryGraphNodeTypeSplitter, Name: service + ".default.default", Splits: splits}
		c.Nodes[n.MapKey()] = n
		c.StartNode = n.MapKey()
	}
	return &structs.DiscoveryChainResponse{Chain: c}
}

// testNodes returns Connect endpoints (sidecars) of service at the given
// addresses, all passing.
func testNodes(service string, addrs ...string) *structs.IndexedCheckServiceNodes {
	out := &structs.IndexedCheckServiceNodes{Nodes: structs.CheckServiceNodes{}}
	for i, a := range addrs {
		node := &structs.Node{Node: fmt.Sprintf("node-%d", i), Address: a, Datacenter: "dc1"}
		svc := &structs.NodeService{
			Kind: structs.ServiceKindConnectProxy, ID: service + "-sidecar-proxy", Service: service + "-sidecar-proxy",
			Address: a, Port: 21000, Proxy: structs.ConnectProxyConfig{DestinationServiceName: service},
		}
		out.Nodes = append(out.Nodes, structs.CheckServiceNode{Node: node, Service: svc, Checks: structs.HealthChecks{
			{Node: node.Node, CheckID: "service:" + svc.ID, Status: structs.HealthPassing, ServiceID: svc.ID},
		}})
	}
	return out
}

func testSidecar(service string, upstreams ...structs.Upstream) *structs.NodeService {
	return &structs.NodeService{
		Kind: structs.ServiceKindConnectProxy, ID: service + "-sidecar-proxy", Service: service + "-sidecar-proxy",
		Address: "10.0.0.1", Port: 21000,
		Proxy: structs.ConnectProxyConfig{
			DestinationServiceName: service, DestinationServiceID: service,
			LocalServiceAddress: "127.0.0.1", LocalServicePort: 8080, Upstreams: upstreams,
		},
	}
}

func idFor(svc *structs.NodeService) ProxyID {
	return ProxyID{Node: "node-1", ServiceID: svc.ID, Token: "token-1"}
}

// --- harness -----------------------------------------------------------

type harness struct {
	t testing.TB
	f *fakes
	m *Manager
}

// newHarness returns a manager over fresh fakes with a short coalescing
// window; the manager is closed when the test ends.
func newHarness(t testing.TB, tweak func(*Config)) *harness {
	t.Helper()
	f := newFakes()
	cfg := Config{
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		DataSources: f.dataSources(),
		Datacenter:  "dc1",
		Coalesce:    5 * time.Millisecond,
	}
	if tw, ok := t.(*testing.T); ok {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{tw}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if tweak != nil {
		tweak(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		f.wg.Wait()
	})
	return &harness{t: t, f: f, m: m}
}

// register registers svc (source local) and watches it.
func (h *harness) register(svc *structs.NodeService) (ProxyID, <-chan *ConfigSnapshot) {
	h.t.Helper()
	id := idFor(svc)
	if err := h.m.Register(id, svc, SourceLocal, "token-1", true); err != nil {
		h.t.Fatal(err)
	}
	ch, cancel := h.m.Watch(id)
	h.t.Cleanup(cancel)
	return id, ch
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// waitSnap waits for a snapshot that check accepts (nil error), skipping
// others.
func waitSnap(t testing.TB, ch <-chan *ConfigSnapshot, check func(*ConfigSnapshot) error) *ConfigSnapshot {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	lastErr := errors.New("no snapshot at all")
	for {
		select {
		case s, ok := <-ch:
			if !ok {
				t.Fatalf("watch channel closed; last mismatch: %v", lastErr)
			}
			if check == nil {
				return s
			}
			if lastErr = check(s); lastErr == nil {
				return s
			}
		case <-timer.C:
			t.Fatalf("no matching snapshot: %v", lastErr)
		}
	}
}

// noSnap asserts that no snapshot arrives for d.
func noSnap(t testing.TB, ch <-chan *ConfigSnapshot, d time.Duration) {
	t.Helper()
	select {
	case s, ok := <-ch:
		if ok {
			t.Fatalf("unexpected snapshot (version %d)", s.Version)
		}
		t.Fatal("unexpected close of the watch channel")
	case <-time.After(d):
	}
}
