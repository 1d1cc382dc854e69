package server

import (
	"context"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// The leader's ACL duties: the built-in objects, the initial management
// token, and reaping expired tokens.

// aclAnonymousSecret is the anonymous token's SecretID, as Consul stores
// it; requests without a token resolve to it by AccessorID instead.
const aclAnonymousSecret = "anonymous"

// aclReapBatch bounds the tokens one reaping command deletes.
const aclReapBatch = 1024

// startACLs runs the leader's ACL duties for one term; like startConnectCA
// it returns the function that stops them and waits. ready is closed once
// the built-in objects exist (at once with ACLs off).
func (s *Server) startACLs(ctx context.Context, ready chan struct{}) (stop func()) {
	if !s.cfg.ACLs.Enabled {
		close(ready)
		return func() {}
	}
	every := s.cfg.ACLs.ReapInterval
	if every <= 0 {
		every = time.Minute
	}
	return s.startLeaderDuty(ctx, leaderDuty{
		what:  "ACLs",
		setup: s.initializeACLs,
		every: every,
		tick:  s.reapExpiredTokens,
		fails: "failed to reap expired ACL tokens",
		ready: ready,
	})
}

// initializeACLs creates what is missing: the built-in policies,
// the anonymous token, and the initial management token (which
// bootstraps a cluster that never was). Idempotent.
func (s *Server) initializeACLs() error {
	st := s.fsm.State()
	for _, builtin := range structs.ACLBuiltinPolicies() {
		if _, p, err := st.ACLPolicyGetByID(nil, builtin.ID); err != nil {
			return err
		} else if p == nil {
			if _, err := s.raftApply(structs.ACLPolicySetRequestType, &structs.ACLPolicyBatchSetRequest{Policies: []*structs.ACLPolicy{builtin}}); err != nil {
				return err
			}
			s.logger.Info("created a built-in ACL policy", "name", builtin.Name)
		}
	}
	if _, tok, err := st.ACLTokenGetByAccessor(nil, structs.ACLTokenAnonymousID); err != nil {
		return err
	} else if tok == nil {
		anon := &structs.ACLToken{AccessorID: structs.ACLTokenAnonymousID, SecretID: aclAnonymousSecret,
			Description: "Anonymous Token", CreateTime: time.Now()}
		if _, err := s.raftApply(structs.ACLTokenSetRequestType, &structs.ACLTokenBatchSetRequest{Tokens: []*structs.ACLToken{anon}}); err != nil {
			return err
		}
		s.logger.Info("created the ACL anonymous token")
	}
	secret := s.cfg.ACLs.InitialManagement
	if secret == "" {
		return nil
	}
	if _, tok, err := st.ACLTokenGetBySecret(nil, secret); err != nil || tok != nil {
		return err
	}
	tok := &structs.ACLToken{SecretID: secret, Description: "Initial Management Token",
		Policies: []structs.ACLLink{{ID: structs.ACLPolicyGlobalManagementID}}, CreateTime: time.Now()}
	if err := s.fillTokenIDs(tok); err != nil {
		return err
	}
	var err error
	if reset := st.ACLBootstrapIndex(); reset == 0 {
		_, err = s.raftApply(structs.ACLBootstrapRequestType, &structs.ACLBootstrapCommand{Token: tok})
	} else {
		_, err = s.raftApply(structs.ACLTokenSetRequestType, &structs.ACLTokenBatchSetRequest{Tokens: []*structs.ACLToken{tok}})
	}
	if err == nil {
		s.logger.Info("created the ACL initial management token", "accessor_id", tok.AccessorID)
	}
	return err
}

// reapExpiredTokens deletes the tokens expired at now, in batches.
func (s *Server) reapExpiredTokens(now time.Time) error {
	for {
		expired, err := s.fsm.State().ACLTokensExpired(now, aclReapBatch)
		if err != nil || len(expired) == 0 {
			return err
		}
		ids := make([]string, 0, len(expired))
		for _, t := range expired {
			ids = append(ids, t.AccessorID)
		}
		if _, err := s.raftApply(structs.ACLTokenDeleteRequestType, &structs.ACLTokenBatchDeleteRequest{TokenIDs: ids}); err != nil {
			return err
		}
		s.logger.Debug("reaped expired ACL tokens", "count", len(ids))
		if len(expired) < aclReapBatch {
			return nil
		}
	}
}
