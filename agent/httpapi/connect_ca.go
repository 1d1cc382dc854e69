package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/agent/authz"
	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/structs"
)

// The Connect CA endpoints: /v1/connect/ca/{roots,configuration} (through
// the servers) and the agent-local /v1/agent/connect/ca/{roots,leaf/<svc>}
// and /v1/agent/connect/authorize.

// LeafCerts serves this agent's leaf certificates (agent/leafcert's
// Manager, through the agent). GetWithMeta answers the leaf signed with
// the caller's token (each token has its own, as in Consul's agent cache),
// blocks while minIndex is not passed (see the manager) and says whether
// the answer was already held.
type LeafCerts interface {
	GetWithMeta(ctx context.Context, service, token string, minIndex uint64, wait time.Duration) (*structs.IssuedCert, LeafMeta, error)
}

// LeafMeta is how a leaf was answered, for the X-Cache and Age headers
// Consul's agent sends with every leaf: Hit when the agent held it
// already, and then Age, how long it has.
type LeafMeta struct {
	Hit bool
	Age time.Duration
}

// ConnectAuthorizer decides whether a client identity may connect to a
// target service (POST /v1/agent/connect/authorize). The request has been
// validated already: client is a service identity. reason is shown to the
// caller as Consul shows it ("Matched L4 intention: ...").
//
// This is the wiring point for intentions: until the agent passes an
// implementation backed by them, DefaultAllowAuthorizer answers.
type ConnectAuthorizer interface {
	ConnectAuthorize(ctx context.Context, target string, client *connect.SpiffeIDService, clientCertSerial string) (authorized bool, reason string, err error)
}

// DefaultAllowAuthorizer allows every connection, as Consul does with ACLs
// disabled and no intention matching. It is the stand-in used when
// Config.ConnectAuthorizer is nil, until intentions are wired in.
type DefaultAllowAuthorizer struct{}

// ConnectAuthorize implements ConnectAuthorizer.
func (DefaultAllowAuthorizer) ConnectAuthorize(context.Context, string, *connect.SpiffeIDService, string) (bool, string, error) {
	return true, "ACLs disabled, access is allowed by default", nil
}

// errLeafUnavailable is the answer of an agent wired without a leaf
// manager.
var errLeafUnavailable = errors.New("Connect leaf certificates are not available on this agent")

// connectCARoots serves GET /v1/connect/ca/roots and
// /v1/agent/connect/ca/roots (blocking), or with ?pem=true the roots and
// their intermediates as one PEM chain.
func (s *Server) connectCARoots(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	pemOut := false
	if v := r.URL.Query().Get("pem"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, badRequest("The 'pem' query parameter must be a boolean value")
		}
		pemOut = b
	}
	var out structs.IndexedCARoots
	err := cachedCall(s, w, r, structs.MethodConnectCARoots, &args, &out)
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err != nil {
		return nil, err
	}
	if out.Roots == nil {
		out.Roots = structs.CARoots{}
	}
	if !pemOut {
		return &out, nil
	}
	// The media type of RFC 8555, as Consul answers.
	w.Header().Set("Content-Type", "application/pem-certificate-chain")
	for _, root := range out.Roots {
		_, _ = io.WriteString(w, root.RootCert)
		for _, c := range root.IntermediateCerts {
			_, _ = io.WriteString(w, c)
		}
	}
	return nil, nil
}

// connectCAConfiguration serves GET and PUT /v1/connect/ca/configuration.
func (s *Server) connectCAConfiguration(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method == http.MethodGet {
		var args structs.DCSpecificRequest
		if err := s.parseQuery(r, &args.QueryOptions); err != nil {
			return nil, err
		}
		var out structs.CAConfiguration
		if err := structs.MethodConnectCAConfigurationGet.Call(r.Context(), s.rpc, &args, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	var args structs.CARequest
	s.parseWrite(r, &args.WriteRequest)
	if cas := r.URL.Query().Get("cas"); cas != "" {
		// Accepted for compatibility (Consul parses it too); the built-in
		// CA serialises configuration changes on the leader.
		if _, err := strconv.ParseUint(cas, 10, 64); err != nil {
			return nil, badRequest(fmt.Sprintf("Request decode failed: %v", err))
		}
	}
	var body struct {
		structs.CAConfiguration
		// Consul also accepts the snake-case spelling of this flag.
		ForceWithoutCrossSigningSnake bool `json:"force_without_cross_signing"`
	}
	if err := decodeRequest(r, &body); err != nil {
		return nil, err
	}
	cfg := body.CAConfiguration
	cfg.ForceWithoutCrossSigning = cfg.ForceWithoutCrossSigning || body.ForceWithoutCrossSigningSnake
	args.Config = &cfg
	if err := structs.MethodConnectCAConfigurationSet.Call(r.Context(), s.rpc, &args, &struct{}{}); err != nil {
		if errors.Is(err, structs.ErrCAStateReadOnly) {
			return nil, badRequest(err.Error())
		}
		return nil, err
	}
	return nil, nil
}

// agentConnectCALeaf serves GET /v1/agent/connect/ca/leaf/<service>: this
// agent's cached leaf for the service, blocking with ?index until it
// changes.
func (s *Server) agentConnectCALeaf(w http.ResponseWriter, r *http.Request) (any, error) {
	service := pathSuffix(r, "/v1/agent/connect/ca/leaf/")
	if service == "" {
		return nil, badRequest("Missing service name")
	}
	var q structs.QueryOptions
	if err := s.parseQuery(r, &q); err != nil {
		return nil, err
	}
	if err := s.requireACL(r, authz.Write(acl.ResourceService, service)); err != nil {
		return nil, err
	}
	if s.leafCerts == nil {
		return nil, errLeafUnavailable
	}
	cert, meta, err := s.leafCerts.GetWithMeta(r.Context(), service, q.Token, q.MinQueryIndex, q.MaxQueryTime)
	if err != nil {
		return nil, err
	}
	w.Header().Set("X-Consul-Index", strconv.FormatUint(max(cert.ModifyIndex, 1), 10))
	setCacheHeaders(w, meta.Hit, meta.Age)
	return cert, nil
}

// connectAuthorizeRequest is the body of POST /v1/agent/connect/authorize.
type connectAuthorizeRequest struct {
	Target           string
	ClientCertURI    string
	ClientCertSerial string
}

// connectAuthorizeResponse is its answer.
type connectAuthorizeResponse struct {
	Authorized bool
	Reason     string
}

// agentConnectAuthorize serves POST /v1/agent/connect/authorize, validating
// the request as Consul does before asking the authorizer.
func (s *Server) agentConnectAuthorize(_ http.ResponseWriter, r *http.Request) (any, error) {
	var req connectAuthorizeRequest
	if err := decodeRequest(r, &req); err != nil {
		return nil, err
	}
	if req.Target == "" {
		return nil, badRequest("Target service must be specified")
	}
	if err := s.requireACL(r, authz.Write(acl.ResourceService, req.Target)); err != nil {
		return nil, err
	}
	uri, err := connect.ParseCertURIFromString(req.ClientCertURI)
	if err != nil {
		return nil, badRequest("ClientCertURI not a valid Connect identifier")
	}
	svc, ok := uri.(*connect.SpiffeIDService)
	if !ok {
		return nil, badRequest("ClientCertURI not a valid Service identifier")
	}
	ca := s.authorizer
	if ca == nil {
		ca = DefaultAllowAuthorizer{}
	}
	allowed, reason, err := ca.ConnectAuthorize(r.Context(), req.Target, svc, req.ClientCertSerial)
	if err != nil {
		return nil, err
	}
	return &connectAuthorizeResponse{Authorized: allowed, Reason: reason}, nil
}
