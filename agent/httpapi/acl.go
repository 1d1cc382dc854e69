package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// Consul's /v1/acl endpoints: bootstrap and tokens here, policies, roles
// and templated policies in acl_policy.go. The servers check the caller's
// token; this file parses, calls and shapes the answers.

func (s *Server) aclBootstrap(_ http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.ACLBootstrapRequest
	if err := decodeOptional(r, &args); err != nil {
		return nil, err
	}
	s.parseWrite(r, &args.WriteRequest)
	var out structs.ACLToken
	err := structs.MethodACLBootstrap.Call(r.Context(), s.rpc, &args, &out)
	if errors.Is(err, structs.ErrACLBootstrapNotAllowed) {
		// Consul's 403 body: "Permission denied: ACL bootstrap no longer
		// allowed (reset index: N)".
		return nil, &StatusError{Code: http.StatusForbidden, Msg: structs.ErrPermissionDenied.Error() + ": " + err.Error()}
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// decodeOptional decodes a write body that may be absent.
func decodeOptional(r *http.Request, out any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return decodeRequest(r, out)
}

func (s *Server) aclTokenCreate(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.aclTokenWrite(r, "", true)
}

func (s *Server) aclTokenWrite(r *http.Request, accessor string, create bool) (any, error) {
	args := structs.ACLTokenSetRequest{Create: create}
	if err := decodeRequest(r, &args.ACLToken); err != nil {
		return nil, err
	}
	if !create {
		if args.ACLToken.AccessorID != "" && args.ACLToken.AccessorID != accessor {
			return nil, badRequest("Token Accessor ID in URL and payload do not match")
		}
		args.ACLToken.AccessorID = accessor
	}
	s.parseWrite(r, &args.WriteRequest)
	var out structs.ACLToken
	if err := structs.MethodACLTokenSet.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// aclTokenSpecific serves /v1/acl/token/self, /v1/acl/token/<accessor>
// and /v1/acl/token/<accessor>/clone.
func (s *Server) aclTokenSpecific(w http.ResponseWriter, r *http.Request) (any, error) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/acl/token/")
	if rest == "self" {
		if r.Method != http.MethodGet {
			return nil, &methodNotAllowedError{method: r.Method, allow: []string{http.MethodOptions, http.MethodGet}}
		}
		return s.aclTokenRead(w, r, parseToken(r), true)
	}
	if id, ok := strings.CutSuffix(rest, "/clone"); ok {
		if r.Method != http.MethodPut {
			return nil, &methodNotAllowedError{method: r.Method, allow: []string{http.MethodOptions, http.MethodPut}}
		}
		return s.aclTokenClone(r, id)
	}
	if rest == "" {
		return nil, badRequest("Missing token ID")
	}
	switch r.Method {
	case http.MethodGet:
		return s.aclTokenRead(w, r, rest, false)
	case http.MethodPut:
		return s.aclTokenWrite(r, rest, false)
	default:
		args := structs.ACLTokenDeleteRequest{TokenID: rest}
		s.parseWrite(r, &args.WriteRequest)
		if err := structs.MethodACLTokenDelete.Call(r.Context(), s.rpc, &args, &struct{}{}); err != nil {
			return nil, err
		}
		return true, nil
	}
}

func (s *Server) aclTokenRead(w http.ResponseWriter, r *http.Request, id string, self bool) (any, error) {
	args := structs.ACLTokenGetRequest{TokenID: id, BySecret: self}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.ACLTokenResponse
	if err := structs.MethodACLTokenRead.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if out.Token == nil {
		return nil, structs.ErrACLNotFound
	}
	return out.Token, nil
}

func (s *Server) aclTokenClone(r *http.Request, id string) (any, error) {
	var body struct{ Description string }
	if err := decodeOptional(r, &body); err != nil {
		return nil, err
	}
	args := structs.ACLTokenSetRequest{ACLToken: structs.ACLToken{AccessorID: id, Description: body.Description}}
	s.parseWrite(r, &args.WriteRequest)
	var out structs.ACLToken
	if err := structs.MethodACLTokenClone.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (s *Server) aclTokenList(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	args := structs.ACLTokenListRequest{Policy: q.Get("policy"), Role: q.Get("role"), AuthMethod: q.Get("authmethod"), ServiceName: q.Get("servicename")}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.ACLTokenListResponse
	if err := structs.MethodACLTokenList.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if out.Tokens == nil {
		out.Tokens = []*structs.ACLToken{}
	}
	return out.Tokens, nil
}

// pathName is the unescaped last part of a /name/<n> path.
func pathName(r *http.Request, prefix string) (string, error) {
	raw := strings.TrimPrefix(r.URL.EscapedPath(), prefix)
	name, err := url.PathUnescape(raw)
	if err != nil {
		return "", badRequest(fmt.Sprintf("invalid name %q", raw))
	}
	return name, nil
}

// aclReplicationStatus is GET /v1/acl/replication's body, Consul's
// structs.ACLReplicationStatus.
type aclReplicationStatus struct {
	Enabled              bool
	Running              bool
	SourceDatacenter     string
	ReplicationType      string
	ReplicatedIndex      uint64
	ReplicatedRoleIndex  uint64
	ReplicatedTokenIndex uint64
	LastSuccess          time.Time
	LastError            time.Time
	LastErrorMessage     string
}

// aclReplication serves GET /v1/acl/replication. Trellis runs one
// datacenter, the primary, where Consul never replicates ACLs: the status
// is always "not enabled, not running" (401 with ACLs off, as Consul).
func (s *Server) aclReplication(_ http.ResponseWriter, _ *http.Request) (any, error) {
	if !s.aclsEnabled {
		return nil, structs.ErrACLDisabled
	}
	return aclReplicationStatus{}, nil
}
