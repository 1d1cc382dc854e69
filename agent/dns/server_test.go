package dns

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/trellis-mesh/trellis/structs"
)

// TestNameForms asks every name form Consul answers, over UDP, and
// compares the sections (order-free: instances are shuffled).
func TestNameForms(t *testing.T) {
	const (
		nx   = mdns.RcodeNameError
		ok   = mdns.RcodeSuccess
		soa  = "consul. SOA ns.consul. hostmaster.consul."
		alt  = "alt. SOA ns.alt. hostmaster.alt."
		none = ""
	)
	for _, tc := range []struct {
		name   string
		q      string
		qtype  uint16
		edit   func(*Config)
		rcode  int
		answer []string
		extra  []string
		ns     string // the start of the one authority record, "" for none
	}{
		{name: "service A: critical instance left out", q: "web.service.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"web.service.consul. A 10.0.0.1", "web.service.consul. A 10.0.0.2"}},
		{name: "names are case-insensitive", q: "WEB.Service.CONSUL.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"WEB.Service.CONSUL. A 10.0.0.1", "WEB.Service.CONSUL. A 10.0.0.2"}},
		{name: "tag", q: "v1.web.service.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"v1.web.service.consul. A 10.0.0.1"}},
		{name: "unknown tag", q: "v9.web.service.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "only_passing drops warning", q: "web.service.consul.", qtype: mdns.TypeA, rcode: ok,
			edit:   func(c *Config) { c.OnlyPassing = true },
			answer: []string{"web.service.consul. A 10.0.0.1"}},
		{name: "SRV with the node address and meta in additional", q: "web.service.consul.", qtype: mdns.TypeSRV, rcode: ok,
			answer: []string{"web.service.consul. SRV 1 1 80 n1.node.dc1.consul.", "web.service.consul. SRV 1 3 81 n2.node.dc1.consul."},
			extra: []string{"n1.node.dc1.consul. A 10.0.0.1", `n1.node.dc1.consul. TXT "hello"`, `n1.node.dc1.consul. TXT "rack=r1"`,
				"n2.node.dc1.consul. A 10.0.0.2"}},
		{name: "SRV without node meta", q: "v2.web.service.consul.", qtype: mdns.TypeSRV, rcode: ok,
			edit:   func(c *Config) { c.NodeMetaTXT = false },
			answer: []string{"v2.web.service.consul. SRV 1 3 81 n2.node.dc1.consul."},
			extra:  []string{"n2.node.dc1.consul. A 10.0.0.2"}},
		{name: "RFC 2782 _tcp is every instance", q: "_web._tcp.service.consul.", qtype: mdns.TypeSRV, rcode: ok,
			edit: func(c *Config) { c.NodeMetaTXT = false },
			answer: []string{"_web._tcp.service.consul. SRV 1 1 80 n1.node.dc1.consul.",
				"_web._tcp.service.consul. SRV 1 3 81 n2.node.dc1.consul."},
			extra: []string{"n1.node.dc1.consul. A 10.0.0.1", "n2.node.dc1.consul. A 10.0.0.2"}},
		{name: "RFC 2782 tag", q: "_web._v1.service.consul.", qtype: mdns.TypeSRV, rcode: ok,
			edit:   func(c *Config) { c.NodeMetaTXT = false },
			answer: []string{"_web._v1.service.consul. SRV 1 1 80 n1.node.dc1.consul."},
			extra:  []string{"n1.node.dc1.consul. A 10.0.0.1"}},
		{name: "SRV with a service address", q: "db.service.consul.", qtype: mdns.TypeSRV, rcode: ok,
			answer: []string{"db.service.consul. SRV 1 1 5432 0a010101.addr.dc1.consul."},
			extra:  []string{"0a010101.addr.dc1.consul. A 10.1.1.1"}},
		{name: "service address A", q: "db.service.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"db.service.consul. A 10.1.1.1"}},
		{name: "service host name is a CNAME", q: "api.service.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"api.service.consul. CNAME api.example.com."}},
		{name: "AAAA of an IPv6 instance", q: "v6.service.consul.", qtype: mdns.TypeAAAA, rcode: ok,
			answer: []string{"v6.service.consul. AAAA 2001:db8::3"}},
		{name: "A of an IPv6-only service is no data", q: "v6.service.consul.", qtype: mdns.TypeA, rcode: ok, ns: soa},
		{name: "maintenance is left out", q: "down.service.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "addr", q: "0a010101.addr.dc1.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"0a010101.addr.dc1.consul. A 10.1.1.1"}},
		{name: "bad addr", q: "zz.addr.dc1.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "datacenter label", q: "web.service.dc1.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"web.service.dc1.consul. A 10.0.0.1", "web.service.dc1.consul. A 10.0.0.2"}},
		{name: "explicit dc label", q: "v1.web.service.dc1.dc.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"v1.web.service.dc1.dc.consul. A 10.0.0.1"}},
		{name: "other datacenter", q: "web.service.dc2.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "connect", q: "web.connect.consul.", qtype: mdns.TypeSRV, rcode: ok, edit: func(c *Config) { c.NodeMetaTXT = false },
			answer: []string{"web.connect.consul. SRV 1 1 21000 n1.node.dc1.consul."},
			extra:  []string{"n1.node.dc1.consul. A 10.0.0.1"}},
		{name: "ingress", q: "web.ingress.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"web.ingress.consul. A 10.0.0.2"}},
		{name: "connect of a service without endpoints", q: "db.connect.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "node", q: "n1.node.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"n1.node.consul. A 10.0.0.1"},
			extra:  []string{`n1.node.consul. TXT "hello"`, `n1.node.consul. TXT "rack=r1"`}},
		{name: "node in dc, any case", q: "n2.NODE.dc1.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"n2.NODE.dc1.consul. A 10.0.0.2"}},
		{name: "node TXT", q: "n1.node.consul.", qtype: mdns.TypeTXT, rcode: ok,
			answer: []string{`n1.node.consul. TXT "hello"`, `n1.node.consul. TXT "rack=r1"`}},
		{name: "node AAAA", q: "n3.node.consul.", qtype: mdns.TypeAAAA, rcode: ok,
			answer: []string{"n3.node.consul. AAAA 2001:db8::3"}},
		{name: "node AAAA of an IPv4 node is no data", q: "n2.node.consul.", qtype: mdns.TypeAAAA, rcode: ok, ns: soa},
		{name: "unknown node", q: "nope.node.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "unknown service", q: "nope.service.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "prepared query", q: "q1.query.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"q1.query.consul. A 10.0.0.1", "q1.query.consul. A 10.0.0.2"}},
		{name: "prepared query SRV", q: "Q1.query.dc1.consul.", qtype: mdns.TypeSRV, rcode: ok, edit: func(c *Config) { c.NodeMetaTXT = false },
			answer: []string{"Q1.query.dc1.consul. SRV 1 1 80 n1.node.dc1.consul.", "Q1.query.dc1.consul. SRV 1 3 81 n2.node.dc1.consul."},
			extra:  []string{"n1.node.dc1.consul. A 10.0.0.1", "n2.node.dc1.consul. A 10.0.0.2"}},
		{name: "unknown prepared query", q: "nope.query.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "virtual IP", q: "web.virtual.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"web.virtual.consul. A 240.0.0.1"}},
		{name: "virtual IP in the default namespace and partition", q: "Web.virtual.default.ns.default.ap.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"Web.virtual.default.ns.default.ap.consul. A 240.0.0.1"}},
		{name: "virtual IP in the default partition", q: "web.virtual.default.ap.consul.", qtype: mdns.TypeA, rcode: ok,
			answer: []string{"web.virtual.default.ap.consul. A 240.0.0.1"}},
		{name: "virtual IP AAAA is no data", q: "web.virtual.consul.", qtype: mdns.TypeAAAA, rcode: ok, ns: soa},
		{name: "service without a virtual IP is no data", q: "db.virtual.consul.", qtype: mdns.TypeA, rcode: ok, ns: soa},
		{name: "virtual IP of a peer", q: "web.virtual.p1.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "virtual IP of another namespace", q: "web.virtual.team.ns.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "no kind label", q: "web.consul.", qtype: mdns.TypeA, rcode: nx, ns: soa},
		{name: "apex SOA", q: "consul.", qtype: mdns.TypeSOA, rcode: ok, answer: []string{soa}},
		{name: "alt domain", q: "v2.web.service.alt.", qtype: mdns.TypeSRV, rcode: ok, edit: func(c *Config) { c.NodeMetaTXT = false },
			answer: []string{"v2.web.service.alt. SRV 1 3 81 n2.node.dc1.alt."},
			extra:  []string{"n2.node.dc1.alt. A 10.0.0.2"}},
		{name: "alt domain NXDOMAIN", q: "nope.service.alt.", qtype: mdns.TypeA, rcode: nx, ns: alt},
		{name: "custom domain", q: "web.service.example.", qtype: mdns.TypeA, rcode: ok, edit: func(c *Config) { c.Domain = "Example" },
			answer: []string{"web.service.example. A 10.0.0.1", "web.service.example. A 10.0.0.2"}},
		{name: "PTR of a node address", q: "1.0.0.10.in-addr.arpa.", qtype: mdns.TypePTR, rcode: ok,
			answer: []string{"1.0.0.10.in-addr.arpa. PTR n1.node.dc1.consul."}},
		{name: "PTR of an IPv6 node", q: "3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", qtype: mdns.TypePTR, rcode: ok,
			answer: []string{"3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa. PTR n3.node.dc1.consul."}},
		{name: "PTR of an unknown address", q: "9.9.9.9.in-addr.arpa.", qtype: mdns.TypePTR, rcode: nx, ns: soa},
		{name: "outside the domain without recursors", q: "example.org.", qtype: mdns.TypeA, rcode: mdns.RcodeRefused},
		{name: "RPC failure", q: "broken.service.consul.", qtype: mdns.TypeA, rcode: mdns.RcodeServerFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startServer(t, newFixture(), tc.edit)
			r := exchange(t, addr, "udp", tc.q, tc.qtype, 0)
			if r.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s\n%s", mdns.RcodeToString[r.Rcode], mdns.RcodeToString[tc.rcode], r)
			}
			if tc.rcode != mdns.RcodeRefused && !r.Authoritative {
				t.Errorf("reply not authoritative")
			}
			got, want := rrTexts(r.Answer), tc.answer
			slices.Sort(got)
			slices.Sort(want)
			if tc.qtype == mdns.TypeSOA {
				got = trimSOA(got)
			}
			if !slices.Equal(got, want) {
				t.Errorf("answer\n got %q\nwant %q", got, want)
			}
			gotExtra := rrTexts(r.Extra)
			slices.Sort(gotExtra)
			slices.Sort(tc.extra)
			if !slices.Equal(gotExtra, tc.extra) {
				t.Errorf("extra\n got %q\nwant %q", gotExtra, tc.extra)
			}
			switch ns := trimSOA(rrTexts(r.Ns)); {
			case tc.ns == none && len(ns) != 0:
				t.Errorf("authority %q, want none", ns)
			case tc.ns != none && (len(ns) != 1 || ns[0] != tc.ns):
				t.Errorf("authority %q, want %q", ns, tc.ns)
			}
		})
	}
}

// trimSOA keeps an SOA's names only: its serial is the clock.
func trimSOA(rrs []string) []string {
	out := make([]string, len(rrs))
	for i, s := range rrs {
		f := strings.Fields(s)
		if len(f) > 4 && f[1] == "SOA" {
			s = strings.Join(f[:4], " ")
		}
		out[i] = s
	}
	return out
}

func TestSOAFields(t *testing.T) {
	addr := startServer(t, newFixture(), func(c *Config) { c.SOA = SOA{Refresh: 1, Retry: 2, Expire: 3, MinTTL: 4} })
	r := exchange(t, addr, "udp", "nope.node.consul.", mdns.TypeA, 0)
	soa, ok := r.Ns[0].(*mdns.SOA)
	if !ok || soa.Refresh != 1 || soa.Retry != 2 || soa.Expire != 3 || soa.Minttl != 4 || soa.Hdr.Ttl != 4 || soa.Serial == 0 {
		t.Fatalf("SOA %v", r.Ns)
	}
}

func TestTTLs(t *testing.T) {
	edit := func(c *Config) {
		c.NodeTTL = 10 * time.Second
		c.ServiceTTL = map[string]time.Duration{"*": 5 * time.Second, "we*": 7 * time.Second, "WEB": 30 * time.Second, "d*": 0}
	}
	addr := startServer(t, newFixture(), edit)
	for _, tc := range []struct {
		q     string
		qtype uint16
		ttl   uint32
	}{
		{"web.service.consul.", mdns.TypeSRV, 30},
		{"web.connect.consul.", mdns.TypeA, 30},
		{"v6.service.consul.", mdns.TypeAAAA, 5},
		{"db.service.consul.", mdns.TypeA, 0},
		{"n1.node.consul.", mdns.TypeA, 10},
		// A prepared query's own TTL wins; without one, its service's.
		{"db-ttl.query.consul.", mdns.TypeA, 42},
		{"q1.query.consul.", mdns.TypeA, 30},
		{"1.0.0.10.in-addr.arpa.", mdns.TypePTR, 10},
	} {
		r := exchange(t, addr, "udp", tc.q, tc.qtype, 0)
		if len(r.Answer) == 0 {
			t.Fatalf("%s: no answer", tc.q)
		}
		for _, rr := range append(r.Answer, r.Extra...) {
			if rr.Header().Rrtype != mdns.TypeOPT && rr.Header().Ttl != tc.ttl {
				t.Errorf("%s: %s has TTL %d, want %d", tc.q, rr, rr.Header().Ttl, tc.ttl)
			}
		}
	}
	if got := newTTLTable(map[string]time.Duration{"web-*": 1, "web*": 2}).lookup("web-api"); got != 1 {
		t.Errorf("longest prefix: %d", got)
	}
}

// TestTruncation: 20 instances of "many". A UDP reply without EDNS0 holds
// udp_answer_limit records (TC only with enable_truncate), one with EDNS0
// as many as fit in its size, and TCP carries them all.
func TestTruncation(t *testing.T) {
	truncate := func(c *Config) { c.EnableTruncate = true }
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		network string
		qtype   uint16
		edns    uint16
		answers int // -1: fewer than 20 and more than 3
		tc      bool
	}{
		{"udp answer limit, no TC by default", nil, "udp", mdns.TypeA, 0, 3, false},
		{"udp answer limit with enable_truncate", truncate, "udp", mdns.TypeA, 0, 3, true},
		{"udp_answer_limit 5", func(c *Config) { c.UDPAnswerLimit = 5 }, "udp", mdns.TypeA, 0, 5, false},
		{"SRV over 512 bytes", func(c *Config) { c.EnableTruncate, c.UDPAnswerLimit = true, 8 }, "udp", mdns.TypeSRV, 0, -1, true},
		{"EDNS0 size large enough", truncate, "udp", mdns.TypeA, 4096, 20, false},
		{"EDNS0 size too small for SRV", truncate, "udp", mdns.TypeSRV, 700, -1, true},
		{"TCP carries everything", truncate, "tcp", mdns.TypeSRV, 0, 20, false},
		{"a_record_limit over TCP", func(c *Config) { c.ARecordLimit = 2 }, "tcp", mdns.TypeA, 0, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startServer(t, newFixture(), tc.edit)
			r := exchange(t, addr, tc.network, "many.service.consul.", tc.qtype, tc.edns)
			n := len(r.Answer)
			if tc.answers >= 0 && n != tc.answers || tc.answers < 0 && (n <= 3 || n >= 20) {
				t.Errorf("%d answers, want %d", n, tc.answers)
			}
			if r.Truncated != tc.tc {
				t.Errorf("TC = %v, want %v", r.Truncated, tc.tc)
			}
			// The server compresses; the size on the wire is the compressed one.
			r.Compress = true
			size, limit := r.Len(), 512
			if tc.edns > 0 {
				limit = int(tc.edns)
			}
			if tc.network == "udp" && size > limit {
				t.Errorf("UDP reply of %d bytes, limit %d", size, limit)
			}
			if tc.qtype == mdns.TypeSRV {
				// Every SRV target keeps its address, and no other.
				targets := map[string]bool{}
				for _, rr := range r.Answer {
					targets[rr.(*mdns.SRV).Target] = true
				}
				for _, rr := range r.Extra {
					if rr.Header().Rrtype == mdns.TypeA && !targets[rr.Header().Name] {
						t.Errorf("extra %s has no SRV", rr)
					}
					delete(targets, rr.Header().Name)
				}
				if len(targets) != 0 {
					t.Errorf("targets without an address: %v", targets)
				}
			}
		})
	}
}

// TestStaleReads: reads are stale by default and asked again from the
// leader when the answering server's contact is older than max_stale.
func TestStaleReads(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allowStale  bool
		lastContact time.Duration
		want        []bool
	}{
		{"stale within max_stale", true, time.Second, []bool{true}},
		{"too stale: read again", true, 2 * time.Hour, []bool{true, false}},
		{"allow_stale false", false, 2 * time.Hour, []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			f.lastContact = tc.lastContact
			addr := startServer(t, f, func(c *Config) { c.AllowStale = tc.allowStale })
			if r := exchange(t, addr, "udp", "web.service.consul.", mdns.TypeA, 0); len(r.Answer) != 2 {
				t.Fatalf("answer %v", r.Answer)
			}
			if got := f.staleCalls(); !slices.Equal(got, tc.want) {
				t.Errorf("AllowStale of the reads %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecursors: names outside the domain (and unknown reverse names) go
// to the first recursor that answers; SERVFAIL when none does.
func TestRecursors(t *testing.T) {
	upstream := mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		m := new(mdns.Msg).SetReply(req)
		rr, _ := mdns.NewRR(req.Question[0].Name + " 60 IN A 192.0.2.7")
		m.Answer = append(m.Answer, rr)
		_ = w.WriteMsg(m)
	})
	upAddr := startUpstream(t, upstream)
	dead := startUpstream(t, mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		_ = w.WriteMsg(new(mdns.Msg).SetRcode(req, mdns.RcodeServerFailure))
	}))
	for _, tc := range []struct {
		name      string
		recursors []string
		q         string
		network   string
		rcode     int
		answer    []string
		ra        bool // set by Trellis itself, not relayed
	}{
		{"forwarded over UDP", []string{dead, upAddr}, "example.org.", "udp", mdns.RcodeSuccess, []string{"example.org. A 192.0.2.7"}, false},
		{"forwarded over TCP", []string{upAddr}, "example.org.", "tcp", mdns.RcodeSuccess, []string{"example.org. A 192.0.2.7"}, false},
		{"unknown reverse name", []string{upAddr}, "9.9.9.9.in-addr.arpa.", "udp", mdns.RcodeSuccess, []string{"9.9.9.9.in-addr.arpa. A 192.0.2.7"}, false},
		{"known reverse name stays local", []string{upAddr}, "1.0.0.10.in-addr.arpa.", "udp", mdns.RcodeSuccess,
			[]string{"1.0.0.10.in-addr.arpa. PTR n1.node.dc1.consul."}, true},
		{"every recursor fails", []string{dead}, "example.org.", "udp", mdns.RcodeServerFailure, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startServer(t, newFixture(), func(c *Config) {
				c.Recursors, c.RecursorTimeout = tc.recursors, time.Second
			})
			qtype := mdns.TypeA
			if strings.HasSuffix(tc.q, ".arpa.") {
				qtype = mdns.TypePTR
			}
			r := exchange(t, addr, tc.network, tc.q, qtype, 0)
			if r.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", mdns.RcodeToString[r.Rcode], mdns.RcodeToString[tc.rcode])
			}
			if got := rrTexts(r.Answer); !slices.Equal(got, tc.answer) {
				t.Errorf("answer %q, want %q", got, tc.answer)
			}
			if tc.ra && !r.RecursionAvailable {
				t.Errorf("RA not set with recursors")
			}
		})
	}
}

// startUpstream runs a plain DNS server with handler h on UDP and TCP at
// one free loopback port.
func startUpstream(t *testing.T, h mdns.Handler) string {
	t.Helper()
	addr := freeAddr(t)
	for _, network := range []string{"udp", "tcp"} {
		started := make(chan struct{})
		srv := &mdns.Server{Addr: addr, Net: network, Handler: h, NotifyStartedFunc: func() { close(started) }}
		done := make(chan error, 1)
		go func() { done <- srv.ListenAndServe() }()
		select {
		case <-started:
		case err := <-done:
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = srv.Shutdown()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	return addr
}

func TestLifecycle(t *testing.T) {
	if _, err := New(Config{Datacenter: "dc1"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New without RPC: %v", err)
	}
	s, err := New(Config{RPC: newFixture(), Datacenter: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	if err := s.ListenAndServe(addr); err != nil {
		t.Fatal(err)
	}
	if err := s.ListenAndServe(addr); err == nil {
		t.Errorf("a second bind of %s succeeded", addr)
	}
	s.Shutdown()
	s.Shutdown()
	if err := s.ListenAndServe(freeAddr(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("ListenAndServe after Shutdown: %v", err)
	}
}

// TestApexNameservers: NS at the zone's apex names up to three healthy
// servers (the consul service) as <node>.node.<dc>.<zone>, with their
// addresses as glue; SOA carries the same NS records in its authority
// section and names ns.<zone>, as Consul's; a critical server, a server
// whose name is no DNS label, and a zone without servers are left out.
func TestApexNameservers(t *testing.T) {
	pass, crit := structs.HealthPassing, structs.HealthCritical
	servers := func(f *fakeCatalog, names ...string) {
		for i, name := range names {
			n := &structs.Node{Node: name, Address: fmt.Sprintf("10.1.0.%d", i+1)}
			st := pass
			if strings.HasPrefix(name, "down") {
				st = crit
			}
			f.instances["service:consul"] = append(f.instances["service:consul"],
				instance(n, &structs.NodeService{ID: "consul", Service: "consul", Port: 8300}, st))
		}
	}
	// By lower-cased name: the targets are lower case, as Consul's.
	healthyServers := map[string]string{"s1": "10.1.0.1", "s2": "10.1.0.2", "s3": "10.1.0.3", "s4": "10.1.0.4"}
	for _, tc := range []struct {
		name    string
		servers []string
		q       string
		qtype   uint16
		zone    string
		wantNS  int
	}{
		{"NS names three of the healthy servers", []string{"s1", "S2", "s3", "s4", "down5", "bad_name"}, "consul.", mdns.TypeNS, "consul.", 3},
		{"NS in the alt domain", []string{"s1"}, "ALT.", mdns.TypeNS, "alt.", 1},
		{"SOA with the servers in authority", []string{"s1", "S2"}, "consul.", mdns.TypeSOA, "consul.", 2},
		{"NS without servers is no data", []string{"down1"}, "consul.", mdns.TypeNS, "consul.", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			servers(f, tc.servers...)
			addr := startServer(t, f, func(c *Config) { c.NodeTTL = 12 * time.Second })
			r := exchange(t, addr, "udp", tc.q, tc.qtype, 0)
			if r.Rcode != mdns.RcodeSuccess || !r.Authoritative {
				t.Fatalf("rcode %s, authoritative %v", mdns.RcodeToString[r.Rcode], r.Authoritative)
			}
			nsSection := r.Answer
			if tc.qtype == mdns.TypeSOA {
				if len(r.Answer) != 1 || r.Answer[0].(*mdns.SOA).Ns != "ns."+tc.zone {
					t.Fatalf("answer %v, want the SOA naming ns.%s", r.Answer, tc.zone)
				}
				nsSection = r.Ns
			}
			var targets []string
			for _, rr := range nsSection {
				ns, isNS := rr.(*mdns.NS)
				if !isNS {
					continue
				}
				node, found := strings.CutSuffix(ns.Ns, ".node.dc1."+tc.zone)
				if ns.Hdr.Name != tc.zone || ns.Hdr.Ttl != 12 || !found {
					t.Errorf("NS %v, want %s NS <node>.node.dc1.%s with the node TTL", ns, tc.zone, tc.zone)
				}
				if _, ok := healthyServers[node]; !ok {
					t.Errorf("NS names %q, not a healthy server", node)
				}
				targets = append(targets, ns.Ns)
			}
			if len(targets) != tc.wantNS {
				t.Fatalf("%d NS records %v, want %d", len(targets), nsSection, tc.wantNS)
			}
			if tc.wantNS == 0 && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != mdns.TypeSOA) {
				t.Fatalf("authority %v, want the SOA", r.Ns)
			}
			var glue []string
			for _, rr := range r.Extra {
				if a, isA := rr.(*mdns.A); isA {
					glue = append(glue, a.Hdr.Name)
					node := strings.TrimSuffix(a.Hdr.Name, ".node.dc1."+tc.zone)
					if a.A.String() != healthyServers[node] || a.Hdr.Ttl != 12 {
						t.Errorf("glue %v, want the server's address with the node TTL", a)
					}
				}
			}
			slices.Sort(glue)
			slices.Sort(targets)
			if !slices.Equal(glue, targets) {
				t.Errorf("glue for %v, want one A record per NS target %v", glue, targets)
			}
		})
	}
}
