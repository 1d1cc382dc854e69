package integration

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	httprbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// The mesh the xDS and proxycfg scenarios run: 3 servers and one client
// agent hosting web (upstream api on 127.0.0.1:9191) and api, each with a
// sidecar, and helpers to change intentions, config entries and the CA
// and to read proxy-status.

// Bounds of the mesh scenarios.
const (
	// meshSettleTimeout bounds a stream receiving a complete configuration.
	meshSettleTimeout = 20 * time.Second
	// settleQuiet is how long a stream must stay silent to count as
	// settled.
	settleQuiet = 400 * time.Millisecond
	// endpointBudget is the bound from an instance registration to
	// the endpoint update on every affected stream.
	endpointBudget = time.Second
	// updateTimeout bounds other updates reaching a stream.
	updateTimeout = 10 * time.Second
	// noUpdateWindow is how long an unaffected stream must stay silent
	// after the affected ones got their update.
	noUpdateWindow = time.Second
	// apiBindPort is web's local bind port for its upstream api.
	apiBindPort = 9191
)

// mesh is a running mesh cluster.
type mesh struct {
	t      *testing.T
	ctx    context.Context
	rc     *rawClient
	c      *harness.Cluster
	leader *harness.Agent
	// client hosts the proxies; server is a follower that hosts none.
	client *harness.Agent
	server *harness.Agent
	// trustDomain is the CA's, for SNI and SPIFFE IDs.
	trustDomain string
}

// startMesh starts 3 servers and a client agent, registers web (upstream
// api) and api with sidecars on the client, and waits until both sidecars
// are in the catalog and api's sidecar is a healthy Connect endpoint.
func startMesh(t *testing.T) *mesh {
	t.Helper()
	ctx := scenarioContext(t)
	c, leader := startAgentCluster(t, agentClusterConfig{clients: 1})
	m := &mesh{t: t, ctx: ctx, rc: newRawClient(t), c: c, leader: leader, client: c.Clients()[0]}
	// Runs before the harness stops the agents.
	t.Cleanup(m.checkAgents)
	for _, s := range c.RunningServers() {
		if s != leader {
			m.server = s
			break
		}
	}
	eventually(t, 10*time.Second, "CA roots", func() error {
		r, err := m.roots()
		if err != nil {
			return err
		}
		if r.TrustDomain == "" || r.ActiveRootID == "" {
			return fmt.Errorf("no active root yet: %+v", r)
		}
		m.trustDomain = r.TrustDomain
		return nil
	})
	m.register(m.client, sidecarService("api", "api", 8081))
	m.register(m.client, sidecarService("web", "web", 8080, "api"))
	m.waitConnectEndpoints("api", 1)
	m.waitInCatalog("web-sidecar-proxy")
	t.Logf("mesh ready: client %s, server %s, trust domain %s", m.client.Node(), m.server.Node(), m.trustDomain)
	return m
}

// agentLogFailures are log lines no scenario may cause: a snapshot the
// generators cannot turn into Envoy config, a generated resource the ADS
// server cannot send, a crash, a data race (TRELLIS_BUILD_RACE=1).
var agentLogFailures = []string{"cannot generate Envoy config", "xds: dropping resource", "panic:", "WARNING: DATA RACE"}

// checkAgents fails the test if an agent crashed or logged one of
// agentLogFailures, and shows the xDS and proxycfg warnings of a failed
// test.
func (m *mesh) checkAgents() {
	if err := m.c.Crashed(); err != nil {
		m.t.Errorf("agents crashed: %v", err)
	}
	for _, a := range m.c.Agents() {
		logs, err := a.Logs()
		if err != nil {
			m.t.Error(err)
			continue
		}
		var warnings []string
		for _, line := range strings.Split(logs, "\n") {
			for _, bad := range agentLogFailures {
				if strings.Contains(line, bad) {
					m.t.Errorf("%s logged: %s", a.Node(), line)
				}
			}
			if (strings.Contains(line, "WARN") || strings.Contains(line, "ERROR")) &&
				(strings.Contains(line, "xds") || strings.Contains(line, "proxycfg")) {
				warnings = append(warnings, line)
			}
		}
		if m.t.Failed() && len(warnings) > 0 {
			const show = 10
			if len(warnings) > show {
				m.t.Logf("%s: %d xDS and proxycfg warnings, the last %d:", a.Node(), len(warnings), show)
				warnings = warnings[len(warnings)-show:]
			}
			for _, w := range warnings {
				m.t.Logf("%s: %s", a.Node(), w)
			}
		}
	}
}

// phase marks the start of a part of a scenario in the test log. The
// scenarios run their parts in sequence on one test (not as subtests):
// the mesh and its streams belong to the test and fail it.
func phase(t *testing.T, name string) {
	t.Helper()
	t.Logf("=== %s", name)
}

// sidecarService is an agent service definition with a sidecar whose
// upstreams are the given services, bound on 127.0.0.1 from apiBindPort
// on. The sidecar gets a passing TTL check instead of Consul's default
// TCP check of its port: no Envoy listens there, and a critical sidecar
// is no endpoint.
func sidecarService(id, name string, port int, upstreams ...string) map[string]any {
	sc := map[string]any{
		"Checks": []any{map[string]any{"Name": "envoy ready", "TTL": "10m", "Status": "passing"}},
	}
	var ups []any
	for i, u := range upstreams {
		ups = append(ups, map[string]any{"DestinationName": u, "LocalBindPort": apiBindPort + i})
	}
	if len(ups) > 0 {
		sc["Proxy"] = map[string]any{"Upstreams": ups}
	}
	return map[string]any{"ID": id, "Name": name, "Port": port, "Connect": map[string]any{"SidecarService": sc}}
}

// register registers a service on an agent.
func (m *mesh) register(a *harness.Agent, def map[string]any) {
	m.t.Helper()
	if err := registerService(m.ctx, m.rc, a.HTTPAddr(), def); err != nil {
		m.t.Fatalf("register %v on %s: %v", def["ID"], a.Node(), err)
	}
}

// waitConnectEndpoints waits until a server lists n passing Connect
// endpoints of a service.
func (m *mesh) waitConnectEndpoints(service string, n int) {
	m.t.Helper()
	eventually(m.t, syncTimeout, "connect endpoints of "+service, func() error {
		entries, err := healthService(m.ctx, m.rc, m.server.HTTPAddr(), "connect", service, passingQuery)
		if err != nil {
			return err
		}
		if len(entries) != n {
			return fmt.Errorf("%d passing endpoints, want %d: %s", len(entries), n, describeEntries(entries))
		}
		return nil
	})
}

// waitInCatalog waits until a server's catalog has a service ID on the
// client's node.
func (m *mesh) waitInCatalog(serviceID string) {
	m.t.Helper()
	eventually(m.t, syncTimeout, serviceID+" in the catalog", func() error {
		ids, err := catalogNodeServices(m.ctx, m.rc, m.server.HTTPAddr(), m.client.Node())
		if err != nil {
			return err
		}
		if !slices.Contains(ids, serviceID) {
			return fmt.Errorf("catalog node %s has %v", m.client.Node(), ids)
		}
		return nil
	})
}

// intention writes an exact intention (PUT /v1/connect/intentions/exact).
func (m *mesh) intention(source, destination, action string) {
	m.t.Helper()
	q := url.Values{"source": {source}, "destination": {destination}}
	if err := m.rc.putTrue(m.ctx, m.leader.HTTPAddr(), "/v1/connect/intentions/exact?"+q.Encode(), jsonBody(m.t, map[string]any{"Action": action})); err != nil {
		m.t.Fatalf("intention %s -> %s: %v", source, destination, err)
	}
}

// configEntry writes a config entry (PUT /v1/config).
func (m *mesh) configEntry(entry map[string]any) {
	m.t.Helper()
	if err := m.rc.putTrue(m.ctx, m.leader.HTTPAddr(), "/v1/config", jsonBody(m.t, entry)); err != nil {
		m.t.Fatalf("config entry %v/%v: %v", entry["Kind"], entry["Name"], err)
	}
}

// rotateCA changes the CA's key type, which makes a new root.
func (m *mesh) rotateCA(keyType string, bits int) {
	m.t.Helper()
	body := map[string]any{"Provider": "consul", "Config": map[string]any{"PrivateKeyType": keyType, "PrivateKeyBits": bits}}
	if err := agentPutOK(m.ctx, m.rc, m.leader.HTTPAddr(), "/v1/connect/ca/configuration", body); err != nil {
		m.t.Fatalf("CA configuration: %v", err)
	}
}

// caRoots is GET /v1/connect/ca/roots.
type caRoots struct {
	ActiveRootID string
	TrustDomain  string
	Roots        []struct {
		ID       string
		RootCert string
		Active   bool
	}
}

func (m *mesh) roots() (caRoots, error) {
	var out caRoots
	_, err := m.rc.getJSON(m.ctx, m.leader.HTTPAddr(), "/v1/connect/ca/roots", &out)
	return out, err
}

// activeRoot returns the active root certificate.
func (r caRoots) activeRoot() (*x509.Certificate, error) {
	for _, root := range r.Roots {
		if root.ID == r.ActiveRootID {
			return parseCert(root.RootCert)
		}
	}
	return nil, fmt.Errorf("active root %s not listed", r.ActiveRootID)
}

func parseCert(pemText string) (*x509.Certificate, error) {
	b, _ := pem.Decode([]byte(pemText))
	if b == nil {
		return nil, fmt.Errorf("no PEM block in %q", pemText)
	}
	return x509.ParseCertificate(b.Bytes)
}

// spiffeID is a service's identity in the mesh.
func (m *mesh) spiffeID(service string) string {
	return fmt.Sprintf("spiffe://%s/ns/default/dc/dc1/svc/%s", m.trustDomain, service)
}

// sni is the SNI (and cluster name) of a service's default target.
func (m *mesh) sni(service string) string {
	return fmt.Sprintf("%s.default.dc1.internal.%s", service, m.trustDomain)
}

// checkLeaf verifies that a leaf chain is service's identity, signed by
// root.
func (m *mesh) checkLeaf(chainPEM, service string, root *x509.Certificate) error {
	leaf, err := parseCert(chainPEM)
	if err != nil {
		return err
	}
	var uris []string
	for _, u := range leaf.URIs {
		uris = append(uris, u.String())
	}
	if !slices.Contains(uris, m.spiffeID(service)) {
		return fmt.Errorf("leaf URIs %v, want %s", uris, m.spiffeID(service))
	}
	if err := leaf.CheckSignatureFrom(root); err != nil {
		return fmt.Errorf("leaf %s not signed by the active root: %w", leaf.SerialNumber, err)
	}
	return nil
}

// proxyStream is one element of GET /v1/agent/proxy-status/<id>.
type proxyStream struct {
	StreamID uint64
	ProxyID  string
	Node     string
	Protocol string
	State    string
	Types    []proxyTypeStatus
}

type proxyTypeStatus struct {
	TypeURL           string
	LastSentVersion   string
	LastSentNonce     string
	LastAckedVersion  string
	LastNackedVersion string
	LastNackError     string
	LastNackCode      int32
	Pending           bool
	Suppressed        bool
	Wildcard          bool
	Subscribed        int
	Held              int
}

func (s proxyStream) typeStatus(typeURL string) (proxyTypeStatus, bool) {
	for _, ts := range s.Types {
		if ts.TypeURL == typeURL {
			return ts, true
		}
	}
	return proxyTypeStatus{}, false
}

// proxyStatus reads an agent's proxy-status for a proxy.
func (m *mesh) proxyStatus(a *harness.Agent, proxyID string) ([]proxyStream, error) {
	var out []proxyStream
	_, err := m.rc.getJSON(m.ctx, a.HTTPAddr(), "/v1/agent/proxy-status/"+url.PathEscape(proxyID), &out)
	return out, err
}

// streamStatus returns the agent's only stream of a proxy with the
// client's protocol.
func (m *mesh) streamStatus(a *harness.Agent, c *adsClient) (proxyStream, error) {
	all, err := m.proxyStatus(a, c.cfg.ProxyID)
	if err != nil {
		return proxyStream{}, err
	}
	var found []proxyStream
	for _, s := range all {
		if s.Protocol == c.cfg.Protocol {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return proxyStream{}, fmt.Errorf("%s lists %d %s streams of %s: %+v", a.Node(), len(found), c.cfg.Protocol, c.cfg.ProxyID, all)
	}
	return found[0], nil
}

// statusMatches checks an agent's bookkeeping of a stream against what
// the client received and answered: per type, the latest nonce sent is
// the latest the client got, nothing is pending once the client answered,
// the acknowledged version is the one the client accepted last, and the
// rejected version and error text are those of the client's last NACK.
func statusMatches(st proxyStream, v adsView) error {
	var errs []string
	for typeURL, a := range v.Acks {
		if a.LastNonce == "" {
			continue
		}
		ts, ok := st.typeStatus(typeURL)
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: not listed", shortType(typeURL)))
			continue
		}
		if ts.LastSentNonce != a.LastNonce || ts.Pending {
			errs = append(errs, fmt.Sprintf("%s: last sent nonce %q pending %v, client answered %q", shortType(typeURL), ts.LastSentNonce, ts.Pending, a.LastNonce))
		}
		if ts.LastAckedVersion != a.AckedVersion {
			errs = append(errs, fmt.Sprintf("%s: acked version %q, client acked %q", shortType(typeURL), ts.LastAckedVersion, a.AckedVersion))
		}
		if ts.LastNackedVersion != a.NackedVersion || ts.LastNackError != a.NackError {
			errs = append(errs, fmt.Sprintf("%s: nacked %q (%q), client nacked %q (%q)", shortType(typeURL), ts.LastNackedVersion, ts.LastNackError, a.NackedVersion, a.NackError))
		}
		if a.NackError != "" && ts.LastNackCode != nackCode {
			errs = append(errs, fmt.Sprintf("%s: NACK code %d, client sent %d", shortType(typeURL), ts.LastNackCode, nackCode))
		}
		if a.LastNonce == a.NackedNonce != ts.Suppressed {
			errs = append(errs, fmt.Sprintf("%s: suppressed %v after the client's last answer (nack %v)", shortType(typeURL), ts.Suppressed, a.LastNonce == a.NackedNonce))
		}
		if want := len(v.Held[typeURL]); isCoreType(typeURL) && ts.Held != want {
			errs = append(errs, fmt.Sprintf("%s: server thinks the client holds %d, it holds %d", shortType(typeURL), ts.Held, want))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stream %d: %s", st.StreamID, strings.Join(errs, "; "))
	}
	return nil
}

// waitStatusMatches polls an agent's proxy-status until it matches the
// client's view (the client's last answer may still be in flight).
func (m *mesh) waitStatusMatches(a *harness.Agent, c *adsClient) proxyStream {
	m.t.Helper()
	var st proxyStream
	eventually(m.t, 5*time.Second, c.cfg.Label+" proxy-status", func() error {
		var err error
		if st, err = m.streamStatus(a, c); err != nil {
			return err
		}
		if st.State != "serving" || st.ProxyID != c.cfg.ProxyID {
			return fmt.Errorf("stream %+v, want serving %s", st, c.cfg.ProxyID)
		}
		return statusMatches(st, c.view())
	})
	return st
}

// publicListener returns the proxy's public listener.
func publicListener(v adsView) (*listenerv3.Listener, error) {
	for name, r := range v.Held[ldsType] {
		if strings.HasPrefix(name, "public_listener:") {
			return r.Msg.(*listenerv3.Listener), nil
		}
	}
	return nil, fmt.Errorf("no public listener among %v", v.names(ldsType))
}

// publicRBAC summarises the RBAC rules of the public listener (network
// RBAC for TCP, HTTP RBAC for HTTP services) as "ACTION policy=[sources]"
// with the sources each policy's principals match ("!x" for NOT x).
func publicRBAC(v adsView) (string, error) {
	l, err := publicListener(v)
	if err != nil {
		return "", err
	}
	var rules []*rbacv3.RBAC
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			net, hcm := &netrbacv3.RBAC{}, &hcmv3.HttpConnectionManager{}
			switch tc := f.GetTypedConfig(); {
			case tc.MessageIs(net):
				if err := tc.UnmarshalTo(net); err != nil {
					return "", err
				}
				rules = append(rules, net.GetRules())
			case tc.MessageIs(hcm):
				if err := tc.UnmarshalTo(hcm); err != nil {
					return "", err
				}
				for _, hf := range hcm.GetHttpFilters() {
					h := &httprbacv3.RBAC{}
					if hf.GetTypedConfig().MessageIs(h) {
						if err := hf.GetTypedConfig().UnmarshalTo(h); err != nil {
							return "", err
						}
						rules = append(rules, h.GetRules())
					}
				}
			}
		}
	}
	if len(rules) != 1 {
		return "", fmt.Errorf("listener %s has %d RBAC filters, want 1", l.GetName(), len(rules))
	}
	r := rules[0]
	out := []string{r.GetAction().String()}
	for _, name := range slices.Sorted(maps.Keys(r.GetPolicies())) {
		var srcs []string
		for _, p := range r.GetPolicies()[name].GetPrincipals() {
			srcs = append(srcs, principalSources(p))
		}
		out = append(out, fmt.Sprintf("%s=[%s]", name, strings.Join(srcs, " ")))
	}
	return strings.Join(out, " "), nil
}

// spiffeSource extracts the service from a principal's SPIFFE regex.
var spiffeSource = regexp.MustCompile(`/svc/(.+)\$$`)

func principalSources(p *rbacv3.Principal) string {
	switch id := p.GetIdentifier().(type) {
	case *rbacv3.Principal_Authenticated_:
		re := id.Authenticated.GetPrincipalName().GetSafeRegex().GetRegex()
		if m := spiffeSource.FindStringSubmatch(re); m != nil {
			if m[1] == "[^/]+" {
				return "*"
			}
			return regexp.MustCompile(`\\(.)`).ReplaceAllString(m[1], "$1")
		}
		return "?" + re
	case *rbacv3.Principal_NotId:
		return "!" + principalSources(id.NotId)
	case *rbacv3.Principal_AndIds:
		var parts []string
		for _, x := range id.AndIds.GetIds() {
			parts = append(parts, principalSources(x))
		}
		return strings.Join(parts, "&")
	case *rbacv3.Principal_Any:
		return "any"
	}
	return fmt.Sprintf("?%T", p.GetIdentifier())
}

// endpointCount counts the endpoints of an assignment the client holds
// (-1 when it holds none by that name).
func endpointCount(v adsView, name string) int {
	r, ok := v.Held[edsType][name]
	if !ok {
		return -1
	}
	n := 0
	for _, l := range r.Msg.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
		n += len(l.GetLbEndpoints())
	}
	return n
}

// routeClusters lists, per route configuration the client holds, the
// clusters its routes send to (weighted ones as name:weight).
func routeClusters(v adsView, name string) ([]string, error) {
	r, ok := v.Held[rdsType][name]
	if !ok {
		return nil, fmt.Errorf("no route configuration %q among %v", name, v.names(rdsType))
	}
	var out []string
	for _, vh := range r.Msg.(*routev3.RouteConfiguration).GetVirtualHosts() {
		for _, rt := range vh.GetRoutes() {
			switch cs := rt.GetRoute().GetClusterSpecifier().(type) {
			case *routev3.RouteAction_Cluster:
				out = append(out, cs.Cluster)
			case *routev3.RouteAction_WeightedClusters:
				for _, c := range cs.WeightedClusters.GetClusters() {
					out = append(out, fmt.Sprintf("%s:%d", c.GetName(), c.GetWeight().GetValue()))
				}
			}
		}
	}
	return out, nil
}

// sameConfig compares two clients' configurations: the same resource
// names of every type and the same content. Clients of different agents
// hold different leaf certificates (each agent signs its own leaf for a
// proxy, as Consul's agents do), so across agents resources are compared
// with their TLS certificates blanked, and resources without one must
// also carry the same server version. It returns the names of resources
// that differ only in their leaf.
func sameConfig(a, b adsView, sameAgent bool) (leafOnly []string, err error) {
	var errs []string
	for _, typeURL := range []string{cdsType, edsType, ldsType, rdsType} {
		an, bn := a.names(typeURL), b.names(typeURL)
		if !slices.Equal(an, bn) {
			errs = append(errs, fmt.Sprintf("%s names %v vs %v", shortType(typeURL), an, bn))
			continue
		}
		for _, n := range an {
			ra, rb := a.Held[typeURL][n], b.Held[typeURL][n]
			if ra.Content == rb.Content {
				if ra.Version != "" && rb.Version != "" && ra.Version != rb.Version {
					errs = append(errs, fmt.Sprintf("%s %q: same content, versions %s vs %s", shortType(typeURL), n, ra.Version, rb.Version))
				}
				continue
			}
			if sameAgent || contentHash(withoutLeaf(ra.Msg)) != contentHash(withoutLeaf(rb.Msg)) {
				errs = append(errs, fmt.Sprintf("%s %q differs", shortType(typeURL), n))
				continue
			}
			leafOnly = append(leafOnly, shortType(typeURL)+"/"+n)
		}
	}
	if len(errs) > 0 {
		return leafOnly, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return leafOnly, nil
}
