package dns

import (
	"encoding/hex"
	"net/netip"
	"strings"
)

// Kinds of lookup, named by the label that selects them.
const (
	kindApex    = ""
	kindService = "service"
	kindConnect = "connect"
	kindIngress = "ingress"
	kindNode    = "node"
	kindAddr    = "addr"
	kindQuery   = "query"
	kindVirtual = "virtual"
)

// question is a name of the zone taken apart.
type question struct {
	kind string
	// name is the service, node or prepared query; for addr lookups, the
	// hex-encoded address.
	name string
	// tag filters service instances ("" for none).
	tag string
	// dc is the datacenter named in the question ("" for the agent's).
	dc string
}

// parseQuestion splits qname (lower case, fully qualified, inside zone)
// with Consul's grammar:
//
//	[tag.]<service>.service[.<dc>[.dc]].<zone>
//	_<service>._<tag|tcp>.service[.<dc>].<zone>   (RFC 2782)
//	<service>.connect[.<dc>].<zone>, <service>.ingress[.<dc>].<zone>
//	<node>.node[.<dc>].<zone>, <hex ip>.addr[.<dc>].<zone>, <query>.query[.<dc>].<zone>
//	<service>.virtual[.<namespace>.ns][.<partition>.ap][.<peer>.peer].<zone>, <service>.virtual[.<peer>].<zone>
//
// The kind is the right-most label that names one, so that a tag or node
// name may contain dots. ok is false for a name Consul would not answer.
func parseQuestion(qname, zone string) (question, bool) {
	rest := strings.TrimSuffix(strings.TrimSuffix(qname, zone), ".")
	if rest == "" {
		return question{kind: kindApex}, true
	}
	labels := strings.Split(rest, ".")
	at := -1
	for i := len(labels) - 1; i >= 0 && at < 0; i-- {
		switch labels[i] {
		case kindService, kindConnect, kindIngress, kindNode, kindAddr, kindQuery, kindVirtual:
			at = i
		}
	}
	if at < 1 {
		return question{}, false
	}
	q := question{kind: labels[at]}
	switch dc := labels[at+1:]; {
	case q.kind == kindVirtual:
		if !virtualSuffixOK(dc) {
			return question{}, false
		}
	case len(dc) == 1:
		q.dc = dc[0]
	case len(dc) == 2 && dc[1] == "dc":
		q.dc = dc[0]
	case len(dc) != 0:
		return question{}, false
	}
	parts := labels[:at]
	switch q.kind {
	case kindService:
		last := len(parts) - 1
		if len(parts) == 2 && strings.HasPrefix(parts[0], "_") && strings.HasPrefix(parts[1], "_") {
			// RFC 2782: the protocol label is a tag, except _tcp, which
			// every instance answers.
			q.name, q.tag = parts[0][1:], parts[1][1:]
			if q.tag == "tcp" {
				q.tag = ""
			}
		} else {
			q.name, q.tag = parts[last], strings.Join(parts[:last], ".")
		}
	case kindNode:
		q.name = strings.Join(parts, ".")
	default:
		if len(parts) != 1 {
			return question{}, false
		}
		q.name = parts[0]
	}
	return q, q.name != ""
}

// virtualSuffixOK reads the labels after "virtual". Consul takes a
// namespace, a partition and a cluster peer there (a lone label is a
// peer); Trellis has only the default namespace and partition and no
// peers, so those alone name anything.
func virtualSuffixOK(labels []string) bool {
	if len(labels)%2 != 0 {
		return false // <peer> alone, or a stray label
	}
	seen := map[string]bool{}
	for i := 0; i < len(labels); i += 2 {
		value, kind := labels[i], labels[i+1]
		if seen[kind] || (kind != "ns" && kind != "ap") || value != "default" {
			return false
		}
		seen[kind] = true
	}
	return true
}

// addrName is the hex label of an addr lookup for ip: 8 digits for IPv4,
// 32 for IPv6, as in Consul's SRV targets.
func addrName(ip netip.Addr) string {
	b := ip.AsSlice()
	return hex.EncodeToString(b)
}

// parseAddrName is the inverse of addrName.
func parseAddrName(s string) (netip.Addr, bool) {
	if len(s) != 8 && len(s) != 32 {
		return netip.Addr{}, false
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(b)
	return ip, ok
}

// parseReverse reads the address of a PTR question: "4.3.2.1.in-addr.arpa."
// or the 32 nibbles of an "ip6.arpa." name.
func parseReverse(qname string) (netip.Addr, bool) {
	switch {
	case strings.HasSuffix(qname, ".in-addr.arpa."):
		labels := strings.Split(strings.TrimSuffix(qname, ".in-addr.arpa."), ".")
		if len(labels) != 4 {
			return netip.Addr{}, false
		}
		for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
			labels[i], labels[j] = labels[j], labels[i]
		}
		ip, err := netip.ParseAddr(strings.Join(labels, "."))
		return ip, err == nil && ip.Is4()
	case strings.HasSuffix(qname, ".ip6.arpa."):
		labels := strings.Split(strings.TrimSuffix(qname, ".ip6.arpa."), ".")
		if len(labels) != 32 {
			return netip.Addr{}, false
		}
		var b strings.Builder
		for i := len(labels) - 1; i >= 0; i-- {
			if len(labels[i]) != 1 {
				return netip.Addr{}, false
			}
			b.WriteString(labels[i])
		}
		return parseAddrName(b.String())
	}
	return netip.Addr{}, false
}
