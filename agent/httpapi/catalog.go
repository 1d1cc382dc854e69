package httpapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// catalogRegister handles PUT /v1/catalog/register. It answers true.
func (s *Server) catalogRegister(w http.ResponseWriter, r *http.Request) (any, error) {
	body, err := readBody(r, maxJSONBody)
	if errors.Is(err, errBodyTooLarge) {
		return nil, tooLarge(fmt.Sprintf("Request body too large, max size: %d bytes", maxJSONBody))
	}
	var args *structs.RegisterRequest
	if err == nil {
		args, err = decodeRegister(body)
	}
	if err != nil {
		return nil, badRequest(fmt.Sprintf("Request decode failed: %v", err))
	}
	if args.Datacenter == "" {
		args.Datacenter = s.dc
	}
	args.Token = parseToken(r)
	if err := validateRegister(args); err != nil {
		return nil, err
	}
	if err := structs.MethodCatalogRegister.Call(r.Context(), s.rpc, args, &struct{}{}); err != nil {
		return nil, err
	}
	return true, nil
}

// validateRegister applies the checks Consul's servers make before a
// registration reaches Raft, with their messages and their status (500).
func validateRegister(args *structs.RegisterRequest) error {
	if args.Node == "" {
		return serverError("Must provide node")
	}
	if args.ID != "" {
		if err := structs.ParseUUID(args.ID); err != nil {
			return serverError(fmt.Sprintf("Bad node ID: %v", err))
		}
	}
	if args.Address == "" && !args.SkipNodeUpdate {
		return serverError("Must provide address if SkipNodeUpdate is not set")
	}
	if svc := args.Service; svc != nil {
		if svc.Service == "" {
			return serverError("Must provide service name with ID")
		}
		if isAnyAddress(svc.Address) {
			return serverError("Invalid service address")
		}
	}
	checks := args.Checks
	if args.Check != nil {
		checks = append(checks[:len(checks):len(checks)], args.Check)
	}
	for _, chk := range checks {
		if chk == nil {
			continue
		}
		switch chk.Status {
		case "", structs.HealthPassing, structs.HealthWarning, structs.HealthCritical:
		default:
			return serverError("Status for checks must 'passing', 'warning', 'critical'")
		}
	}
	return nil
}

// isAnyAddress reports whether addr is the unspecified address (0.0.0.0 or
// ::, optionally bracketed), which Consul refuses as a service address.
func isAnyAddress(addr string) bool {
	if len(addr) > 2 && addr[0] == '[' && addr[len(addr)-1] == ']' {
		addr = addr[1 : len(addr)-1]
	}
	ip := net.ParseIP(addr)
	return ip != nil && ip.IsUnspecified()
}

// catalogDeregister handles PUT /v1/catalog/deregister. It answers true,
// also for a node that does not exist.
func (s *Server) catalogDeregister(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DeregisterRequest
	if err := decodeRequest(r, &args); err != nil {
		return nil, err
	}
	if args.Datacenter == "" {
		args.Datacenter = s.dc
	}
	args.Token = parseToken(r)
	if args.Node == "" {
		return nil, serverError("Must provide node")
	}
	if err := structs.MethodCatalogDeregister.Call(r.Context(), s.rpc, &args, &struct{}{}); err != nil {
		return nil, err
	}
	return true, nil
}

// catalogDatacenters serves GET /v1/catalog/datacenters: the datacenters
// a server's WAN pool knows, nearest first by estimated round trip. Like
// Consul's, the read is neither blocking nor indexed.
func (s *Server) catalogDatacenters(_ http.ResponseWriter, r *http.Request) (any, error) {
	var out []string
	if err := structs.MethodCatalogListDatacenters.Call(r.Context(), s.rpc, &structs.DCSpecificRequest{}, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// catalogNodes handles GET /v1/catalog/nodes.
func (s *Server) catalogNodes(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.DCSpecificRequest{NodeMetaFilters: parseMetaFilter(r), Source: s.parseSource(r)}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.IndexedNodes
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodCatalogListNodes.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	nodes := make(structs.Nodes, 0, len(out.Nodes))
	for _, n := range out.Nodes {
		if n != nil {
			nodes = append(nodes, cleanNode(n))
		}
	}
	return nodes, nil
}

// catalogServices handles GET /v1/catalog/services: {"name": [tags]}.
func (s *Server) catalogServices(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.DCSpecificRequest{NodeMetaFilters: parseMetaFilter(r)}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.IndexedServices
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := cachedCall(s, w, r, structs.MethodCatalogListServices, &args, &out); err != nil {
		return nil, err
	}
	services := make(map[string][]string, len(out.Services))
	for name, tags := range out.Services {
		services[name] = orEmpty(tags)
	}
	return services, nil
}

// catalogServiceNodes handles GET /v1/catalog/service/<name>.
func (s *Server) catalogServiceNodes(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.serviceNodes(w, r, "/v1/catalog/service/", false)
}

// catalogConnectNodes handles GET /v1/catalog/connect/<name>: the service's
// Connect endpoints.
func (s *Server) catalogConnectNodes(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.serviceNodes(w, r, "/v1/catalog/connect/", true)
}

func (s *Server) serviceNodes(w http.ResponseWriter, r *http.Request, prefix string, connect bool) (any, error) {
	args := structs.ServiceSpecificRequest{Connect: connect, NodeMetaFilters: parseMetaFilter(r)}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.ServiceTags, args.TagFilter = parseTags(r)
	args.Source = s.parseSource(r)
	args.ServiceName = pathSuffix(r, prefix)
	if args.ServiceName == "" {
		return nil, badRequest("Missing service name")
	}
	var out structs.IndexedServiceNodes
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := cachedCall(s, w, r, structs.MethodCatalogServiceNodes, &args, &out); err != nil {
		return nil, err
	}
	nodes := make(structs.ServiceNodes, 0, len(out.ServiceNodes))
	for _, sn := range out.ServiceNodes {
		if sn == nil {
			continue
		}
		c := *sn
		c.ServiceTags = orEmpty(c.ServiceTags)
		c.ServiceMeta = orEmptyMap(c.ServiceMeta)
		c.NodeMeta = orEmptyMap(c.NodeMeta)
		nodes = append(nodes, &c)
	}
	return nodes, nil
}

// catalogNodeServices handles GET /v1/catalog/node/<node>. A missing node is
// 200 null, as in Consul.
func (s *Server) catalogNodeServices(w http.ResponseWriter, r *http.Request) (any, error) {
	found, err := s.readNodeServices(w, r, "/v1/catalog/node/")
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nullJSON{}, nil
	}
	ns := &structs.NodeServices{
		Node:     cleanNode(found.Node),
		Services: make(map[string]*structs.NodeService, len(found.Services)),
	}
	for id, svc := range found.Services {
		if svc != nil {
			ns.Services[id] = cleanService(svc)
		}
	}
	return ns, nil
}

// readNodeServices reads the services of the node named in the path
// after prefix; nil (and no error) when the node does not exist.
func (s *Server) readNodeServices(w http.ResponseWriter, r *http.Request, prefix string) (*structs.NodeServices, error) {
	var args structs.NodeSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.Node = pathSuffix(r, prefix)
	if args.Node == "" {
		return nil, badRequest("Missing node name")
	}
	var out structs.IndexedNodeServices
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodCatalogNodeServices.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	if out.NodeServices == nil || out.NodeServices.Node == nil {
		return nil, nil
	}
	return out.NodeServices, nil
}

// catalogNodeServiceList handles GET /v1/catalog/node-services/<node>: the
// node's services as a list sorted by ID. A missing node is 200 with a null
// Node and no services, as in Consul.
func (s *Server) catalogNodeServiceList(w http.ResponseWriter, r *http.Request) (any, error) {
	found, err := s.readNodeServices(w, r, "/v1/catalog/node-services/")
	if err != nil {
		return nil, err
	}
	list := nodeServiceList{Services: []*structs.NodeService{}}
	if ns := found; ns != nil {
		list.Node = cleanNode(ns.Node)
		for _, svc := range ns.Services {
			if svc != nil {
				list.Services = append(list.Services, cleanService(svc))
			}
		}
		slices.SortFunc(list.Services, func(a, b *structs.NodeService) int { return strings.Compare(a.ID, b.ID) })
	}
	return list, nil
}

// nodeServiceList is Consul's body of /v1/catalog/node-services/<node>.
type nodeServiceList struct {
	Node     *structs.Node
	Services []*structs.NodeService
}

// nullJSON encodes as the JSON literal null (a nil interface would mean "no
// body" to wrap).
type nullJSON struct{}

// MarshalJSON writes null.
func (nullJSON) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// cleanNode copies a node with Consul's empty (not null) metadata.
func cleanNode(n *structs.Node) *structs.Node {
	c := *n
	c.Meta = orEmptyMap(c.Meta)
	return &c
}

// cleanService copies a service with Consul's empty (not null) tags and
// metadata.
func cleanService(svc *structs.NodeService) *structs.NodeService {
	c := *svc
	c.Tags = orEmpty(c.Tags)
	c.Meta = orEmptyMap(c.Meta)
	return &c
}

// orEmpty makes a nil list encode as [] instead of null.
func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// orEmptyMap makes a nil map encode as {} instead of null.
func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
