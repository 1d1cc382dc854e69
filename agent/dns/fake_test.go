package dns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/trellis-mesh/trellis/integration/harness"
	"github.com/trellis-mesh/trellis/structs"
)

// fakeCatalog answers the three reads the DNS server makes from fixed
// data, the way the servers do: services by name (case-insensitive),
// filtered by tag.
type fakeCatalog struct {
	nodes []*structs.Node
	// instances by "<kind>:<name>", kind being service, connect or ingress.
	instances map[string]structs.CheckServiceNodes
	// queries maps a prepared query's name to what executing it answers
	// (its Nodes are the instances of its Service).
	queries map[string]structs.PreparedQueryExecuteResponse
	// virtualIPs by service name.
	virtualIPs map[string]string
	// lastContact is reported by stale reads.
	lastContact time.Duration

	mu sync.Mutex
	// calls is guarded by mu: the AllowStale of every read, in order.
	calls []bool
}

var errRPCFailed = errors.New("rpc failed")

func (f *fakeCatalog) RPC(_ context.Context, method string, args, reply any) error {
	meta := func(q *structs.QueryOptions, m *structs.QueryMeta) {
		f.mu.Lock()
		f.calls = append(f.calls, q.AllowStale)
		f.mu.Unlock()
		if q.AllowStale {
			m.LastContact = f.lastContact
		}
	}
	switch method {
	case structs.MethodHealthServiceNodes.Name():
		a, r := args.(*structs.ServiceSpecificRequest), reply.(*structs.IndexedCheckServiceNodes)
		meta(&a.QueryOptions, &r.QueryMeta)
		if a.ServiceName == "broken" {
			return errRPCFailed
		}
		kind := "service"
		if a.Connect {
			kind = "connect"
		} else if a.Ingress {
			kind = "ingress"
		}
		for _, n := range f.instances[kind+":"+strings.ToLower(a.ServiceName)] {
			if a.TagFilter && !hasTag(n.Service.Tags, a.ServiceTags[0]) {
				continue
			}
			r.Nodes = append(r.Nodes, n)
		}
	case structs.MethodCatalogNodeServices.Name():
		a, r := args.(*structs.NodeSpecificRequest), reply.(*structs.IndexedNodeServices)
		meta(&a.QueryOptions, &r.QueryMeta)
		for _, n := range f.nodes {
			if strings.EqualFold(n.Node, a.Node) {
				r.NodeServices = &structs.NodeServices{Node: n}
			}
		}
	case structs.MethodPreparedQueryExecute.Name():
		a, r := args.(*structs.PreparedQueryExecuteRequest), reply.(*structs.PreparedQueryExecuteResponse)
		meta(&a.QueryOptions, &r.QueryMeta)
		q, ok := f.queries[strings.ToLower(a.QueryIDOrName)]
		if !ok {
			return structs.ErrQueryNotFound
		}
		*r = q
		r.Nodes = f.instances["service:"+q.Service]
	case structs.MethodCatalogVirtualIPForService.Name():
		a, r := args.(*structs.ServiceSpecificRequest), reply.(*structs.IndexedServiceVirtualIP)
		meta(&a.QueryOptions, &r.QueryMeta)
		if ip, ok := f.virtualIPs[strings.ToLower(a.ServiceName)]; ok {
			r.VirtualIP = &structs.ServiceVirtualIP{Service: a.ServiceName, IP: ip}
		}
	case structs.MethodCatalogListNodes.Name():
		a, r := args.(*structs.DCSpecificRequest), reply.(*structs.IndexedNodes)
		meta(&a.QueryOptions, &r.QueryMeta)
		r.Nodes = f.nodes
	default:
		return fmt.Errorf("fake: unexpected %s", method)
	}
	return nil
}

func (f *fakeCatalog) staleCalls() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.calls...)
}

func hasTag(tags []string, want string) bool {
	for _, t := range tags {
		if strings.EqualFold(t, want) {
			return true
		}
	}
	return false
}

// instance builds one instance with one check per status.
func instance(node *structs.Node, svc *structs.NodeService, statuses ...string) structs.CheckServiceNode {
	n := structs.CheckServiceNode{Node: node, Service: svc}
	for i, st := range statuses {
		n.Checks = append(n.Checks, &structs.HealthCheck{Node: node.Node, CheckID: fmt.Sprint("c", i), Status: st})
	}
	return n
}

func newFixture() *fakeCatalog {
	n1 := &structs.Node{Node: "n1", Address: "10.0.0.1", Meta: map[string]string{"rack": "r1", "rfc1035-note": "hello"}}
	n2 := &structs.Node{Node: "N2", Address: "10.0.0.2"}
	n3 := &structs.Node{Node: "n3", Address: "2001:db8::3"}
	pass, warn, crit := structs.HealthPassing, structs.HealthWarning, structs.HealthCritical
	f := &fakeCatalog{
		nodes:      []*structs.Node{n1, n2, n3},
		virtualIPs: map[string]string{"web": "240.0.0.1"},
		queries: map[string]structs.PreparedQueryExecuteResponse{
			"q1":     {Service: "web"},
			"db-ttl": {Service: "db", DNS: structs.QueryDNSOptions{TTL: "42s"}},
		},
		instances: map[string]structs.CheckServiceNodes{
			"service:web": {
				instance(n1, &structs.NodeService{ID: "web1", Service: "web", Tags: []string{"v1"}, Port: 80}, pass),
				instance(n2, &structs.NodeService{ID: "web2", Service: "web", Tags: []string{"v2"}, Port: 81,
					Weights: &structs.Weights{Passing: 10, Warning: 3}}, pass, warn),
				instance(n3, &structs.NodeService{ID: "web3", Service: "web", Port: 82}, crit),
			},
			"service:db": {
				instance(n1, &structs.NodeService{ID: "db1", Service: "db", Address: "10.1.1.1", Port: 5432}),
			},
			"service:v6": {
				instance(n3, &structs.NodeService{ID: "v61", Service: "v6", Port: 90}),
			},
			"service:api": {
				instance(n2, &structs.NodeService{ID: "api1", Service: "api", Address: "api.example.com", Port: 443}),
			},
			"service:down": {
				instance(n1, &structs.NodeService{ID: "down1", Service: "down", Port: 1}, structs.HealthMaint),
			},
			"connect:web": {
				instance(n1, &structs.NodeService{Kind: structs.ServiceKindConnectProxy, ID: "web1-sidecar-proxy",
					Service: "web-sidecar-proxy", Port: 21000}, pass),
			},
			"ingress:web": {
				instance(n2, &structs.NodeService{Kind: structs.ServiceKindIngressGateway, ID: "ingress", Service: "ingress", Port: 8080}),
			},
		},
	}
	for i := range 20 {
		n := &structs.Node{Node: fmt.Sprintf("m%02d", i), Address: fmt.Sprintf("10.2.0.%d", i+1)}
		f.nodes = append(f.nodes, n)
		f.instances["service:many"] = append(f.instances["service:many"],
			instance(n, &structs.NodeService{ID: "many", Service: "many", Port: 7000 + i}, pass))
	}
	return f
}

// startServer runs a Server over rpc on a free loopback port (free for
// both UDP and TCP) and returns its address.
func startServer(t *testing.T, rpc structs.Caller, edit func(*Config)) string {
	t.Helper()
	cfg := Config{RPC: rpc, Datacenter: "dc1", Domain: "consul.", AltDomain: "alt.", AllowStale: true,
		MaxStale: time.Hour, UDPAnswerLimit: 3, NodeMetaTXT: true,
		SOA: SOA{Refresh: 3600, Retry: 600, Expire: 86400}}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	addr := freeAddr(t)
	if err := s.ListenAndServe(addr); err != nil {
		t.Fatal(err)
	}
	return addr
}

// freeAddr is a loopback address whose port is free for UDP and TCP.
func freeAddr(t *testing.T) string {
	t.Helper()
	ports, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ports.Port()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p)
}

// exchange asks addr one question over network, with EDNS0 when edns > 0.
func exchange(t *testing.T, addr, network, name string, qtype uint16, edns uint16) *mdns.Msg {
	t.Helper()
	m := new(mdns.Msg).SetQuestion(name, qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &mdns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, mdns.TypeToString[qtype], network, err)
	}
	return r
}

// rrText is a record without its TTL and class: "name TYPE rdata".
func rrText(rr mdns.RR) string {
	h := rr.Header()
	return h.Name + " " + mdns.TypeToString[h.Rrtype] + " " + strings.TrimPrefix(rr.String(), h.String())
}

func rrTexts(rrs []mdns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		if rr.Header().Rrtype == mdns.TypeOPT {
			continue
		}
		out = append(out, rrText(rr))
	}
	return out
}
