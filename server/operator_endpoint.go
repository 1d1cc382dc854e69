package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Operator endpoints: the autopilot configuration, catalog usage and
// leadership transfer.

// Sentinel errors of leadership transfer.
var (
	// ErrTransferTarget refuses a transfer to a server that is not
	// another voter of the Raft configuration.
	ErrTransferTarget = errors.New("cannot transfer leadership")
)

// operatorAutopilotGetConfiguration reads the stored configuration;
// before the leader stored one (it does so first thing) it is Consul's
// "not initialized" error.
func (s *Server) operatorAutopilotGetConfiguration(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.AutopilotConfigResponse) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, c, err := st.AutopilotConfig(ws)
		if err != nil {
			return err
		}
		if c == nil {
			return errors.New("autopilot config not initialized yet")
		}
		reply.Index, reply.Config = idx, *c
		return nil
	})
}

// operatorAutopilotSetConfiguration replaces the configuration, or
// check-and-sets it; the reply is whether it wrote.
func (s *Server) operatorAutopilotSetConfiguration(ctx context.Context, args *structs.AutopilotSetConfigRequest, reply *bool) error {
	resp, err := s.raftApplyWrite(ctx, structs.AutopilotRequestType, &structs.AutopilotSetConfigRequest{Config: args.Config, CAS: args.CAS})
	if err != nil {
		return err
	}
	ok, isBool := resp.(bool)
	*reply = isBool && ok
	return nil
}

// autopilotConfig is the configuration the leader acts on: the stored
// one, or the agent config's before any is stored.
func (s *Server) autopilotConfig() structs.AutopilotConfig {
	if _, c, err := s.fsm.State().AutopilotConfig(nil); err == nil && c != nil {
		return *c
	}
	return *s.cfg.Autopilot
}

// initAutopilotConfig stores the agent config's autopilot settings when
// the store has none (a new cluster, or one restored from an older
// snapshot), as Consul's leader does. The check-and-set at 0 leaves an
// operator's configuration alone.
func (s *Server) initAutopilotConfig() error {
	if _, c, err := s.fsm.State().AutopilotConfig(nil); err != nil || c != nil {
		return err
	}
	_, err := s.raftApply(structs.AutopilotRequestType, &structs.AutopilotSetConfigRequest{Config: *s.cfg.Autopilot, CAS: true})
	return err
}

// operatorUsage counts the catalog.
func (s *Server) operatorUsage(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.UsageResponse) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, u, err := st.ServiceUsage(ws)
		reply.Index, reply.Usage = idx, u
		return err
	})
}

// operatorRaftTransferLeader hands this leader's leadership to the voter
// args.ID, or to the most up-to-date other voter. The lease of this term
// is given up first, for good (readGate.relinquish): the target's
// election bypasses the voters' refusal to vote while they know a
// leader, on which the lease rests.
func (s *Server) operatorRaftTransferLeader(_ context.Context, args *structs.RaftTransferLeaderRequest, reply *bool) error {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	var target *raft.Server
	others := 0
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == s.cfg.NodeID || srv.Suffrage != raft.Voter {
			if args.ID != "" && string(srv.ID) == args.ID {
				return fmt.Errorf("%w: server %q is this leader or not a voter", ErrTransferTarget, args.ID)
			}
			continue
		}
		others++
		if string(srv.ID) == args.ID {
			target = &srv
		}
	}
	switch {
	case args.ID != "" && target == nil:
		return fmt.Errorf("%w: server %q was not found in the Raft configuration", ErrTransferTarget, args.ID)
	case others == 0:
		return fmt.Errorf("%w: no other voter in the Raft configuration", ErrTransferTarget)
	}
	s.reads.relinquish(s.raft.CurrentTerm())
	var fut raft.Future
	if target != nil {
		fut = s.raft.LeadershipTransferToServer(target.ID, target.Address)
	} else {
		fut = s.raft.LeadershipTransfer()
	}
	if err := fut.Error(); err != nil {
		return fmt.Errorf("failed to transfer leadership: %w", err)
	}
	s.logger.Info("transferred leadership", "to", args.ID)
	*reply = true
	return nil
}
