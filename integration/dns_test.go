package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// manyInstances is how many instances of "many" the DNS scenario
// registers: more A records than a 512-byte UDP reply's three.
const manyInstances = 20

// TestDNSInterface: 3 servers and a client agent, each serving DNS on its
// own port. Services registered on the client are answered by the client
// (reads through its router) and by a server, over UDP and TCP, for every
// name form; an instance whose check turns critical leaves the answers; a
// UDP answer with more instances than fit is truncated with TC set
// (enable_truncate) and the same question over TCP gets all of them.
func TestDNSInterface(t *testing.T) {
	dnsConfig := map[string]any{"dns_config": map[string]any{"enable_truncate": true}}
	c, leader := startAgentCluster(t, agentClusterConfig{clients: 1, clientConfig: dnsConfig})
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	client := c.Clients()[0]

	svc := func(def map[string]any) {
		t.Helper()
		if err := registerService(ctx, rc, client.HTTPAddr(), def); err != nil {
			t.Fatal(err)
		}
	}
	svc(map[string]any{"Name": "web", "ID": "web1", "Address": "127.0.0.11", "Port": 8080, "Tags": []string{"v1"}})
	svc(map[string]any{"Name": "web", "ID": "web2", "Address": "127.0.0.12", "Port": 8081, "Tags": []string{"v2"},
		"Check": map[string]any{"CheckID": "web2-ttl", "TTL": "10m"}})
	svc(map[string]any{"Kind": "connect-proxy", "Name": "web-proxy", "ID": "web-proxy", "Address": "127.0.0.21", "Port": 21000,
		"Proxy": map[string]any{"DestinationServiceName": "web", "DestinationServiceID": "web1"}})
	svc(map[string]any{"Kind": "ingress-gateway", "Name": "ingress", "ID": "ingress", "Address": "127.0.0.31", "Port": 8443})
	if err := rc.putTrue(ctx, leader.HTTPAddr(), "/v1/config", jsonBody(t, map[string]any{
		"Kind": "ingress-gateway", "Name": "ingress",
		"Listeners": []any{map[string]any{"Port": 8443, "Protocol": "tcp", "Services": []any{map[string]any{"Name": "web"}}}},
	})); err != nil {
		t.Fatal(err)
	}
	for i := range manyInstances {
		svc(map[string]any{"Name": "many", "ID": fmt.Sprint("many", i), "Address": fmt.Sprintf("127.0.1.%d", i+1), "Port": 9000 + i})
	}
	if err := agentPutOK(ctx, rc, client.HTTPAddr(), "/v1/agent/check/pass/web2-ttl", nil); err != nil {
		t.Fatal(err)
	}

	server := c.Servers()[1]
	askers := []*harness.Agent{client, server}
	cases := []struct {
		q      string
		qtype  uint16
		rcode  int
		answer []string // sorted, "TYPE rdata"
	}{
		{"web.service.consul.", dns.TypeA, dns.RcodeSuccess, []string{"A 127.0.0.11", "A 127.0.0.12"}},
		{"WEB.SERVICE.Consul.", dns.TypeA, dns.RcodeSuccess, []string{"A 127.0.0.11", "A 127.0.0.12"}},
		{"v2.web.service.consul.", dns.TypeA, dns.RcodeSuccess, []string{"A 127.0.0.12"}},
		{"web.service.dc1.consul.", dns.TypeA, dns.RcodeSuccess, []string{"A 127.0.0.11", "A 127.0.0.12"}},
		{"_web._v1.service.consul.", dns.TypeSRV, dns.RcodeSuccess, []string{"SRV 1 1 8080 7f00000b.addr.dc1.consul."}},
		{"_web._tcp.service.consul.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 1 1 8080 7f00000b.addr.dc1.consul.", "SRV 1 1 8081 7f00000c.addr.dc1.consul."}},
		{"7f00000b.addr.dc1.consul.", dns.TypeA, dns.RcodeSuccess, []string{"A 127.0.0.11"}},
		{"web.connect.consul.", dns.TypeSRV, dns.RcodeSuccess, []string{"SRV 1 1 21000 7f000015.addr.dc1.consul."}},
		{"web.ingress.consul.", dns.TypeA, dns.RcodeSuccess, []string{"A 127.0.0.31"}},
		{client.Node() + ".node.consul.", dns.TypeA, dns.RcodeSuccess, []string{"A 127.0.0.1"}},
		{server.Node() + ".node.dc1.consul.", dns.TypeA, dns.RcodeSuccess, []string{"A 127.0.0.1"}},
		{"nope.node.consul.", dns.TypeA, dns.RcodeNameError, nil},
		{"nope.service.consul.", dns.TypeA, dns.RcodeNameError, nil},
		{"web.service.dc2.consul.", dns.TypeA, dns.RcodeNameError, nil},
		{"q.query.consul.", dns.TypeA, dns.RcodeNameError, nil},
		{"example.org.", dns.TypeA, dns.RcodeRefused, nil},
	}
	for _, a := range askers {
		for _, network := range []string{"udp", "tcp"} {
			for _, tc := range cases {
				what := fmt.Sprintf("%s %s over %s from %s", tc.q, dns.TypeToString[tc.qtype], network, a.Node())
				eventually(t, syncTimeout, what, func() error {
					r, err := ask(ctx, a, network, tc.q, tc.qtype, 0)
					if err != nil {
						return err
					}
					if r.Rcode != tc.rcode {
						return fmt.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
					}
					if got := rdata(r.Answer); !slices.Equal(got, tc.answer) {
						return fmt.Errorf("answer %q, want %q", got, tc.answer)
					}
					if r.Rcode == dns.RcodeNameError && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA) {
						return fmt.Errorf("NXDOMAIN without an SOA: %v", r.Ns)
					}
					return nil
				})
			}
		}
	}

	// The PTR of 127.0.0.1 names every node (they all run there).
	r, err := ask(ctx, client, "udp", "1.0.0.127.in-addr.arpa.", dns.TypePTR, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if got := rdata(r.Answer); !slices.Contains(got, "PTR "+client.Node()+".node.dc1.consul.") || len(got) != len(c.Agents()) {
		t.Errorf("PTR answer %q", got)
	}

	// A critical instance disappears from every answer, and comes back.
	for _, step := range []struct {
		path string
		want []string
	}{
		{"/v1/agent/check/fail/web2-ttl", []string{"A 127.0.0.11"}},
		{"/v1/agent/check/pass/web2-ttl", []string{"A 127.0.0.11", "A 127.0.0.12"}},
	} {
		if err := agentPutOK(ctx, rc, client.HTTPAddr(), step.path, nil); err != nil {
			t.Fatal(err)
		}
		for _, a := range askers {
			eventually(t, syncTimeout, step.path+" seen by DNS of "+a.Node(), func() error {
				r, err := ask(ctx, a, "udp", "web.service.consul.", dns.TypeA, 0)
				if err != nil {
					return err
				}
				if got := rdata(r.Answer); !slices.Equal(got, step.want) {
					return fmt.Errorf("answer %q, want %q", got, step.want)
				}
				return nil
			})
		}
	}

	// Truncation: the client has enable_truncate, the server does not.
	eventually(t, syncTimeout, "every instance of many over TCP", func() error {
		r, err := ask(ctx, client, "tcp", "many.service.consul.", dns.TypeSRV, 0)
		if err != nil {
			return err
		}
		if len(r.Answer) != manyInstances || r.Truncated || len(rdata(r.Extra)) != manyInstances {
			return fmt.Errorf("%d answers, %d additional, TC %v", len(r.Answer), len(r.Extra), r.Truncated)
		}
		return nil
	})
	for _, tc := range []struct {
		asker *harness.Agent
		qtype uint16
		edns  uint16
		max   int
		tc    bool
	}{
		{client, dns.TypeA, 0, 3, true},
		{client, dns.TypeSRV, 0, 3, true},
		{client, dns.TypeSRV, 1232, manyInstances - 1, true},
		{client, dns.TypeA, 4096, manyInstances, false},
		{server, dns.TypeA, 0, 3, false},
	} {
		r, err := ask(ctx, tc.asker, "udp", "many.service.consul.", tc.qtype, tc.edns)
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("%s over UDP from %s (EDNS0 %d)", dns.TypeToString[tc.qtype], tc.asker.Node(), tc.edns)
		if n := len(r.Answer); n == 0 || n > tc.max || r.Truncated != tc.tc {
			t.Errorf("%s: %d answers (at most %d), TC %v (want %v)", what, n, tc.max, r.Truncated, tc.tc)
		}
	}
	// miekg's client retries a truncated UDP answer over TCP when asked
	// to, as resolvers do: the fallback gets the whole answer.
	r, err = ask(ctx, client, "udp", "many.service.consul.", dns.TypeA, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Truncated {
		r, err = ask(ctx, client, "tcp", "many.service.consul.", dns.TypeA, 0)
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(r.Answer) != manyInstances || r.Truncated {
		t.Errorf("after TCP fallback: %d answers, TC %v", len(r.Answer), r.Truncated)
	}
}

// ask sends one question to a's DNS port.
func ask(ctx context.Context, a *harness.Agent, network, name string, qtype, edns uint16) (*dns.Msg, error) {
	m := new(dns.Msg).SetQuestion(name, qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.ExchangeContext(ctx, m, a.DNSAddr())
	if err != nil {
		return nil, fmt.Errorf("%s %s over %s to %s: %w", name, dns.TypeToString[qtype], network, a.Node(), err)
	}
	return r, nil
}

// rdata lists records as "TYPE rdata", sorted (answers are shuffled),
// leaving out OPT.
func rdata(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		h := rr.Header()
		if h.Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, dns.TypeToString[h.Rrtype]+" "+strings.TrimPrefix(rr.String(), h.String()))
	}
	slices.Sort(out)
	return out
}
