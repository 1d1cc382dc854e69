package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/agent/authz"
	"github.com/trellis-mesh/trellis/agent/token"
	"github.com/trellis-mesh/trellis/structs"
)

// AgentTokens is the agent's token store (agent/token.Store): PUT
// /v1/agent/token/<kind> replaces one, and requests without a token use
// the default one.
type AgentTokens interface {
	// Set replaces a kind's token (persisting it when the agent does).
	Set(kind token.Kind, value string) error
	// UserToken is the default token, "" when unset.
	UserToken() string
}

// withDefaultToken gives a request that carries no token the agent's
// default token, as Consul's parseToken does, so that every endpoint and
// the RPC behind it see the same token without each knowing the store.
func (s *Server) withDefaultToken(r *http.Request) *http.Request {
	if s.tokens == nil || parseToken(r) != "" {
		return r
	}
	def := s.tokens.UserToken()
	if def == "" {
		return r
	}
	r = r.Clone(r.Context())
	r.Header.Set("X-Consul-Token", def)
	return r
}

// agentToken serves PUT /v1/agent/token/<kind> with Consul's answers: 401
// while ACLs are off, 403 without acl:write, 400 for a body that is not
// {"Token": "..."}, 404 for an unknown kind, 500 when the tokens file
// cannot be written (the token in use is then unchanged), 200 and no body
// otherwise.
func (s *Server) agentToken(_ http.ResponseWriter, r *http.Request) (any, error) {
	if !s.aclsEnabled || s.tokens == nil {
		return nil, structs.ErrACLDisabled
	}
	if err := s.requireACL(r, authz.Write(acl.ResourceACL, "")); err != nil {
		return nil, err
	}
	var body struct{ Token string }
	if err := decodeRequest(r, &body); err != nil {
		return nil, err
	}
	name := strings.TrimPrefix(r.URL.Path, "/v1/agent/token/")
	kind, err := token.ParseKind(name)
	if err != nil {
		return nil, &httpError{code: http.StatusNotFound, msg: fmt.Sprintf("Token %q is unknown", name)}
	}
	if err := s.tokens.Set(kind, body.Token); err != nil {
		var pe *token.PersistError
		if errors.As(err, &pe) {
			return nil, &httpError{code: http.StatusInternalServerError, msg: "Failed to persist tokens - " + pe.Err.Error()}
		}
		return nil, err
	}
	s.log.Info("updated agent's ACL token", "token", name)
	return nil, nil
}
