package dns

import (
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/trellis-mesh/trellis/structs"
)

const (
	// defaultUDPSize is the largest UDP reply to a client without EDNS0
	// (RFC 1035).
	defaultUDPSize = 512
	// maxUDPAnswers caps udp_answer_limit, as Consul does: more records
	// than this in a 512-byte reply only invite fragmentation.
	maxUDPAnswers = 8
)

// addrRecords are the records of addr under name for a qtype question: A
// for an IPv4 address (A, ANY, or SRV's additional section), AAAA for
// IPv6, and a CNAME when addr is a host name.
func addrRecords(name string, qtype uint16, addr string, ttl uint32) []mdns.RR {
	hdr := func(t uint16) mdns.RR_Header {
		return mdns.RR_Header{Name: name, Rrtype: t, Class: mdns.ClassINET, Ttl: ttl}
	}
	ip, err := netip.ParseAddr(addr)
	switch {
	case err != nil:
		if addr == "" {
			return nil
		}
		return []mdns.RR{&mdns.CNAME{Hdr: hdr(mdns.TypeCNAME), Target: mdns.Fqdn(addr)}}
	case ip.Unmap().Is4():
		if qtype == mdns.TypeA || qtype == mdns.TypeANY || qtype == mdns.TypeSRV {
			return []mdns.RR{&mdns.A{Hdr: hdr(mdns.TypeA), A: ip.Unmap().AsSlice()}}
		}
	default:
		if qtype == mdns.TypeAAAA || qtype == mdns.TypeANY || qtype == mdns.TypeSRV {
			return []mdns.RR{&mdns.AAAA{Hdr: hdr(mdns.TypeAAAA), AAAA: ip.AsSlice()}}
		}
	}
	return nil
}

// srvRecords adds one SRV record per instance, and the addresses of the
// targets to the additional section: <node>.node.<dc>.<zone> when the
// instance uses its node's address, <hex>.addr.<dc>.<zone> for a service
// address, or the host name a service address gives.
func (s *Server) srvRecords(resp *mdns.Msg, nodes structs.CheckServiceNodes, ttl uint32, zone string) {
	q := resp.Question[0]
	extra := map[string]bool{}
	for _, n := range nodes {
		target, addr := nodeTarget(n.Node.Node, s.cfg.Datacenter, zone), n.Node.Address
		meta := n.Node.Meta
		if sa := n.Service.Address; sa != "" && sa != n.Node.Address {
			addr, meta = sa, nil
			if ip, err := netip.ParseAddr(sa); err == nil {
				target = addrName(ip.Unmap()) + ".addr." + s.cfg.Datacenter + "." + zone
			} else {
				target = mdns.Fqdn(sa)
			}
		}
		resp.Answer = append(resp.Answer, &mdns.SRV{
			Hdr:      mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeSRV, Class: mdns.ClassINET, Ttl: ttl},
			Priority: 1,
			Weight:   uint16(weight(n)), //nolint:gosec // weight clamps to 0..65535
			Port:     uint16(min(max(n.Service.Port, 0), 65535)),
			Target:   target,
		})
		if extra[target] {
			continue
		}
		extra[target] = true
		if ip, err := netip.ParseAddr(addr); err == nil {
			resp.Extra = append(resp.Extra, addrRecords(target, mdns.TypeSRV, ip.String(), ttl)...)
		}
		if s.cfg.NodeMetaTXT {
			resp.Extra = append(resp.Extra, metaTXT(target, meta, ttl)...)
		}
	}
}

// weight is the SRV weight of an instance: its Weights.Passing while every
// check passes, Weights.Warning while one warns (1 and 1 by default).
func weight(n structs.CheckServiceNode) int {
	w := structs.Weights{Passing: 1, Warning: 1}
	if n.Service.Weights != nil {
		w = *n.Service.Weights
	}
	for _, c := range n.Checks {
		if c.Status == structs.HealthWarning {
			return min(max(w.Warning, 0), 65535)
		}
	}
	return min(max(w.Passing, 0), 65535)
}

// nodeTarget is a node's name in the zone.
func nodeTarget(node, dc, zone string) string {
	return mdns.Fqdn(strings.ToLower(node) + ".node." + dc + "." + zone)
}

// validLabel reports whether a node name can stand as a DNS label, as
// Consul's InvalidDNSRe has it: letters, digits and hyphens only. Consul
// leaves a server with another name out of its NS answers.
func validLabel(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// metaTXT renders node metadata as Consul does: "key=value", or the bare
// value for keys prefixed "rfc1035-".
func metaTXT(name string, meta map[string]string, ttl uint32) []mdns.RR {
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]mdns.RR, 0, len(keys))
	for _, k := range keys {
		txt := k + "=" + meta[k]
		if v, ok := strings.CutPrefix(k, "rfc1035-"); ok && v != "" {
			txt = meta[k]
		}
		out = append(out, &mdns.TXT{
			Hdr: mdns.RR_Header{Name: name, Rrtype: mdns.TypeTXT, Class: mdns.ClassINET, Ttl: ttl},
			Txt: []string{txt},
		})
	}
	return out
}

// soa is the zone's SOA record with dns_config.soa's timers; its serial is
// the time, so that secondaries see every answer as current.
func (s *Server) soa(zone string) *mdns.SOA {
	return &mdns.SOA{
		Hdr:     mdns.RR_Header{Name: zone, Rrtype: mdns.TypeSOA, Class: mdns.ClassINET, Ttl: s.cfg.SOA.MinTTL},
		Ns:      "ns." + zone,
		Mbox:    "hostmaster." + zone,
		Serial:  uint32(time.Now().Unix()), //nolint:gosec // wraps in 2106, which serial-number arithmetic (RFC 1982) allows
		Refresh: s.cfg.SOA.Refresh,
		Retry:   s.cfg.SOA.Retry,
		Expire:  s.cfg.SOA.Expire,
		Minttl:  s.cfg.SOA.MinTTL,
	}
}

func ttlSeconds(d time.Duration) uint32 {
	return uint32(min(max(d/time.Second, 0), math.MaxUint32))
}

// ttlTable resolves dns_config.service_ttl: the exact service name first,
// then the longest "prefix*" key that matches ("*" matches every name).
type ttlTable struct {
	exact    map[string]time.Duration
	prefixes []string // longest first
	byPrefix map[string]time.Duration
}

func newTTLTable(m map[string]time.Duration) ttlTable {
	t := ttlTable{exact: map[string]time.Duration{}, byPrefix: map[string]time.Duration{}}
	for k, v := range m {
		k = strings.ToLower(k)
		if p, ok := strings.CutSuffix(k, "*"); ok {
			t.byPrefix[p] = v
			t.prefixes = append(t.prefixes, p)
			continue
		}
		t.exact[k] = v
	}
	slices.SortFunc(t.prefixes, func(a, b string) int { return len(b) - len(a) })
	return t
}

func (t ttlTable) lookup(service string) time.Duration {
	service = strings.ToLower(service)
	if d, ok := t.exact[service]; ok {
		return d
	}
	for _, p := range t.prefixes {
		if strings.HasPrefix(service, p) {
			return t.byPrefix[p]
		}
	}
	return 0
}

// finish sets compression and EDNS0 on a reply to one of our names, and
// cuts the answer to what the transport carries.
func (s *Server) finish(network string, req, resp *mdns.Msg) {
	resp.Compress = !s.cfg.DisableCompression
	maxSize := mdns.MaxMsgSize
	if network == "udp" {
		maxSize = defaultUDPSize
	}
	if opt := req.IsEdns0(); opt != nil {
		resp.SetEdns0(opt.UDPSize(), false)
		if network == "udp" && int(opt.UDPSize()) > maxSize {
			maxSize = int(opt.UDPSize())
		}
	}
	qtype := req.Question[0].Qtype
	if s.cfg.ARecordLimit > 0 && len(resp.Answer) > s.cfg.ARecordLimit &&
		(qtype == mdns.TypeA || qtype == mdns.TypeAAAA || qtype == mdns.TypeANY) {
		resp.Answer = resp.Answer[:s.cfg.ARecordLimit]
	}
	total := len(resp.Answer)
	if network == "udp" && maxSize == defaultUDPSize && s.cfg.UDPAnswerLimit > 0 {
		if limit := min(s.cfg.UDPAnswerLimit, maxUDPAnswers); len(resp.Answer) > limit {
			resp.Answer = resp.Answer[:limit]
		}
	}
	syncExtra(resp)
	fitSize(resp, maxSize)
	if network == "udp" && s.cfg.EnableTruncate && len(resp.Answer) < total {
		resp.Truncated = true
	}
}

// fitSize keeps the longest prefix of the answers whose reply fits in
// maxSize bytes (a binary search: Len is costly on large answers).
func fitSize(resp *mdns.Msg, maxSize int) {
	if resp.Len() <= maxSize {
		return
	}
	all, extra := resp.Answer, resp.Extra
	keep := func(n int) {
		resp.Answer, resp.Extra = all[:n], extra
		syncExtra(resp)
	}
	lo, hi := 0, len(all) // all[:lo] fits; all[:hi+1] does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		keep(mid)
		if resp.Len() <= maxSize {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	keep(lo)
}

// syncExtra drops additional records no remaining answer (or authority NS
// record) points at; the OPT record stays.
func syncExtra(resp *mdns.Msg) {
	if len(resp.Extra) == 0 {
		return
	}
	targets := map[string]bool{}
	for _, rr := range resp.Answer {
		switch r := rr.(type) {
		case *mdns.SRV:
			targets[strings.ToLower(r.Target)] = true
		case *mdns.CNAME:
			targets[strings.ToLower(r.Target)] = true
		case *mdns.NS:
			targets[strings.ToLower(r.Ns)] = true
		default:
			// Node answers carry their own TXT records.
			targets[strings.ToLower(rr.Header().Name)] = true
		}
	}
	// The apex SOA's NS records, in the authority section, have glue.
	for _, rr := range resp.Ns {
		if r, ok := rr.(*mdns.NS); ok {
			targets[strings.ToLower(r.Ns)] = true
		}
	}
	kept := resp.Extra[:0:0]
	for _, rr := range resp.Extra {
		if rr.Header().Rrtype == mdns.TypeOPT || targets[strings.ToLower(rr.Header().Name)] {
			kept = append(kept, rr)
		}
	}
	resp.Extra = kept
}
