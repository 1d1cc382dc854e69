// Package httpapi serves Consul's HTTP API (the /v1/... endpoints) on top of
// Trellis' internal RPC methods. Every detail a client can observe (paths,
// query parameters, JSON shapes, status codes, error texts and the
// X-Consul-* headers) follows Consul, because existing tools (the official Go
// client, consul-template, Patroni, Traefik, ...) depend on them.
//
// The package holds no state of its own: each request is parsed, turned into
// one RPC (see structs/endpoints.go) and the reply is encoded back.
package httpapi

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/trellis-mesh/trellis/structs"
)

// Config holds every dependency of the HTTP API.
type Config struct {
	// RPC answers every read and write: a server locally, a client agent
	// by forwarding to a server. Required.
	RPC structs.Caller
	// Logger receives request errors and recovered panics. Nil discards.
	Logger *slog.Logger
	// NodeName is this agent's node: the default node of new sessions.
	// Required.
	NodeName string
	// Datacenter is this agent's datacenter: the default of ?dc and of
	// write bodies without one. Required.
	Datacenter string
	// SessionTTLMin is the smallest session TTL accepted (Consul's
	// session_ttl_min). Zero means Consul's default, 10s.
	SessionTTLMin time.Duration
	// Self describes this agent for /v1/agent/self. Nil serves a minimal
	// answer built from NodeName and Datacenter.
	Self func() SelfInfo
	// Metrics, when set, is served at /v1/agent/metrics (for example a
	// Prometheus handler). Nil serves an empty metrics summary.
	Metrics http.Handler
	// Membership serves /v1/agent/members and /v1/agent/join; nil answers
	// them with 501.
	Membership Membership
	// WANMembership is a server's WAN pool, for ?wan on /v1/agent/members
	// and /v1/agent/join; nil on a client agent (no members, joins
	// refused as Consul refuses them).
	WANMembership Membership
	// Leaver serves /v1/agent/leave and /v1/agent/force-leave; nil answers
	// them with 501.
	Leaver Leaver
	// Reloader serves /v1/agent/reload; nil answers it with 501.
	Reloader Reloader
	// Monitor serves /v1/agent/monitor; nil answers it with 501.
	Monitor Monitor
	// LeafCerts serves /v1/agent/connect/ca/leaf/<service> (connect_ca.go);
	// nil answers it with 500.
	LeafCerts LeafCerts
	// ConnectAuthorizer answers /v1/agent/connect/authorize; nil means
	// DefaultAllowAuthorizer.
	ConnectAuthorizer ConnectAuthorizer
	// GRPCFiles serves /v1/agent/connect/grpc-files/<id> (grpc_files.go);
	// nil answers it with 501.
	GRPCFiles GRPCFiles
	// Local serves the agent's own services and checks; nil answers those
	// endpoints with 501.
	Local LocalAgent
	// ProxyStatus serves /v1/agent/proxy-status/<id>; nil answers it with
	// 501.
	ProxyStatus ProxyStatuses
	// Events serves /v1/event/fire and /v1/event/list; nil answers them
	// with 501.
	Events Events
	// Cache answers the ?cached reads (cached.go); nil answers them from
	// the servers, as if ?cached were absent, with X-Cache: MISS.
	Cache Cache
	// Host serves /v1/agent/host (agent_host.go); nil answers it with 501.
	Host HostInfo
	// EnableDebug serves /debug/pprof/ (debug.go), Consul's enable_debug.
	EnableDebug bool
	// ACLsEnabled says the cluster runs with ACLs: PUT /v1/agent/token
	// answers 401 without it, as Consul does. It requires ACL.
	ACLsEnabled bool
	// DefaultACLPolicy is acl.default_policy, advertised on every answer
	// in X-Consul-Default-ACL-Policy as Consul does; "" is "allow".
	DefaultACLPolicy string
	// Tokens is the agent's token store (agent_token.go); nil answers
	// /v1/agent/token with 401 and adds no default token.
	Tokens AgentTokens
	// ACL decides the agent's own endpoints (agent_acl.go) when ACLs are
	// on; nil, with ACLs off, lets every request through. Endpoints that
	// reach the servers are decided there either way.
	ACL ACLChecker
}

// ErrInvalidConfig is returned by New when a required Config field is
// missing.
var ErrInvalidConfig = errors.New("httpapi: invalid config")

// defaultSessionTTLMin is Consul's default session_ttl_min.
const defaultSessionTTLMin = 10 * time.Second

// Server is the HTTP API. It implements http.Handler; mount it at the root of
// the agent's HTTP listener.
type Server struct {
	rpc        structs.Caller
	log        *slog.Logger
	nodeName   string
	dc         string
	sessionMin time.Duration
	self       func() SelfInfo
	metrics    http.Handler
	members    Membership
	wan        Membership
	leaver     Leaver
	reloader   Reloader
	monitor    Monitor
	local      LocalAgent
	// proxyStatus reports xDS streams.
	proxyStatus ProxyStatuses
	leafCerts   LeafCerts
	grpcFiles   GRPCFiles
	authorizer  ConnectAuthorizer
	events      Events
	cache       Cache
	enableDebug bool
	host        HostInfo
	aclsEnabled bool
	// defaultACLPolicy is X-Consul-Default-ACL-Policy's value.
	defaultACLPolicy string
	tokens           AgentTokens
	acl              ACLChecker
	handler          http.Handler
}

// New builds the HTTP API from cfg.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.RPC == nil:
		return nil, fmt.Errorf("%w: RPC is required", ErrInvalidConfig)
	case cfg.NodeName == "":
		return nil, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	case cfg.Datacenter == "":
		return nil, fmt.Errorf("%w: Datacenter is required", ErrInvalidConfig)
	case cfg.SessionTTLMin < 0:
		return nil, fmt.Errorf("%w: SessionTTLMin is negative", ErrInvalidConfig)
	case cfg.ACLsEnabled && cfg.ACL == nil:
		// Otherwise the agent's own endpoints would let every token in.
		return nil, fmt.Errorf("%w: ACL is required with ACLsEnabled", ErrInvalidConfig)
	}
	s := &Server{
		rpc:              cfg.RPC,
		log:              cfg.Logger,
		nodeName:         cfg.NodeName,
		dc:               cfg.Datacenter,
		sessionMin:       cfg.SessionTTLMin,
		self:             cfg.Self,
		metrics:          cfg.Metrics,
		members:          cfg.Membership,
		wan:              cfg.WANMembership,
		leaver:           cfg.Leaver,
		reloader:         cfg.Reloader,
		monitor:          cfg.Monitor,
		local:            cfg.Local,
		proxyStatus:      cfg.ProxyStatus,
		leafCerts:        cfg.LeafCerts,
		grpcFiles:        cfg.GRPCFiles,
		authorizer:       cfg.ConnectAuthorizer,
		events:           cfg.Events,
		cache:            cfg.Cache,
		enableDebug:      cfg.EnableDebug,
		host:             cfg.Host,
		aclsEnabled:      cfg.ACLsEnabled,
		defaultACLPolicy: cmp.Or(cfg.DefaultACLPolicy, "allow"),
		tokens:           cfg.Tokens,
		acl:              cfg.ACL,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.sessionMin == 0 {
		s.sessionMin = defaultSessionTTLMin
	}
	s.handler = s.recoverPanics(printablePathOnly(s.routes()))
	return s, nil
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, s.withDefaultToken(r))
}

// routes registers every endpoint with the methods Consul allows on it.
// http.ServeMux is used on purpose: Consul uses it too, so path cleaning
// (a "//" or "/../" in the path answers 301 to the cleaned path) and the
// trailing-slash redirects behave identically.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	get, put := []string{http.MethodGet}, []string{http.MethodPut}
	handle := func(pattern string, methods []string, fn endpoint) {
		mux.Handle(pattern, s.wrap(methods, fn))
	}

	// The agent's own endpoints with a fixed rule (Consul's "ACL
	// Required"); the others check inside, once they know the service or
	// check concerned.
	handle("/v1/agent/self", get, s.gated(s.agentReadCheck, s.agentSelf))
	handle("/v1/agent/metrics", get, s.gated(s.agentReadCheck, s.agentMetrics))
	handle("/v1/agent/host", get, s.gated(operatorReadCheck, s.agentHost))
	handle("/v1/agent/members", get, s.agentMembers)
	handle("/v1/agent/join/", put, s.gated(s.agentWriteCheck, s.agentJoin))
	handle("/v1/agent/leave", put, s.gated(s.agentWriteCheck, s.agentLeave))
	handle("/v1/agent/reload", put, s.gated(s.agentWriteCheck, s.agentReload))
	handle("/v1/agent/monitor", get, s.gated(s.agentReadCheck, s.agentMonitor))
	handle("/v1/agent/force-leave/", put, s.gated(operatorWriteCheck, s.agentForceLeave))
	handle("/v1/agent/services", get, s.agentServices)
	handle("/v1/agent/service/register", put, s.agentServiceRegister)
	handle("/v1/agent/service/deregister/", put, s.agentServiceDeregister)
	handle("/v1/agent/service/maintenance/", put, s.agentMaintenance(true))
	handle("/v1/agent/service/", get, s.agentService)
	handle("/v1/agent/maintenance", put, s.agentMaintenance(false))
	handle("/v1/agent/checks", get, s.agentChecks)
	handle("/v1/agent/check/register", put, s.agentCheckRegister)
	handle("/v1/agent/check/deregister/", put, s.agentCheckDeregister)
	handle("/v1/agent/check/pass/", put, s.agentCheckTTL(structs.HealthPassing, "/v1/agent/check/pass/"))
	handle("/v1/agent/check/warn/", put, s.agentCheckTTL(structs.HealthWarning, "/v1/agent/check/warn/"))
	handle("/v1/agent/check/fail/", put, s.agentCheckTTL(structs.HealthCritical, "/v1/agent/check/fail/"))
	handle("/v1/agent/check/update/", put, s.agentCheckUpdate)
	handle("/v1/agent/health/service/id/", get, s.agentHealthService(false))
	handle("/v1/agent/health/service/name/", get, s.agentHealthService(true))
	handle("/v1/agent/proxy-status/", get, s.agentProxyStatus)

	handle("/v1/catalog/register", put, s.catalogRegister)
	handle("/v1/catalog/deregister", put, s.catalogDeregister)
	handle("/v1/catalog/datacenters", get, s.catalogDatacenters)
	handle("/v1/catalog/nodes", get, s.catalogNodes)
	handle("/v1/catalog/services", get, s.catalogServices)
	handle("/v1/catalog/service/", get, s.catalogServiceNodes)
	handle("/v1/catalog/connect/", get, s.catalogConnectNodes)
	handle("/v1/catalog/node/", get, s.catalogNodeServices)
	handle("/v1/catalog/node-services/", get, s.catalogNodeServiceList)
	handle("/v1/catalog/gateway-services/", get, s.catalogGatewayServices)

	handle("/v1/health/service/", get, s.healthServiceNodes)
	handle("/v1/health/connect/", get, s.healthConnectNodes)
	handle("/v1/health/ingress/", get, s.healthIngressNodes)
	handle("/v1/health/checks/", get, s.healthServiceChecks)
	handle("/v1/health/node/", get, s.healthNodeChecks)
	handle("/v1/health/state/", get, s.healthChecksInState)

	handle("/v1/kv/", []string{http.MethodGet, http.MethodPut, http.MethodDelete}, s.kvEndpoint)
	handle("/v1/txn", put, s.txn)

	handle("/v1/session/create", put, s.sessionCreate)
	handle("/v1/session/destroy/", put, s.sessionDestroy)
	handle("/v1/session/renew/", put, s.sessionRenew)
	handle("/v1/session/info/", get, s.sessionInfo)
	handle("/v1/session/node/", get, s.sessionsForNode)
	handle("/v1/session/list", get, s.sessionList)

	handle("/v1/status/leader", get, s.statusLeader)
	handle("/v1/status/peers", get, s.statusPeers)
	handle("/v1/operator/raft/configuration", get, s.operatorRaftConfiguration)
	handle("/v1/operator/raft/peer", []string{http.MethodDelete}, s.operatorRaftPeer)
	handle("/v1/operator/autopilot/health", get, s.operatorAutopilotHealth)
	handle("/v1/operator/keyring", []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}, s.operatorKeyring)
	// operator.go
	handle("/v1/operator/autopilot/configuration", []string{http.MethodGet, http.MethodPut}, s.operatorAutopilotConfiguration)
	handle("/v1/operator/autopilot/state", get, s.operatorAutopilotState)
	handle("/v1/operator/raft/transfer-leader", []string{http.MethodPost}, s.operatorRaftTransferLeader)
	handle("/v1/operator/usage", get, s.operatorUsage)
	handle("/v1/snapshot", []string{http.MethodGet, http.MethodPut}, s.snapshot) // snapshot.go

	handle("/v1/connect/ca/roots", get, s.connectCARoots)
	handle("/v1/connect/ca/configuration", []string{http.MethodGet, http.MethodPut}, s.connectCAConfiguration)
	handle("/v1/agent/connect/ca/roots", get, s.connectCARoots)
	handle("/v1/agent/connect/ca/leaf/", get, s.agentConnectCALeaf)
	handle("/v1/agent/connect/authorize", []string{http.MethodPost}, s.agentConnectAuthorize)
	handle("/v1/agent/connect/grpc-files/", get, s.agentGRPCFiles)

	// Config entries, intentions and discovery chains (config.go,
	// intentions.go, discovery_chain.go).
	handle("/v1/config", put, s.configApply)
	handle("/v1/config/", []string{http.MethodGet, http.MethodDelete}, s.configEndpoint)
	handle("/v1/exported-services", get, s.exportedServices)
	handle("/v1/connect/intentions", []string{http.MethodGet, http.MethodPost}, s.intentions)
	handle("/v1/connect/intentions/", []string{http.MethodGet, http.MethodPut, http.MethodDelete}, s.intentionByID)
	handle("/v1/connect/intentions/exact", []string{http.MethodGet, http.MethodPut, http.MethodDelete}, s.intentionExact)
	handle("/v1/connect/intentions/match", get, s.intentionMatch)
	handle("/v1/connect/intentions/check", get, s.intentionCheck)
	handle("/v1/discovery-chain/", []string{http.MethodGet, http.MethodPost}, s.discoveryChain)

	// Events (event.go) and network coordinates (coordinate.go).
	handle("/v1/event/fire/", put, s.eventFire)
	handle("/v1/query", []string{http.MethodGet, http.MethodPost}, s.preparedQueryGeneral)
	handle("/v1/query/", []string{http.MethodGet, http.MethodPut, http.MethodDelete}, s.preparedQuerySpecific)
	handle("/v1/event/list", get, s.eventList)
	handle("/v1/coordinate/datacenters", get, s.coordinateDatacenters)
	handle("/v1/coordinate/nodes", get, s.coordinateNodes)
	handle("/v1/coordinate/node/", get, s.coordinateNode)
	handle("/v1/coordinate/update", put, s.coordinateUpdate)

	handle("/v1/internal/service-virtual-ip", put, s.internalServiceVirtualIP) // internal.go

	// ACLs (acl.go, acl_policy.go) and the agent's tokens (agent_token.go).
	handle("/v1/agent/token/", put, s.agentToken)
	gpd := []string{http.MethodGet, http.MethodPut, http.MethodDelete}
	handle("/v1/acl/bootstrap", put, s.aclBootstrap)
	handle("/v1/acl/replication", get, s.aclReplication)
	handle("/v1/acl/token", put, s.aclTokenCreate)
	handle("/v1/acl/token/", gpd, s.aclTokenSpecific)
	handle("/v1/acl/tokens", get, s.aclTokenList)
	handle("/v1/acl/policy", put, s.aclPolicyCreate)
	handle("/v1/acl/policy/", gpd, s.aclPolicySpecific)
	handle("/v1/acl/policies", get, s.aclPolicyList)
	handle("/v1/acl/role", put, s.aclRoleCreate)
	handle("/v1/acl/role/", gpd, s.aclRoleSpecific)
	handle("/v1/acl/roles", get, s.aclRoleList)
	handle("/v1/acl/templated-policies", get, s.aclTemplatedPolicyList)
	handle("/v1/acl/templated-policy/name/", get, s.aclTemplatedPolicyRead)
	handle("/v1/acl/templated-policy/preview/", []string{http.MethodPost}, s.aclTemplatedPolicyPreview)

	if s.enableDebug {
		debugRoutes(mux)
	}
	mux.HandleFunc("/", index)
	return mux
}

// index answers the root like a Consul agent without the UI, and 404 with an
// empty body for every unknown path.
func index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "Consul Agent")
}

// endpoint is one API handler. It returns the object to encode as JSON
// (nil when it already wrote the response itself) or an error, which wrap
// turns into a status code in writeError.
type endpoint func(w http.ResponseWriter, r *http.Request) (any, error)

// withStatus makes wrap encode body as JSON under a status other than 200
// (a failed transaction answers 409 with its errors).
type withStatus struct {
	code int
	body any
}

// wrap applies what every endpoint shares: Consul's OPTIONS and 405
// answers, the query-string sanity check, JSON encoding and the error
// mapping.
func (s *Server) wrap(methods []string, fn endpoint) http.Handler {
	allow := append([]string{http.MethodOptions}, methods...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Consul answers 500 with an empty body to a query string it cannot
		// parse (bad %-escapes, ';' separators).
		if r.URL.RawQuery != "" {
			if _, err := parseRawQuery(r.URL.RawQuery); err != nil {
				s.log.Error("failed to decode query", "method", r.Method, "path", r.URL.Path, "error", err)
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		}
		// Advertise the default ACL policy as Consul does (its
		// default, "allow", also with ACLs disabled).
		w.Header().Set("X-Consul-Default-ACL-Policy", s.defaultACLPolicy)
		if r.Method == http.MethodOptions {
			w.Header().Add("Allow", strings.Join(allow, ","))
			return
		}
		var (
			obj any
			err error
		)
		if !contains(methods, r.Method) {
			err = &methodNotAllowedError{method: r.Method, allow: allow}
		} else {
			obj, err = fn(w, r)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if obj == nil {
			return
		}
		code := http.StatusOK
		if ws, ok := obj.(withStatus); ok {
			code, obj = ws.code, ws.body
		}
		s.writeJSON(w, r, code, obj)
	})
}

// httpError is an error with the exact status code and plain-text body
// Consul gives for it.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

// badRequest is a 400 with Consul's message.
func badRequest(msg string) error { return &httpError{code: http.StatusBadRequest, msg: msg} }

// serverError is a 500 with Consul's message: Consul reports most request
// validation failures (those its servers detect) as 500.
func serverError(msg string) error {
	return &httpError{code: http.StatusInternalServerError, msg: msg}
}

// tooLarge is a 413 with Consul's message.
func tooLarge(msg string) error { return &httpError{code: http.StatusRequestEntityTooLarge, msg: msg} }

// methodNotAllowedError is Consul's 405: an Allow header and "method X not
// allowed".
type methodNotAllowedError struct {
	method string
	allow  []string
}

func (e *methodNotAllowedError) Error() string {
	return fmt.Sprintf("method %s not allowed", e.method)
}

// writeError is the one place that maps errors to status codes.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		code = http.StatusInternalServerError
		msg  = err.Error()
		he   *httpError
		se   *StatusError
		mna  *methodNotAllowedError
	)
	switch {
	case errors.As(err, &he):
		code = he.code
	case errors.As(err, &se):
		code = se.Code
	case errors.As(err, &mna):
		w.Header().Add("Allow", strings.Join(mna.allow, ","))
		code = http.StatusMethodNotAllowed
	case errors.Is(err, structs.ErrACLDisabled):
		// Consul answers 401 when ACLs are off.
		code = http.StatusUnauthorized
	case structs.CodeOf(err) == structs.CodePermissionDenied:
		code = http.StatusForbidden
	case structs.CodeOf(err) == structs.CodeRateLimited:
		code = http.StatusTooManyRequests
	case structs.IsInvalidFilter(err):
		// A malformed ?filter= is Consul's 500 "Failed to create boolean
		// expression evaluator: ..." (its servers detect it), not a 400.
		code = http.StatusInternalServerError
	}
	level := slog.LevelError
	if code < http.StatusInternalServerError || r.Context().Err() != nil {
		level = slog.LevelInfo
	}
	s.log.Log(r.Context(), level, "request error", "method", r.Method, "path", r.URL.Path, "status", code, "error", err)
	if msg != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}

// writeJSON encodes obj the way Consul does: compact, or indented with a
// trailing newline under ?pretty.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, code int, obj any) {
	_, pretty := r.URL.Query()["pretty"]
	buf, err := marshalJSON(obj, pretty)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(buf)
}

// setMeta writes the headers of a read, in the order Consul writes them
// (net/http itself emits header fields sorted by name, as in Consul).
// X-Consul-Index is never 0: a client that sends ?index=0 back would never
// block and would spin.
func setMeta(w http.ResponseWriter, m *structs.QueryMeta, q *structs.QueryOptions) {
	index := m.Index
	if index == 0 {
		index = 1
	}
	h := w.Header()
	h.Set("X-Consul-Index", fmt.Sprint(index))
	last := m.LastContact
	if last < 0 {
		last = 0
	}
	h.Set("X-Consul-LastContact", fmt.Sprint(uint64(last/time.Millisecond)))
	known := "false"
	if m.KnownLeader {
		known = "true"
	}
	h.Set("X-Consul-KnownLeader", known)
	if m.ResultsFilteredByACLs {
		// Consul sends the header only when something was left out.
		h.Set("X-Consul-Results-Filtered-By-ACLs", "true")
	}
	if q != nil {
		h.Set("X-Consul-Effective-Consistency", consistencyLevel(q))
	}
	h.Set("X-Consul-Query-Backend", "blocking-query")
}

// consistencyLevel names the consistency mode a read was served with.
func consistencyLevel(q *structs.QueryOptions) string {
	switch {
	case q.AllowStale:
		return "stale"
	case q.RequireConsistent:
		return "consistent"
	}
	return "leader"
}

// printablePathOnly answers 400 with an empty body to a path holding a
// non-printable character (a control character in a KV key, say), before
// any routing: Consul wraps its whole mux in go-cleanhttp's
// PrintablePathCheckHandler, which does exactly this.
func printablePathOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.IndexFunc(r.URL.Path, func(c rune) bool { return !unicode.IsPrint(c) }) != -1 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// recoverPanics turns a panic in a handler into a logged 500 so that no
// input can take the agent down.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // sentinel value, compared as net/http does
				panic(v)
			}
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "Internal server error")
		}()
		next.ServeHTTP(w, r)
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
