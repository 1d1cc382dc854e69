package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/agent/authz"
	"github.com/trellis-mesh/trellis/structs"
)

// LocalAgent is the agent's own services and checks, behind the
// /v1/agent/service*, /v1/agent/check* and maintenance endpoints. Its
// errors carry their HTTP status as *StatusError where it is not 500.
type LocalAgent interface {
	RegisterService(def *structs.ServiceDefinition, token string, replaceExistingChecks bool) error
	DeregisterService(id string) error
	// Services returns every local service by ID.
	Services() map[string]*structs.NodeService
	// Service returns the local service registered under id, nil if none:
	// what a request about one service reads, instead of copying them all.
	Service(id string) *structs.NodeService
	// WatchService returns the service (nil if unknown), its content hash,
	// and a channel closed when it next changes.
	WatchService(id string) (*structs.NodeService, string, <-chan struct{})
	Checks() structs.HealthChecks
	RegisterCheck(def *structs.CheckDefinition, token string) error
	DeregisterCheck(id string) error
	// UpdateTTL sets a TTL check's status and output.
	UpdateTTL(id, status, output string) error
	// SetMaintenance puts a service (or, with serviceID "", the node) in or
	// out of maintenance.
	SetMaintenance(serviceID string, enable bool, reason string) error
}

// StatusError is an error with the HTTP status the API answers it with.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return e.Msg }

// agentService is a local service as /v1/agent/services shows it: without
// Raft indexes, and with Proxy and Connect only where they mean something.
type agentService struct {
	Kind              structs.ServiceKind `json:",omitempty"`
	ID                string
	Service           string
	Tags              []string
	Meta              map[string]string
	Port              int
	Ports             structs.ServicePorts `json:",omitempty"`
	Address           string
	SocketPath        string                            `json:",omitempty"`
	TaggedAddresses   map[string]structs.ServiceAddress `json:",omitempty"`
	Weights           structs.Weights
	EnableTagOverride bool
	Proxy             *structs.ConnectProxyConfig `json:",omitempty"`
	Connect           *structs.ServiceConnect     `json:",omitempty"`
	ContentHash       string                      `json:",omitempty"`
	Datacenter        string
	Locality          *structs.Locality `json:",omitempty"`
}

func (s *Server) toAgentService(ns *structs.NodeService, hash string) agentService {
	out := agentService{
		Kind: ns.Kind, ID: ns.ID, Service: ns.Service, Tags: orEmpty(ns.Tags), Meta: orEmptyMap(ns.Meta),
		Port: ns.Port, Ports: ns.Ports, Locality: ns.Locality, Address: ns.Address, SocketPath: ns.SocketPath, TaggedAddresses: ns.TaggedAddresses,
		EnableTagOverride: ns.EnableTagOverride, ContentHash: hash, Datacenter: s.dc,
		Weights: structs.Weights{Passing: 1, Warning: 1},
	}
	if ns.Weights != nil {
		out.Weights = *ns.Weights
	}
	if ns.Kind != structs.ServiceKindTypical {
		p := ns.Proxy
		out.Proxy = &p
	}
	if ns.Connect.Native {
		c := ns.Connect
		out.Connect = &c
	}
	return out
}

func (s *Server) localAgent() (LocalAgent, error) {
	if s.local == nil {
		return nil, errNotServed
	}
	return s.local, nil
}

// decodeAgentDefinition decodes a service or check definition, accepting
// Consul's snake_case keys as well as CamelCase; a body that cannot be
// decoded is Consul's 400 "Request decode failed: ...".
func decodeAgentDefinition(r *http.Request, out any) error {
	body, err := readBody(r, maxJSONBody)
	if err == nil {
		err = structs.DecodeAgentDefinition(body, out)
	}
	if err != nil {
		return badRequest(fmt.Sprintf("Request decode failed: %v", err))
	}
	return nil
}

// agentServiceRegister handles PUT /v1/agent/service/register.
func (s *Server) agentServiceRegister(_ http.ResponseWriter, r *http.Request) (any, error) {
	la, err := s.localAgent()
	if err != nil {
		return nil, err
	}
	var def structs.ServiceDefinition
	if err := decodeAgentDefinition(r, &def); err != nil {
		return nil, err
	}
	if err := s.requireACL(r, serviceRegisterChecks(&def)...); err != nil {
		return nil, err
	}
	_, replace := r.URL.Query()["replace-existing-checks"]
	if v := r.URL.Query().Get("replace-existing-checks"); v == "false" {
		replace = false
	}
	return nil, la.RegisterService(&def, parseToken(r), replace)
}

// agentServiceDeregister handles PUT /v1/agent/service/deregister/<id>.
func (s *Server) agentServiceDeregister(_ http.ResponseWriter, r *http.Request) (any, error) {
	la, err := s.localAgent()
	if err != nil {
		return nil, err
	}
	id := pathSuffix(r, "/v1/agent/service/deregister/")
	if err := s.requireACL(r, localServiceWriteChecks(la, id)...); err != nil {
		return nil, err
	}
	return nil, la.DeregisterService(id)
}

// agentServices handles GET /v1/agent/services (?filter= over each
// service as it is shown: ID, Service, Tags, Meta, Port, Proxy, ...).
func (s *Server) agentServices(w http.ResponseWriter, r *http.Request) (any, error) {
	la, err := s.localAgent()
	if err != nil {
		return nil, err
	}
	filter, err := parseLocalFilter(r, (*agentService)(nil))
	if err != nil {
		return nil, err
	}
	services := la.Services()
	ids := make([]string, 0, len(services))
	checks := make([]authz.Check, 0, len(services))
	for id, ns := range services {
		ids = append(ids, id)
		checks = append(checks, authz.Read(acl.ResourceService, ns.Service))
	}
	allowed, err := s.aclAllowed(r, checks)
	if err != nil {
		return nil, err
	}
	out := map[string]agentService{}
	for i, id := range ids {
		if !allowed[i] {
			continue
		}
		svc := s.toAgentService(services[id], "")
		if filter == nil || filter.Evaluate(&svc) {
			out[id] = svc
		}
	}
	markFiltered(w, r, allowed)
	return out, nil
}

// parseLocalFilter compiles ?filter= for the agent's own services and
// checks (nil without one), against elem's type. They never reach a
// server, so this agent filters them itself, with the evaluator and the
// error the servers use.
func parseLocalFilter(r *http.Request, elem any) (*structs.Filter, error) {
	expr := r.URL.Query().Get("filter")
	if expr == "" {
		return nil, nil
	}
	return structs.CompileFilterFor(expr, elem)
}

// agentService handles GET /v1/agent/service/<id>: blocking by content hash
// (?hash=<last ContentHash>&wait=) rather than by Raft index, since local
// services have none.
func (s *Server) agentService(w http.ResponseWriter, r *http.Request) (any, error) {
	la, err := s.localAgent()
	if err != nil {
		return nil, err
	}
	id := pathSuffix(r, "/v1/agent/service/")
	want := r.URL.Query().Get("hash")
	wait := defaultAgentWait
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := parseWaitValue(v)
		if err != nil {
			return nil, badRequest("Invalid wait time")
		}
		wait = d
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		ns, hash, changed := la.WatchService(id)
		if ns == nil {
			return nil, &StatusError{Code: http.StatusNotFound, Msg: fmt.Sprintf("unknown service ID: %s", id)}
		}
		if err := s.requireACL(r, authz.Read(acl.ResourceService, ns.Service)); err != nil {
			return nil, err
		}
		if want == "" || want != hash {
			w.Header().Set("X-Consul-ContentHash", hash)
			return s.toAgentService(ns, hash), nil
		}
		select {
		case <-changed:
		case <-timer.C:
			want = ""
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
}

// defaultAgentWait is the default wait of a hash-blocking agent query.
const defaultAgentWait = 5 * time.Minute

// parseWaitValue parses "60s" or "60000ms" (or a bare number of seconds),
// capped at 10 minutes as Consul does.
func parseWaitValue(v string) (time.Duration, error) {
	if !strings.ContainsAny(v, "smhun") {
		v += "s"
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New("invalid wait")
	}
	if d > 10*time.Minute {
		d = 10 * time.Minute
	}
	return d, nil
}

// agentChecks handles GET /v1/agent/checks (?filter= over each check:
// CheckID, Name, Status, ServiceName, ServiceTags, ...).
func (s *Server) agentChecks(w http.ResponseWriter, r *http.Request) (any, error) {
	la, err := s.localAgent()
	if err != nil {
		return nil, err
	}
	filter, err := parseLocalFilter(r, (*structs.HealthCheck)(nil))
	if err != nil {
		return nil, err
	}
	all := la.Checks()
	checks := make([]authz.Check, len(all))
	for i, c := range all {
		checks[i] = s.checkReadCheck(c)
	}
	allowed, err := s.aclAllowed(r, checks)
	if err != nil {
		return nil, err
	}
	markFiltered(w, r, allowed)
	out := map[string]*structs.HealthCheck{}
	for i, c := range all {
		if !allowed[i] {
			continue
		}
		if c.ServiceTags == nil {
			c.ServiceTags = []string{}
		}
		if filter == nil || filter.Evaluate(c) {
			out[c.CheckID] = c
		}
	}
	return out, nil
}

// agentCheckRegister handles PUT /v1/agent/check/register.
func (s *Server) agentCheckRegister(_ http.ResponseWriter, r *http.Request) (any, error) {
	la, err := s.localAgent()
	if err != nil {
		return nil, err
	}
	var def structs.CheckDefinition
	if err := decodeAgentDefinition(r, &def); err != nil {
		return nil, err
	}
	// A check of an unknown service needs nothing: its registration
	// fails on its own.
	need := s.checkWriteChecks("")
	if def.ServiceID != "" {
		need = localServiceWriteChecks(la, def.ServiceID)
	}
	if err := s.requireACL(r, need...); err != nil {
		return nil, err
	}
	return nil, la.RegisterCheck(&def, parseToken(r))
}

// agentCheckDeregister handles PUT /v1/agent/check/deregister/<id>.
func (s *Server) agentCheckDeregister(_ http.ResponseWriter, r *http.Request) (any, error) {
	la, err := s.localAgent()
	if err != nil {
		return nil, err
	}
	id := pathSuffix(r, "/v1/agent/check/deregister/")
	if err := s.requireACL(r, s.localCheckWriteChecks(la, id)...); err != nil {
		return nil, err
	}
	return nil, la.DeregisterCheck(id)
}

// agentCheckTTL handles PUT /v1/agent/check/pass|warn|fail/<id>?note=.
func (s *Server) agentCheckTTL(status, prefix string) endpoint {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		la, err := s.localAgent()
		if err != nil {
			return nil, err
		}
		id := pathSuffix(r, prefix)
		if err := s.requireACL(r, s.localCheckWriteChecks(la, id)...); err != nil {
			return nil, err
		}
		return nil, la.UpdateTTL(id, status, r.URL.Query().Get("note"))
	}
}

// agentCheckUpdate handles PUT /v1/agent/check/update/<id> with
// {"Status": ..., "Output": ...}.
func (s *Server) agentCheckUpdate(_ http.ResponseWriter, r *http.Request) (any, error) {
	la, err := s.localAgent()
	if err != nil {
		return nil, err
	}
	var body struct{ Status, Output string }
	if err := decodeRequest(r, &body); err != nil {
		return nil, err
	}
	switch body.Status {
	case structs.HealthPassing, structs.HealthWarning, structs.HealthCritical:
	default:
		return nil, badRequest(fmt.Sprintf("Invalid check status: '%s'", body.Status))
	}
	id := pathSuffix(r, "/v1/agent/check/update/")
	if err := s.requireACL(r, s.localCheckWriteChecks(la, id)...); err != nil {
		return nil, err
	}
	return nil, la.UpdateTTL(id, body.Status, body.Output)
}

// agentMaintenance handles PUT /v1/agent/maintenance and
// /v1/agent/service/maintenance/<id> (?enable=true|false&reason=).
func (s *Server) agentMaintenance(service bool) endpoint {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		la, err := s.localAgent()
		if err != nil {
			return nil, err
		}
		id := ""
		if service {
			id = pathSuffix(r, "/v1/agent/service/maintenance/")
			if id == "" {
				return nil, badRequest("Missing service ID")
			}
		}
		q := r.URL.Query()
		v := q.Get("enable")
		if v == "" {
			return nil, badRequest("Missing value for enable")
		}
		var enable bool
		switch strings.ToLower(v) {
		case "true":
			enable = true
		case "false":
		default:
			return nil, badRequest(fmt.Sprintf("Invalid value for enable: %q", v))
		}
		need := s.nodeWriteCheck(r)
		if service {
			need = localServiceWriteChecks(la, id)
		}
		if err := s.requireACL(r, need...); err != nil {
			return nil, err
		}
		return nil, la.SetMaintenance(id, enable, q.Get("reason"))
	}
}

// agentHealthService handles /v1/agent/health/service/id/<id> and
// /name/<name>: the aggregated local status as 200/429/503 (passing,
// warning, critical), as Consul does, or ?format=text for the bare word.
func (s *Server) agentHealthService(byName bool) endpoint {
	return func(w http.ResponseWriter, r *http.Request) (any, error) {
		la, err := s.localAgent()
		if err != nil {
			return nil, err
		}
		prefix := "/v1/agent/health/service/id/"
		if byName {
			prefix = "/v1/agent/health/service/name/"
		}
		key := pathSuffix(r, prefix)
		services := la.Services()
		if byName {
			if err := s.requireACL(r, authz.Read(acl.ResourceService, key)); err != nil {
				return nil, err
			}
		} else if ns, ok := services[key]; ok {
			if err := s.requireACL(r, authz.Read(acl.ResourceService, ns.Service)); err != nil {
				return nil, err
			}
		}
		checks := la.Checks()
		type entry struct {
			AggregatedStatus string
			Service          agentService
			Checks           structs.HealthChecks
		}
		var entries []entry
		worst := ""
		ids := make([]string, 0, len(services))
		for id := range services {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			ns := services[id]
			if (byName && ns.Service != key) || (!byName && id != key) {
				continue
			}
			var own structs.HealthChecks
			for _, c := range checks {
				if c.ServiceID == id || c.ServiceID == "" {
					own = append(own, c)
				}
			}
			st := aggregate(own)
			worst = worse(worst, st)
			if own == nil {
				own = structs.HealthChecks{}
			}
			entries = append(entries, entry{AggregatedStatus: st, Service: s.toAgentService(ns, ""), Checks: own})
		}
		if len(entries) == 0 {
			body := map[string]string{"AggregatedStatus": structs.HealthCritical}
			return withStatus{code: http.StatusNotFound, body: body}, nil
		}
		code := statusCode(worst)
		if r.URL.Query().Get("format") == "text" {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(code)
			_, _ = w.Write([]byte(worst))
			return nil, nil
		}
		if !byName {
			return withStatus{code: code, body: entries[0]}, nil
		}
		return withStatus{code: code, body: entries}, nil
	}
}

func aggregate(checks structs.HealthChecks) string {
	st := structs.HealthPassing
	for _, c := range checks {
		st = worse(st, c.Status)
	}
	return st
}

func rank(status string) int {
	switch status {
	case structs.HealthPassing:
		return 1
	case structs.HealthWarning:
		return 2
	case structs.HealthCritical:
		return 3
	case structs.HealthMaint:
		return 4
	}
	return 0
}

func worse(a, b string) string {
	if rank(b) > rank(a) {
		return b
	}
	return a
}

func statusCode(status string) int {
	switch status {
	case structs.HealthPassing:
		return http.StatusOK
	case structs.HealthWarning:
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}
