package server

import (
	"context"
	"time"

	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/structs"
)

// caPruneInterval is how often the leader drops roots that can no longer
// have a valid leaf (Consul's caRootPruneInterval).
const caPruneInterval = time.Hour

// startConnectCA runs the leader's CA duties for one term: it creates the
// CA if the cluster has none (retrying until it succeeds or leadership
// ends), then prunes expired roots periodically. The leader loop calls it
// after its barrier and defers the returned function, which stops the
// duties and waits for them. The CA is created once after is closed.
func (s *Server) startConnectCA(ctx context.Context, after <-chan struct{}) (stop func()) {
	if s.cfg.Connect.Disabled {
		return func() {}
	}
	s.connectCA.resetSerials()
	return s.startLeaderDuty(ctx, leaderDuty{
		what:  "the Connect CA",
		setup: s.bootstrapConnectCA,
		every: caPruneInterval,
		tick:  s.pruneCARoots,
		fails: "failed to prune old CA roots",
		after: after,
	})
}

// bootstrapConnectCA creates the cluster ID, the configuration and the
// first root through Raft when the store has none. It is idempotent: a
// leader that finds an active root does nothing.
func (s *Server) bootstrapConnectCA() error {
	c := &s.connectCA
	c.admin.Lock()
	defer c.admin.Unlock()
	st := s.fsm.State()
	_, cfg, err := st.CAConfig(nil)
	if err != nil {
		return err
	}
	_, active, err := st.CARootActive(nil)
	if err != nil {
		return err
	}
	if cfg != nil && active != nil {
		return nil
	}
	if cfg == nil {
		if cfg, err = s.initialCAConfig(); err != nil {
			return err
		}
	}
	parsed, err := ca.ParseConfig(cfg.Config)
	if err != nil {
		return err
	}
	return s.rotateCA(st, cfg, parsed)
}

// initialCAConfig is the configuration of a CA created from scratch: the
// agent's connect.ca_config over the defaults, as Consul seeds its first
// CA configuration from the agent's.
func (s *Server) initialCAConfig() (*structs.CAConfiguration, error) {
	cc := s.cfg.Connect
	id := cc.ClusterID
	if id == "" {
		var err error
		if id, err = newClusterID(); err != nil {
			return nil, err
		}
	}
	m := ca.DefaultConfigMap()
	if cc.LeafCertTTL > 0 {
		m["LeafCertTTL"] = cc.LeafCertTTL.String()
	}
	if cc.RootCertTTL > 0 {
		m["RootCertTTL"] = cc.RootCertTTL.String()
	}
	if cc.CSRMaxPerSecond != nil {
		m["CSRMaxPerSecond"] = *cc.CSRMaxPerSecond
	}
	if cc.CSRMaxConcurrent > 0 {
		m["CSRMaxConcurrent"] = cc.CSRMaxConcurrent
	}
	return &structs.CAConfiguration{ClusterID: id, Provider: structs.ConsulCAProvider, Config: m}, nil
}

// pruneCARoots removes inactive roots that no valid leaf can chain to any
// more: expired ones, and ones rotated out more than twice the leaf TTL
// ago (Consul's rule), by which time every leaf they signed has expired.
func (s *Server) pruneCARoots(now time.Time) error {
	c := &s.connectCA
	c.admin.Lock()
	defer c.admin.Unlock()
	st := s.fsm.State()
	_, cfg, err := st.CAConfig(nil)
	if err != nil || cfg == nil {
		return err
	}
	parsed, err := ca.ParseConfig(cfg.Config)
	if err != nil {
		return err
	}
	_, roots, err := st.CARoots(nil)
	if err != nil {
		return err
	}
	stale := prunableRoots(roots, parsed.LeafCertTTL, now)
	if len(stale) == 0 {
		return nil
	}
	_, err = s.raftApply(structs.ConnectCARequestType, &structs.CARequest{Op: structs.CAOpPruneRoots, Roots: stale})
	if err == nil {
		s.logger.Info("pruned old CA roots", "count", len(stale))
	}
	return err
}

// prunableRoots picks the inactive roots no valid leaf can depend on.
func prunableRoots(roots structs.CARoots, leafTTL time.Duration, now time.Time) structs.CARoots {
	var out structs.CARoots
	for _, r := range roots {
		if r.Active {
			continue
		}
		expired := !r.NotAfter.IsZero() && now.After(r.NotAfter)
		retired := !r.RotatedOutAt.IsZero() && now.Sub(r.RotatedOutAt) > 2*leafTTL
		if expired || retired {
			out = append(out, &structs.CARoot{ID: r.ID})
		}
	}
	return out
}
