package config

import (
	"net/netip"
	"strings"
	"time"
)

// buildDNS resolves domain, alt_domain, recursors and dns_config into
// rc.DNS with Consul's rules.
func buildDNS(s *source, rc *RuntimeConfig, p *problems) {
	d := s.DNSConfig
	rc.DNS = DNS{
		Domain:             fqdnLower(*s.Domain),
		AltDomain:          fqdnLower(deref(s.AltDomain)),
		AllowStale:         *d.AllowStale,
		OnlyPassing:        *d.OnlyPassing,
		EnableTruncate:     *d.EnableTruncate,
		UDPAnswerLimit:     *d.UDPAnswerLimit,
		ARecordLimit:       *d.ARecordLimit,
		NodeMetaTXT:        *d.NodeMetaTXT,
		DisableCompression: *d.DisableCompression,
		SOA:                SOA{Refresh: *d.SOA.Refresh, Retry: *d.SOA.Retry, Expire: *d.SOA.Expire, MinTTL: *d.SOA.MinTTL},
		MaxStale:           duration("dns_config.max_stale", d.MaxStale, false, p),
		NodeTTL:            duration("dns_config.node_ttl", d.NodeTTL, false, p),
		RecursorTimeout:    duration("dns_config.recursor_timeout", d.RecursorTimeout, true, p),
	}
	switch {
	case rc.DNS.Domain == "":
		p.add("domain cannot be empty")
	case rc.DNS.AltDomain == rc.DNS.Domain:
		p.add("alt_domain %q cannot be the same as domain", deref(s.AltDomain))
	}
	if len(d.ServiceTTL) > 0 {
		rc.DNS.ServiceTTL = make(map[string]time.Duration, len(d.ServiceTTL))
		for name, v := range d.ServiceTTL {
			rc.DNS.ServiceTTL[name] = duration("dns_config.service_ttl."+name, &v, false, p)
		}
	}
	switch strings.ToLower(*d.RecursorStrategy) {
	case "sequential":
	case "random":
		rc.DNS.RecursorRandom = true
	default:
		p.add("dns_config.recursor_strategy must be \"sequential\" or \"random\", not %q", *d.RecursorStrategy)
	}
	if rc.DNS.UDPAnswerLimit < 0 {
		p.add("dns_config.udp_answer_limit cannot be negative")
	}
	if rc.DNS.ARecordLimit < 0 {
		p.add("dns_config.a_record_limit cannot be negative")
	}
	for _, r := range s.Recursors {
		if addr, ok := recursorAddr(r); ok {
			rc.DNS.Recursors = append(rc.DNS.Recursors, addr)
		} else {
			p.add("recursors: %q is not an IP address or ip:port", r)
		}
	}
}

// fqdnLower lower-cases a domain and gives it its trailing dot: names are
// compared case-insensitively, as DNS does.
func fqdnLower(d string) string {
	d = strings.ToLower(strings.TrimSpace(d))
	if d == "" || strings.HasSuffix(d, ".") {
		return d
	}
	return d + "."
}

// recursorAddr accepts Consul's recursor forms, "ip" (port 53) and
// "ip:port", IPv6 in brackets with a port.
func recursorAddr(r string) (string, bool) {
	r = strings.TrimSpace(r)
	if ip, err := netip.ParseAddr(r); err == nil {
		return netip.AddrPortFrom(ip.Unmap(), 53).String(), true
	}
	ap, err := netip.ParseAddrPort(r)
	if err != nil || ap.Port() == 0 {
		return "", false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String(), true
}
