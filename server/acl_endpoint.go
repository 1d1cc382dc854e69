package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ACL endpoints (Consul's agent/consul/acl_endpoint.go): tokens and the
// bootstrap here, policies and roles in acl_policy_endpoint.go. Each
// checks the caller's token first.

// aclBootstrapResetFile is the file in the data dir whose content, the
// current reset index, allows one more bootstrap (Consul's procedure).
const aclBootstrapResetFile = "acl-bootstrap-reset"

func (s *Server) aclBootstrap(ctx context.Context, args *structs.ACLBootstrapRequest, reply *structs.ACLToken) error {
	if !s.cfg.ACLs.Enabled {
		return structs.ErrACLDisabled
	}
	reset := s.fsm.State().ACLBootstrapIndex()
	resetFile := ""
	if reset != 0 {
		var ok bool
		if ok, resetFile = s.aclResetAllowed(reset); !ok {
			return fmt.Errorf("%w (reset index: %d)", structs.ErrACLBootstrapNotAllowed, reset)
		}
	}
	tok := &structs.ACLToken{
		Description: "Bootstrap Token (Global Management)",
		Policies:    []structs.ACLLink{{ID: structs.ACLPolicyGlobalManagementID, Name: structs.ACLPolicyGlobalManagementName}},
		CreateTime:  time.Now(),
	}
	if args.BootstrapSecret != "" {
		if err := structs.ParseUUID(args.BootstrapSecret); err != nil {
			return fmt.Errorf("Invalid Token: SecretID - not a valid UUID")
		}
		tok.SecretID = args.BootstrapSecret
	}
	if err := s.fillTokenIDs(tok); err != nil {
		return err
	}
	resp, err := s.raftApplyWrite(ctx, structs.ACLBootstrapRequestType, &structs.ACLBootstrapCommand{Token: tok, ResetIndex: reset})
	if err != nil {
		return err
	}
	if resetFile != "" {
		if err := os.Remove(resetFile); err != nil {
			s.logger.Warn("failed to remove the ACL bootstrap reset file", "file", resetFile, "error", err)
		}
	}
	s.logger.Info("ACL bootstrap completed")
	return s.readStoredToken(resp, reply)
}

// aclResetAllowed reports whether the reset file holds the current reset
// index, and its path.
func (s *Server) aclResetAllowed(reset uint64) (bool, string) {
	if s.cfg.InMemory || s.cfg.DataDir == "" {
		return false, ""
	}
	path := filepath.Join(s.cfg.DataDir, aclBootstrapResetFile)
	raw, err := os.ReadFile(path) //nolint:gosec // acl-bootstrap-reset in the server's own data dir
	if err != nil {
		return false, ""
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || n != reset {
		s.logger.Error("ACL bootstrap reset file holds the wrong index", "file", path, "want", reset)
		return false, ""
	}
	return true, path
}

// fillTokenIDs gives a new token random IDs where the client chose none.
// Retries of the write may pick others: the FSM answers a retry with the
// AccessorID the first attempt stored, and the reply is read from there.
func (s *Server) fillTokenIDs(tok *structs.ACLToken) error {
	st := s.fsm.State()
	for _, f := range []struct {
		id  *string
		get func(memdb.WatchSet, string) (uint64, *structs.ACLToken, error)
	}{{&tok.AccessorID, st.ACLTokenGetByAccessor}, {&tok.SecretID, st.ACLTokenGetBySecret}} {
		if *f.id != "" {
			continue
		}
		for {
			id, err := newUUID()
			if err != nil {
				return err
			}
			if strings.HasPrefix(id, structs.ACLReservedIDPrefix) {
				continue
			}
			if _, other, err := f.get(nil, id); err != nil {
				return err
			} else if other == nil {
				*f.id = id
				break
			}
		}
	}
	return nil
}

// readStoredToken answers a token write with the token the FSM stored
// (its AccessorID is the FSM's response).
func (s *Server) readStoredToken(resp any, reply *structs.ACLToken) error {
	id, _ := resp.(string)
	_, tok, err := s.fsm.State().ACLTokenGetByAccessor(nil, id)
	if err != nil {
		return err
	}
	if tok == nil {
		return fmt.Errorf("token %q missing after its write", id)
	}
	*reply = *tok
	return nil
}

func (s *Server) aclTokenSet(ctx context.Context, args *structs.ACLTokenSetRequest, reply *structs.ACLToken) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, true); err != nil {
		return err
	}
	in := args.ACLToken
	st := s.fsm.State()
	if args.Create {
		if err := in.ValidateNew(time.Now(), structs.ACLTokenExpiryLimits{Min: s.cfg.ACLs.TokenMinExpirationTTL, Max: s.cfg.ACLs.TokenMaxExpirationTTL}); err != nil {
			return err
		}
		if in.AccessorID != "" {
			if _, other, err := st.ACLTokenGetByAccessor(nil, in.AccessorID); err != nil {
				return err
			} else if other != nil {
				return fmt.Errorf("Invalid Token: AccessorID is already in use")
			}
		}
		if in.SecretID != "" {
			if _, other, err := st.ACLTokenGetBySecret(nil, in.SecretID); err != nil {
				return err
			} else if other != nil {
				return fmt.Errorf("Invalid Token: SecretID is already in use")
			}
		}
		in.CreateTime = time.Now()
		if ttl := in.ExpirationTTL.Duration(); ttl > 0 {
			at := in.CreateTime.Add(ttl)
			in.ExpirationTime = &at
		}
		in.ExpirationTTL = 0
		if err := s.fillTokenIDs(&in); err != nil {
			return err
		}
	} else {
		_, existing, err := st.ACLTokenGetByAccessor(nil, in.AccessorID)
		if err != nil {
			return err
		}
		if existing == nil {
			return fmt.Errorf("Cannot find token %q", in.AccessorID)
		}
		if err := in.ValidateUpdate(existing); err != nil {
			return err
		}
		in.SecretID, in.ExpirationTime, in.CreateTime, in.AuthMethod = existing.SecretID, existing.ExpirationTime, existing.CreateTime, existing.AuthMethod
	}
	if in.AccessorID == structs.ACLTokenAnonymousID && (len(in.ServiceIdentities) > 0 || len(in.NodeIdentities) > 0) {
		return fmt.Errorf("Service identities and node identities cannot be set on the anonymous token")
	}
	return s.storeToken(ctx, &in, reply)
}

// storeToken resolves the token's links to IDs and stores it.
func (s *Server) storeToken(ctx context.Context, tok *structs.ACLToken, reply *structs.ACLToken) error {
	var err error
	if tok.Policies, err = s.resolvePolicyLinks(tok.Policies); err != nil {
		return err
	}
	if tok.Roles, err = s.resolveRoleLinks(tok.Roles); err != nil {
		return err
	}
	resp, err := s.raftApplyWrite(ctx, structs.ACLTokenSetRequestType, &structs.ACLTokenBatchSetRequest{Tokens: []*structs.ACLToken{tok}})
	if err != nil {
		return err
	}
	return s.readStoredToken(resp, reply)
}

func (s *Server) aclTokenClone(ctx context.Context, args *structs.ACLTokenSetRequest, reply *structs.ACLToken) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, true); err != nil {
		return err
	}
	_, src, err := s.fsm.State().ACLTokenGetByAccessor(nil, args.ACLToken.AccessorID)
	if err != nil {
		return err
	}
	if src == nil {
		return structs.ErrACLNotFound
	}
	if src.AuthMethod != "" {
		return fmt.Errorf("Cannot clone a token created from an auth method")
	}
	c := src.Clone()
	c.AccessorID, c.SecretID, c.CreateTime, c.Hash = "", "", time.Now(), nil
	if args.ACLToken.Description != "" {
		c.Description = args.ACLToken.Description
	}
	if err := s.fillTokenIDs(c); err != nil {
		return err
	}
	return s.storeToken(ctx, c, reply)
}

func (s *Server) aclTokenDelete(ctx context.Context, args *structs.ACLTokenDeleteRequest, _ *struct{}) error {
	_, caller, err := s.aclAuthorize(ctx, args.Token, true)
	if err != nil {
		return err
	}
	if structs.ParseUUID(args.TokenID) != nil {
		return fmt.Errorf("Accessor ID is missing or an invalid UUID")
	}
	switch {
	case args.TokenID == structs.ACLTokenAnonymousID:
		return fmt.Errorf("Delete operation not permitted on the anonymous token")
	case caller != nil && caller.AccessorID == args.TokenID:
		return fmt.Errorf("Deletion of the request's authorization token is not permitted")
	}
	_, err = s.raftApplyWrite(ctx, structs.ACLTokenDeleteRequestType, &structs.ACLTokenBatchDeleteRequest{TokenIDs: []string{args.TokenID}})
	return err
}

func (s *Server) aclTokenRead(ctx context.Context, args *structs.ACLTokenGetRequest, reply *structs.ACLTokenResponse) error {
	var authz *acl.Authorizer
	if args.BySecret {
		// Reading one's own token needs no acl:read, only the token.
		if !s.cfg.ACLs.Enabled {
			return structs.ErrACLDisabled
		}
		if _, _, err := s.ResolveToken(ctx, args.TokenID); err != nil {
			return err
		}
	} else {
		var err error
		if authz, _, err = s.aclAuthorize(ctx, args.Token, false); err != nil {
			return err
		}
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		var err error
		if args.BySecret {
			reply.Index, reply.Token, err = st.ACLTokenGetBySecret(ws, args.TokenID)
		} else {
			reply.Index, reply.Token, err = st.ACLTokenGetByAccessor(ws, args.TokenID)
		}
		if err == nil && reply.Token != nil && authz != nil && authz.ACLWrite() != acl.Allow {
			reply.Token = reply.Token.Redacted()
		}
		return err
	})
}

func (s *Server) aclTokenList(ctx context.Context, args *structs.ACLTokenListRequest, reply *structs.ACLTokenListResponse) error {
	authz, _, err := s.aclAuthorize(ctx, args.Token, false)
	if err != nil {
		return err
	}
	filters := 0
	for _, f := range []string{args.Policy, args.Role, args.AuthMethod, args.ServiceName} {
		if f != "" {
			filters++
		}
	}
	if filters > 1 {
		// Consul's text and status (500: its RPC error is not classed).
		return errors.New("can only filter by one of policy, role, serviceName, or authMethod at once")
	}
	canWrite := authz.ACLWrite() == acl.Allow
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, toks, err := st.ACLTokenList(ws, args.Policy, args.Role, args.AuthMethod, args.ServiceName)
		if err != nil {
			return err
		}
		now := time.Now()
		reply.Index, reply.Tokens = idx, make([]*structs.ACLToken, 0, len(toks))
		for _, t := range toks {
			if t.IsExpired(now) {
				continue
			}
			if !canWrite {
				t = t.Redacted()
			}
			reply.Tokens = append(reply.Tokens, t)
		}
		return nil
	})
}

// errACLLinkNotFound names a policy or role a write links and that does
// not exist, with Consul's text.
var errACLLinkNotFound = errors.New("No such ACL")

// resolvePolicyLinks turns links by name into links by ID, refusing those
// that name no policy.
func (s *Server) resolvePolicyLinks(in []structs.ACLLink) ([]structs.ACLLink, error) {
	st := s.fsm.State()
	return resolveLinks(in, "policy", func(l structs.ACLLink) (string, string, error) {
		get := st.ACLPolicyGetByID
		key := l.ID
		if key == "" {
			get, key = st.ACLPolicyGetByName, l.Name
		}
		_, p, err := get(nil, key)
		if err != nil || p == nil {
			return "", "", err
		}
		return p.ID, p.Name, nil
	})
}

func (s *Server) resolveRoleLinks(in []structs.ACLLink) ([]structs.ACLLink, error) {
	st := s.fsm.State()
	return resolveLinks(in, "role", func(l structs.ACLLink) (string, string, error) {
		get := st.ACLRoleGetByID
		key := l.ID
		if key == "" {
			get, key = st.ACLRoleGetByName, l.Name
		}
		_, r, err := get(nil, key)
		if err != nil || r == nil {
			return "", "", err
		}
		return r.ID, r.Name, nil
	})
}

func resolveLinks(in []structs.ACLLink, kind string, find func(structs.ACLLink) (string, string, error)) ([]structs.ACLLink, error) {
	if in == nil {
		return nil, nil
	}
	out := make([]structs.ACLLink, 0, len(in))
	seen := make(map[string]bool, len(in))
	for _, l := range in {
		id, name, err := find(l)
		if err != nil {
			return nil, err
		}
		if id == "" {
			key := l.ID
			if key == "" {
				key = l.Name
			}
			return nil, fmt.Errorf("%w %s with ID or name %q", errACLLinkNotFound, kind, key)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, structs.ACLLink{ID: id, Name: name})
		}
	}
	return out, nil
}
