package dns

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/trellis-mesh/trellis/structs"
)

// errNotFound: the name does not exist (NXDOMAIN).
var errNotFound = errors.New("dns: name not found")

// queryArgs and queryReply are what every catalog read's arguments and
// reply embed.
type queryArgs interface{ QueryOpts() *structs.QueryOptions }
type queryReply interface{ Meta() *structs.QueryMeta }

// read makes a catalog read with dns_config's consistency: stale when
// allowed, and again from the leader when the answering server had not
// heard from it for longer than max_stale.
func read[A, R any, PA interface {
	*A
	queryArgs
}, PR interface {
	*R
	queryReply
}](ctx context.Context, s *Server, m structs.Method[A, R], args PA) (PR, error) {
	opts := args.QueryOpts()
	opts.Datacenter = s.cfg.Datacenter
	opts.AllowStale = s.cfg.AllowStale
	if s.cfg.Token != nil {
		opts.Token = s.cfg.Token()
	}
	reply := PR(new(R))
	if err := m.Call(ctx, s.cfg.RPC, (*A)(args), (*R)(reply)); err != nil {
		return nil, err
	}
	if opts.AllowStale && reply.Meta().LastContact > s.cfg.MaxStale {
		opts.AllowStale = false
		reply = PR(new(R))
		if err := m.Call(ctx, s.cfg.RPC, (*A)(args), (*R)(reply)); err != nil {
			return nil, err
		}
	}
	return reply, nil
}

// answerZone answers a question in zone (the domain or the alt domain).
func (s *Server) answerZone(ctx context.Context, req *mdns.Msg, zone string) *mdns.Msg {
	q := req.Question[0]
	resp := new(mdns.Msg).SetReply(req)
	resp.Authoritative = true
	resp.RecursionAvailable = len(s.cfg.Recursors) > 0
	qname := strings.ToLower(q.Name)
	pq, ok := parseQuestion(qname, zone)
	var err error
	switch {
	case !ok || pq.dc != "" && pq.dc != strings.ToLower(s.cfg.Datacenter):
		// Trellis runs one datacenter: any other has no names.
		err = errNotFound
	case pq.kind == kindApex:
		err = s.apexLookup(ctx, resp, zone)
	case pq.kind == kindService, pq.kind == kindConnect, pq.kind == kindIngress:
		err = s.serviceLookup(ctx, resp, pq, zone)
	case pq.kind == kindNode:
		err = s.nodeLookup(ctx, resp, pq)
	case pq.kind == kindAddr:
		err = s.addrLookup(resp, pq)
	case pq.kind == kindQuery:
		err = s.preparedQueryLookup(ctx, resp, pq, zone)
	case pq.kind == kindVirtual:
		err = s.virtualLookup(ctx, resp, pq)
	default:
		err = errNotFound
	}
	switch {
	case errors.Is(err, errNotFound), errors.Is(err, structs.ErrNoDCPath),
		// What the token may not read does not exist for it.
		structs.CodeOf(err) == structs.CodePermissionDenied:
		resp.Rcode = mdns.RcodeNameError
	case err != nil:
		s.logger.Warn("DNS lookup failed", "name", q.Name, "error", err)
		resp.Rcode = mdns.RcodeServerFailure
		return resp
	}
	if len(resp.Answer) == 0 {
		// NXDOMAIN or no data: the SOA tells resolvers how long to cache
		// the absence.
		resp.Ns = append(resp.Ns, s.soa(zone))
	}
	return resp
}

// apexLookup answers the zone's own name as Consul does: NS with up to
// three servers (the healthy instances of the consul service, in random
// order) named <node>.node.<dc>.<zone>, their addresses as glue in the
// additional section; SOA with the SOA, and the same NS records in the
// authority section; ANY with the SOA.
func (s *Server) apexLookup(ctx context.Context, resp *mdns.Msg, zone string) error {
	switch resp.Question[0].Qtype {
	case mdns.TypeNS:
		ns, glue, err := s.nameservers(ctx, zone)
		if err != nil {
			return err
		}
		resp.Answer, resp.Extra = append(resp.Answer, ns...), append(resp.Extra, glue...)
	case mdns.TypeSOA:
		ns, glue, err := s.nameservers(ctx, zone)
		if err != nil {
			return err
		}
		resp.Answer = append(resp.Answer, s.soa(zone))
		resp.Ns, resp.Extra = append(resp.Ns, ns...), append(resp.Extra, glue...)
	case mdns.TypeANY:
		resp.Answer = append(resp.Answer, s.soa(zone))
	}
	return nil
}

// maxNameservers is how many servers an NS answer names (Consul's three).
const maxNameservers = 3

// nameservers are the NS records of zone and their address records.
func (s *Server) nameservers(ctx context.Context, zone string) (ns, glue []mdns.RR, err error) {
	reply, err := read(ctx, s, structs.MethodHealthServiceNodes, &structs.ServiceSpecificRequest{ServiceName: structs.ConsulServiceName})
	if err != nil {
		return nil, nil, err
	}
	nodes := healthy(reply.Nodes, s.cfg.OnlyPassing)
	rand.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] }) //nolint:gosec // spreading load over servers needs no unpredictability
	ttl := ttlSeconds(s.cfg.NodeTTL)
	for _, n := range nodes {
		if len(ns) == maxNameservers {
			break
		}
		if !validLabel(n.Node.Node) {
			continue
		}
		target := nodeTarget(n.Node.Node, s.cfg.Datacenter, zone)
		ns = append(ns, &mdns.NS{Hdr: mdns.RR_Header{Name: zone, Rrtype: mdns.TypeNS, Class: mdns.ClassINET, Ttl: ttl}, Ns: target})
		glue = append(glue, addrRecords(target, mdns.TypeANY, n.Node.Address, ttl)...)
	}
	return ns, glue, nil
}

// serviceLookup answers a service, Connect or ingress question with the
// instances that are not critical (and, with only_passing, not warning
// either), in random order.
func (s *Server) serviceLookup(ctx context.Context, resp *mdns.Msg, pq question, zone string) error {
	args := &structs.ServiceSpecificRequest{
		ServiceName: pq.name,
		Connect:     pq.kind == kindConnect,
		Ingress:     pq.kind == kindIngress,
	}
	if pq.tag != "" {
		args.ServiceTags, args.TagFilter = []string{pq.tag}, true
	}
	reply, err := read(ctx, s, structs.MethodHealthServiceNodes, args)
	if err != nil {
		return err
	}
	nodes := healthy(reply.Nodes, s.cfg.OnlyPassing)
	if len(nodes) == 0 {
		return errNotFound
	}
	rand.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] }) //nolint:gosec // spreading load over instances needs no unpredictability
	s.instanceRecords(resp, nodes, ttlSeconds(s.serviceTTL.lookup(pq.name)), zone)
	return nil
}

// preparedQueryLookup answers <query>.query.<zone> by executing the
// prepared query with that ID or name, as Consul does: the instances in
// the order the query gives (random, or by distance with Near), the
// query's DNS TTL or else the service TTL of the service it names.
func (s *Server) preparedQueryLookup(ctx context.Context, resp *mdns.Msg, pq question, zone string) error {
	args := &structs.PreparedQueryExecuteRequest{
		QueryIDOrName: pq.name,
		Agent:         structs.QuerySource{Datacenter: s.cfg.Datacenter, Node: s.cfg.NodeName},
	}
	reply, err := read(ctx, s, structs.MethodPreparedQueryExecute, args)
	if errors.Is(err, structs.ErrQueryNotFound) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	nodes := healthy(reply.Nodes, false)
	if len(nodes) == 0 {
		return errNotFound
	}
	ttl := s.serviceTTL.lookup(reply.Service)
	if reply.DNS.TTL != "" {
		d, err := time.ParseDuration(reply.DNS.TTL)
		if err != nil {
			return fmt.Errorf("dns: prepared query %q: bad DNS TTL: %w", pq.name, err)
		}
		ttl = d
	}
	s.instanceRecords(resp, nodes, ttlSeconds(ttl), zone)
	return nil
}

// instanceRecords answers with the instances: SRV records, or the address
// records of each distinct address.
func (s *Server) instanceRecords(resp *mdns.Msg, nodes structs.CheckServiceNodes, ttl uint32, zone string) {
	q := resp.Question[0]
	if q.Qtype == mdns.TypeSRV {
		s.srvRecords(resp, nodes, ttl, zone)
		return
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		addr := instanceAddr(n)
		if seen[addr] {
			continue
		}
		seen[addr] = true
		resp.Answer = append(resp.Answer, addrRecords(q.Name, q.Qtype, addr, ttl)...)
	}
}

// healthy keeps the instances Consul's DNS returns: no critical (or
// maintenance) check, and with onlyPassing no warning either.
func healthy(nodes structs.CheckServiceNodes, onlyPassing bool) structs.CheckServiceNodes {
	out := make(structs.CheckServiceNodes, 0, len(nodes))
next:
	for _, n := range nodes {
		if n.Node == nil || n.Service == nil {
			continue
		}
		for _, c := range n.Checks {
			failing := c.Status == structs.HealthCritical || c.Status == structs.HealthMaint
			if failing || onlyPassing && c.Status != structs.HealthPassing {
				continue next
			}
		}
		out = append(out, n)
	}
	return out
}

// instanceAddr is where an instance is reached: its service address, or
// its node's.
func instanceAddr(n structs.CheckServiceNode) string {
	if n.Service.Address != "" {
		return n.Service.Address
	}
	return n.Node.Address
}

// nodeLookup answers a node question with the node's address and, for
// TXT and ANY (or with enable_additional_node_meta_txt), its metadata.
func (s *Server) nodeLookup(ctx context.Context, resp *mdns.Msg, pq question) error {
	reply, err := read(ctx, s, structs.MethodCatalogNodeServices, &structs.NodeSpecificRequest{Node: pq.name})
	if err != nil {
		return err
	}
	if reply.NodeServices == nil || reply.NodeServices.Node == nil {
		return errNotFound
	}
	node := reply.NodeServices.Node
	q := resp.Question[0]
	ttl := ttlSeconds(s.cfg.NodeTTL)
	resp.Answer = append(resp.Answer, addrRecords(q.Name, q.Qtype, node.Address, ttl)...)
	switch {
	case q.Qtype == mdns.TypeTXT || q.Qtype == mdns.TypeANY:
		resp.Answer = append(resp.Answer, metaTXT(q.Name, node.Meta, ttl)...)
	case s.cfg.NodeMetaTXT && len(resp.Answer) > 0:
		resp.Extra = append(resp.Extra, metaTXT(q.Name, node.Meta, ttl)...)
	}
	return nil
}

// virtualLookup answers <service>.virtual with the service's virtual IP
// (with the node TTL, as Consul); a service without one has no data.
func (s *Server) virtualLookup(ctx context.Context, resp *mdns.Msg, pq question) error {
	reply, err := read(ctx, s, structs.MethodCatalogVirtualIPForService, &structs.ServiceSpecificRequest{ServiceName: pq.name})
	if err != nil || reply.VirtualIP == nil {
		return err
	}
	q := resp.Question[0]
	resp.Answer = append(resp.Answer, addrRecords(q.Name, q.Qtype, reply.VirtualIP.IP, ttlSeconds(s.cfg.NodeTTL))...)
	return nil
}

// addrLookup answers the <hex>.addr names that SRV answers point at.
func (s *Server) addrLookup(resp *mdns.Msg, pq question) error {
	ip, ok := parseAddrName(pq.name)
	if !ok {
		return errNotFound
	}
	q := resp.Question[0]
	resp.Answer = append(resp.Answer, addrRecords(q.Name, q.Qtype, ip.String(), ttlSeconds(s.cfg.NodeTTL))...)
	return nil
}

// answerPTR answers a reverse question with the nodes at that address.
// It returns nil when no node has it and the recursors should answer.
func (s *Server) answerPTR(ctx context.Context, req *mdns.Msg) *mdns.Msg {
	q := req.Question[0]
	resp := new(mdns.Msg).SetReply(req)
	resp.Authoritative = true
	resp.RecursionAvailable = len(s.cfg.Recursors) > 0
	if ip, ok := parseReverse(strings.ToLower(q.Name)); ok {
		reply, err := read(ctx, s, structs.MethodCatalogListNodes, &structs.DCSpecificRequest{})
		if err != nil {
			s.logger.Warn("DNS lookup failed", "name", q.Name, "error", err)
			resp.Rcode = mdns.RcodeServerFailure
			return resp
		}
		found := false
		for _, n := range reply.Nodes {
			if a, err := netip.ParseAddr(n.Address); err != nil || a.Unmap() != ip.Unmap() {
				continue
			}
			found = true
			if q.Qtype == mdns.TypePTR || q.Qtype == mdns.TypeANY {
				resp.Answer = append(resp.Answer, &mdns.PTR{
					Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypePTR, Class: mdns.ClassINET, Ttl: ttlSeconds(s.cfg.NodeTTL)},
					Ptr: nodeTarget(n.Node, s.cfg.Datacenter, s.cfg.Domain),
				})
			}
		}
		if found {
			if len(resp.Answer) == 0 {
				resp.Ns = append(resp.Ns, s.soa(s.cfg.Domain))
			}
			return resp
		}
	}
	if len(s.cfg.Recursors) > 0 {
		return nil
	}
	resp.Rcode = mdns.RcodeNameError
	resp.Ns = append(resp.Ns, s.soa(s.cfg.Domain))
	return resp
}
