package integration

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/trellis-mesh/trellis/xds/gen"
)

// An ADS client that behaves like Envoy, for the xDS scenarios (issue 6):
// it opens a delta or state-of-the-world stream, asks for clusters and
// listeners, subscribes to the endpoints of its EDS clusters and the route
// configurations its connection managers name, and acknowledges what it
// accepts. Every resource it receives is validated with gen.Validate; a
// policy may make it reject (NACK) responses the way Envoy does, keeping
// what it held. Everything it receives is logged with a sequence number so
// a scenario can wait for an update or prove that none came.

// The four core type URLs, shortened.
const (
	cdsType = resource.ClusterType
	edsType = resource.EndpointType
	ldsType = resource.ListenerType
	rdsType = resource.RouteType
)

// Stream protocols.
const (
	protoDelta = "delta"
	protoSotW  = "sotw"
)

// nackCode is the google.rpc code Envoy puts into a NACK's error_detail.
const nackCode = int32(codes.Internal)

// shortType names a type URL in messages.
func shortType(typeURL string) string {
	switch typeURL {
	case cdsType:
		return "CDS"
	case edsType:
		return "EDS"
	case ldsType:
		return "LDS"
	case rdsType:
		return "RDS"
	}
	return typeURL
}

// adsResource is one resource the client holds.
type adsResource struct {
	Name string
	// Version is the server's per-resource version (delta only).
	Version string
	// Content hashes the deterministic encoding: equal content, equal hash,
	// whatever the protocol.
	Content string
	Msg     proto.Message
}

// adsResponse is one response as the client saw and judged it.
type adsResponse struct {
	Seq     int
	At      time.Time
	TypeURL string
	Nonce   string
	// Version is the state-of-the-world version_info or the delta
	// system_version_info.
	Version   string
	Resources []adsResource
	Removed   []string
	// Nack is the error text the client rejected the response with.
	Nack string
}

// names lists the response's resources ("-name" for a removal).
func (r adsResponse) names() []string {
	var out []string
	for _, res := range r.Resources {
		out = append(out, res.Name)
	}
	for _, n := range r.Removed {
		out = append(out, "-"+n)
	}
	return out
}

func (r adsResponse) String() string {
	s := fmt.Sprintf("#%d %s nonce %s version %s %v", r.Seq, shortType(r.TypeURL), r.Nonce, r.Version, r.names())
	if r.Nack != "" {
		s += " NACKed"
	}
	return s
}

// typeAck is what the client last told the server about a type.
type typeAck struct {
	// AckedVersion and AckedNonce are from the latest accepted response.
	AckedVersion, AckedNonce string
	// NackedVersion, NackedNonce and NackError are from the latest
	// rejected one.
	NackedVersion, NackedNonce, NackError string
	// LastNonce is the nonce of the latest response of the type.
	LastNonce string
}

// nackPolicy returns the error text to reject a response with, or "".
type nackPolicy func(r adsResponse) string

// adsClientConfig describes one client stream.
type adsClientConfig struct {
	// Label names the client in messages.
	Label    string
	Protocol string
	// Addr is the agent's gRPC address.
	Addr string
	// TLS, when set, makes the stream speak TLS (to the agent's gRPC-TLS
	// port); nil is plaintext.
	TLS *tls.Config
	// ProxyID is the Envoy node ID; NodeName, when set, is sent as the
	// node_name metadata.
	ProxyID  string
	NodeName string
	// Nack, when set, decides which responses are rejected.
	Nack nackPolicy
	// Resume is what an earlier delta stream held: the client starts with
	// it and announces its versions in initial_resource_versions, as an
	// Envoy that reconnects (to the same agent or another) does.
	Resume map[string]map[string]adsResource
}

// adsClient is one Envoy-like ADS stream.
type adsClient struct {
	t   *testing.T
	cfg adsClientConfig

	conn   *grpc.ClientConn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	sendMu sync.Mutex
	sendFn func(proto.Message) error

	mu sync.Mutex
	// held is what the client accepted, by type and name.
	held map[string]map[string]adsResource
	// subs are the names subscribed to for EDS and RDS.
	subs map[string][]string
	acks map[string]*typeAck
	log  []adsResponse
	// problems are validation failures and protocol violations seen by the
	// receive goroutine; check reports them.
	problems []string
	ended    error
	changed  chan struct{}
}

// startADS opens a stream and sends the first requests (clusters with the
// node, then listeners), as Envoy does. Cleanup closes it.
func startADS(t *testing.T, cfg adsClientConfig) *adsClient {
	t.Helper()
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	conn, err := grpc.NewClient(cfg.Addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &adsClient{
		t: t, cfg: cfg, conn: conn, cancel: cancel,
		held:    map[string]map[string]adsResource{},
		subs:    map[string][]string{},
		acks:    map[string]*typeAck{},
		changed: make(chan struct{}),
	}
	for typeURL, held := range cfg.Resume {
		c.held[typeURL] = maps.Clone(held)
	}
	t.Cleanup(c.close)
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	var recv func() (proto.Message, error)
	switch cfg.Protocol {
	case protoDelta:
		s, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatalf("%s: open delta stream: %v", cfg.Label, err)
		}
		c.sendFn = func(m proto.Message) error { return s.Send(m.(*discoveryv3.DeltaDiscoveryRequest)) }
		recv = func() (proto.Message, error) { return s.Recv() }
	case protoSotW:
		s, err := ads.StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatalf("%s: open sotw stream: %v", cfg.Label, err)
		}
		c.sendFn = func(m proto.Message) error { return s.Send(m.(*discoveryv3.DiscoveryRequest)) }
		recv = func() (proto.Message, error) { return s.Recv() }
	default:
		t.Fatalf("unknown protocol %q", cfg.Protocol)
	}
	c.wg.Add(1)
	go c.receive(recv)
	c.subscribe(cdsType, nil, c.node())
	c.subscribe(ldsType, nil, nil)
	return c
}

// node is the Envoy node the client presents.
func (c *adsClient) node() *corev3.Node {
	n := &corev3.Node{Id: c.cfg.ProxyID, Cluster: strings.TrimSuffix(c.cfg.ProxyID, "-sidecar-proxy")}
	if c.cfg.NodeName != "" {
		n.Metadata, _ = structpb.NewStruct(map[string]any{"node_name": c.cfg.NodeName})
	}
	return n
}

func (c *adsClient) close() {
	c.cancel()
	c.wg.Wait()
	_ = c.conn.Close()
	c.check()
}

// send writes one request; errors end up in the receive goroutine.
func (c *adsClient) send(m proto.Message) {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	_ = c.sendFn(m)
}

// subscribe sends the first request of a type (or a new subscription):
// delta names are added; state-of-the-world names replace the type's list.
func (c *adsClient) subscribe(typeURL string, names []string, node *corev3.Node) {
	c.mu.Lock()
	if c.cfg.Protocol == protoDelta {
		req := &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNamesSubscribe: names,
			InitialResourceVersions: c.initialVersionsLocked(typeURL, names)}
		c.ackFor(typeURL)
		c.mu.Unlock()
		c.send(req)
		return
	}
	a := c.ackFor(typeURL)
	req := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNames: names,
		VersionInfo: a.AckedVersion, ResponseNonce: a.LastNonce}
	c.mu.Unlock()
	c.send(req)
}

// initialVersionsLocked returns, for the first delta request of a type,
// the versions of the resources of the type the client holds (all of them
// for a wildcard subscription, else those named).
func (c *adsClient) initialVersionsLocked(typeURL string, names []string) map[string]string {
	if _, started := c.acks[typeURL]; started || len(c.held[typeURL]) == 0 {
		return nil
	}
	out := map[string]string{}
	for n, r := range c.held[typeURL] {
		if names == nil || slices.Contains(names, n) {
			out[n] = r.Version
		}
	}
	return out
}

func (c *adsClient) ackFor(typeURL string) *typeAck {
	a := c.acks[typeURL]
	if a == nil {
		a = &typeAck{}
		c.acks[typeURL] = a
	}
	return a
}

func (c *adsClient) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// check fails the test with every problem the receive goroutine found.
func (c *adsClient) check() {
	c.t.Helper()
	c.mu.Lock()
	problems := slices.Clone(c.problems)
	c.problems = nil
	c.mu.Unlock()
	for _, p := range problems {
		c.t.Errorf("%s: %s", c.cfg.Label, p)
	}
}

// receive runs until the stream ends: it judges, applies and answers every
// response.
func (c *adsClient) receive(recv func() (proto.Message, error)) {
	defer c.wg.Done()
	for {
		m, err := recv()
		if err != nil {
			c.mu.Lock()
			c.ended = err
			c.notifyLocked()
			c.mu.Unlock()
			return
		}
		var reqs []proto.Message
		switch r := m.(type) {
		case *discoveryv3.DeltaDiscoveryResponse:
			reqs = c.onDelta(r)
		case *discoveryv3.DiscoveryResponse:
			reqs = c.onSotW(r)
		}
		for _, req := range reqs {
			c.send(req)
		}
	}
}

func (c *adsClient) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// decode unpacks a resource and hashes its content.
func decode(a *anypb.Any) (proto.Message, string, error) {
	m, err := a.UnmarshalNew()
	if err != nil {
		return nil, "", err
	}
	return m, contentHash(m), nil
}

// contentHash hashes the deterministic encoding of a message.
func contentHash(m proto.Message) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// resourceName is the name a resource is known by.
func resourceName(m proto.Message) string {
	switch r := m.(type) {
	case interface{ GetClusterName() string }: // ClusterLoadAssignment
		return r.GetClusterName()
	case interface{ GetName() string }:
		return r.GetName()
	}
	return ""
}

func (c *adsClient) onDelta(r *discoveryv3.DeltaDiscoveryResponse) []proto.Message {
	resp := adsResponse{At: time.Now(), TypeURL: r.GetTypeUrl(), Nonce: r.GetNonce(),
		Version: r.GetSystemVersionInfo(), Removed: r.GetRemovedResources()}
	for _, res := range r.GetResources() {
		m, h, err := decode(res.GetResource())
		if err != nil {
			c.mu.Lock()
			c.problem("%s resource %q: %v", shortType(resp.TypeURL), res.GetName(), err)
			c.mu.Unlock()
			continue
		}
		if got := resourceName(m); got != res.GetName() {
			c.mu.Lock()
			c.problem("%s resource sent as %q is named %q", shortType(resp.TypeURL), res.GetName(), got)
			c.mu.Unlock()
		}
		resp.Resources = append(resp.Resources, adsResource{Name: res.GetName(), Version: res.GetVersion(), Content: h, Msg: m})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := maps.Clone(c.held[resp.TypeURL])
	if next == nil {
		next = map[string]adsResource{}
	}
	for _, res := range resp.Resources {
		next[res.Name] = res
	}
	for _, n := range resp.Removed {
		delete(next, n)
	}
	reqs := c.judgeLocked(&resp, next)
	ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.TypeURL, ResponseNonce: resp.Nonce}
	if resp.Nack != "" {
		ack.ErrorDetail = &rpcstatus.Status{Code: nackCode, Message: resp.Nack}
	}
	// Envoy acknowledges a type before the follow-up subscriptions it
	// causes go out.
	return append([]proto.Message{ack}, reqs...)
}

func (c *adsClient) onSotW(r *discoveryv3.DiscoveryResponse) []proto.Message {
	resp := adsResponse{At: time.Now(), TypeURL: r.GetTypeUrl(), Nonce: r.GetNonce(), Version: r.GetVersionInfo()}
	for _, a := range r.GetResources() {
		m, h, err := decode(a)
		if err != nil {
			c.mu.Lock()
			c.problem("%s resource: %v", shortType(resp.TypeURL), err)
			c.mu.Unlock()
			continue
		}
		resp.Resources = append(resp.Resources, adsResource{Name: resourceName(m), Content: h, Msg: m})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var next map[string]adsResource
	if resp.TypeURL == ldsType || resp.TypeURL == cdsType {
		// Omission deletes listeners and clusters.
		next = map[string]adsResource{}
	} else {
		next = maps.Clone(c.held[resp.TypeURL])
		if next == nil {
			next = map[string]adsResource{}
		}
	}
	for _, res := range resp.Resources {
		next[res.Name] = res
	}
	reqs := c.judgeLocked(&resp, next)
	a := c.acks[resp.TypeURL]
	ack := &discoveryv3.DiscoveryRequest{TypeUrl: resp.TypeURL, ResponseNonce: resp.Nonce,
		VersionInfo: a.AckedVersion, ResourceNames: c.subs[resp.TypeURL]}
	if resp.Nack != "" {
		ack.ErrorDetail = &rpcstatus.Status{Code: nackCode, Message: resp.Nack}
	}
	out := []proto.Message{ack}
	// Subscription changes go out after the ACK, quoting the latest nonce
	// of their type, as Envoy's state-of-the-world mux does.
	for _, req := range reqs {
		d := req.(*discoveryv3.DeltaDiscoveryRequest)
		sa := c.ackFor(d.GetTypeUrl())
		out = append(out, &discoveryv3.DiscoveryRequest{TypeUrl: d.GetTypeUrl(), ResourceNames: c.subs[d.GetTypeUrl()],
			VersionInfo: sa.AckedVersion, ResponseNonce: sa.LastNonce})
	}
	return out
}

// judgeLocked validates a response, applies the NACK policy, records the
// response and, if accepted, the new state next; it returns the delta
// subscription changes the new state calls for (translated by the
// state-of-the-world caller).
func (c *adsClient) judgeLocked(resp *adsResponse, next map[string]adsResource) []proto.Message {
	resp.Seq = len(c.log) + 1
	a := c.ackFor(resp.TypeURL)
	a.LastNonce = resp.Nonce
	if resp.Nonce == "" {
		c.problem("%s response without nonce", shortType(resp.TypeURL))
	}
	if c.cfg.Nack != nil {
		resp.Nack = c.cfg.Nack(*resp)
	}
	if resp.Nack == "" {
		c.validateLocked(resp, next)
	}
	c.log = append(c.log, *resp)
	defer c.notifyLocked()
	if resp.Nack != "" {
		a.NackedVersion, a.NackedNonce, a.NackError = resp.Version, resp.Nonce, resp.Nack
		return nil
	}
	a.AckedVersion, a.AckedNonce = resp.Version, resp.Nonce
	c.held[resp.TypeURL] = next
	var reqs []proto.Message
	switch resp.TypeURL {
	case cdsType:
		reqs = c.resubscribeLocked(edsType, edsNames(next))
	case ldsType:
		reqs = c.resubscribeLocked(rdsType, rdsNames(next))
	}
	return reqs
}

// resubscribeLocked changes a dependent type's subscription to want and
// returns the delta request doing so (none if unchanged). Resources no
// longer wanted are dropped, as Envoy drops them.
func (c *adsClient) resubscribeLocked(typeURL string, want []string) []proto.Message {
	have := c.subs[typeURL]
	_, started := c.acks[typeURL]
	if slices.Equal(have, want) && (started || len(want) == 0) {
		return nil
	}
	var add, drop []string
	for _, n := range want {
		if !slices.Contains(have, n) {
			add = append(add, n)
		}
	}
	for _, n := range have {
		if !slices.Contains(want, n) {
			drop = append(drop, n)
			delete(c.held[typeURL], n)
		}
	}
	c.subs[typeURL] = want
	initial := c.initialVersionsLocked(typeURL, add)
	c.ackFor(typeURL)
	return []proto.Message{&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL,
		ResourceNamesSubscribe: add, ResourceNamesUnsubscribe: drop, InitialResourceVersions: initial}}
}

// edsNames are the endpoint sets the EDS clusters of a set need.
func edsNames(clusters map[string]adsResource) []string {
	var out []string
	for _, r := range clusters {
		cl, ok := r.Msg.(*clusterv3.Cluster)
		if !ok || (cl.GetType() != clusterv3.Cluster_EDS && cl.GetEdsClusterConfig() == nil) {
			continue
		}
		n := cl.GetEdsClusterConfig().GetServiceName()
		if n == "" {
			n = cl.GetName()
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// rdsNames are the route configurations the listeners' connection
// managers ask for over RDS.
func rdsNames(listeners map[string]adsResource) []string {
	var out []string
	for _, r := range listeners {
		l, ok := r.Msg.(*listenerv3.Listener)
		if !ok {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig().MessageIs(hcm) && f.GetTypedConfig().UnmarshalTo(hcm) == nil && hcm.GetRds() != nil {
					out = append(out, hcm.GetRds().GetRouteConfigName())
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// validateLocked runs gen.Validate over everything the client would hold
// after accepting resp (so references to resources received earlier
// resolve). Make-before-break means a listener, route or tcp_proxy never
// names a cluster the client lacks; the only references allowed to dangle
// for a moment are a cluster's endpoint set and a connection manager's
// route configuration, which Envoy requests after it has the cluster or
// listener. validateSettled checks those too, once they should be there.
func (c *adsClient) validateLocked(resp *adsResponse, next map[string]adsResource) {
	if !isCoreType(resp.TypeURL) {
		if len(resp.Resources) > 0 {
			c.problem("%s: resources of a type nobody generates", resp)
		}
		return
	}
	set := c.setLocked(map[string]map[string]adsResource{resp.TypeURL: next})
	err := gen.Validate(set)
	for _, e := range validationErrors(err) {
		msg := e.Error()
		if strings.Contains(msg, "which is not in the set") &&
			(strings.Contains(msg, "names ClusterLoadAssignment") || strings.Contains(msg, "names RouteConfiguration")) {
			continue
		}
		c.problem("%s: invalid: %s", resp, msg)
	}
}

func isCoreType(typeURL string) bool {
	switch typeURL {
	case cdsType, edsType, ldsType, rdsType:
		return true
	}
	return false
}

// validationErrors splits gen.Validate's error into its problems.
func validationErrors(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		switch u, ok := e.(interface{ Unwrap() []error }); {
		case e == nil || e == gen.ErrInvalidResources: //nolint:errorlint // the sentinel itself is skipped, not every error that wraps it
		case ok:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		default:
			out = append(out, e)
		}
	}
	walk(err)
	return out
}

// setLocked is the client's state as a gen.Resources, with override
// replacing whole types.
func (c *adsClient) setLocked(override map[string]map[string]adsResource) gen.Resources {
	set := gen.Resources{}
	for _, typeURL := range []string{cdsType, edsType, ldsType, rdsType} {
		src := c.held[typeURL]
		if o, ok := override[typeURL]; ok {
			src = o
		}
		set[typeURL] = map[string]proto.Message{}
		for n, r := range src {
			set[typeURL][n] = r.Msg
		}
	}
	return set
}
