package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

// ErrRemovePeerTarget refuses a peer removal that names no server, or one
// by both address and ID.
var ErrRemovePeerTarget = errors.New("Must specify exactly one of the peer's ID or address")

func (s *Server) statusLeader(_ context.Context, _ *structs.DCSpecificRequest, reply *string) error {
	*reply = s.LeaderAddr()
	return nil
}

func (s *Server) statusPeers(_ context.Context, _ *structs.DCSpecificRequest, reply *[]string) error {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	peers := []string{}
	for _, srv := range f.Configuration().Servers {
		peers = append(peers, string(srv.Address))
	}
	*reply = peers
	return nil
}

func (s *Server) operatorRaftConfig(_ context.Context, _ *structs.DCSpecificRequest, reply *structs.RaftConfigurationResponse) error {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	names := map[string]string{}
	if s.cfg.Membership != nil {
		for _, m := range s.cfg.Membership.Members() {
			if meta, ok := gossip.ParseServer(m); ok {
				names[meta.ID] = meta.Name
			}
		}
	}
	names[s.cfg.NodeID] = s.cfg.NodeName
	leaderAddr, _ := s.raft.LeaderWithID()
	reply.Servers = nil
	for _, srv := range f.Configuration().Servers {
		reply.Servers = append(reply.Servers, &structs.RaftServer{
			ID:              string(srv.ID),
			Node:            names[string(srv.ID)],
			Address:         string(srv.Address),
			Leader:          srv.Address == leaderAddr,
			Voter:           srv.Suffrage == raft.Voter,
			ProtocolVersion: "3",
		})
	}
	reply.Index = f.Index()
	return nil
}

// operatorRaftRemovePeer removes the server with the given address or ID
// (exactly one) from the Raft configuration, on the leader: what an
// operator does for a server that will not come back. A peer that is not
// in the configuration is an error with Consul's text (the operator likely
// mistyped it). A server Serf still knows as alive is added back by the
// next reconcile, as in Consul.
func (s *Server) operatorRaftRemovePeer(_ context.Context, args *structs.RaftRemovePeerRequest, _ *struct{}) error {
	if (args.ID == "") == (args.Address == "") {
		return ErrRemovePeerTarget
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, srv := range f.Configuration().Servers {
		if (args.ID != "" && string(srv.ID) == args.ID) || (args.Address != "" && string(srv.Address) == args.Address) {
			if err := s.raft.RemoveServer(srv.ID, 0, 0).Error(); err != nil {
				s.logger.Warn("failed to remove Raft peer", "peer", srv.Address, "id", srv.ID, "error", err)
				return err
			}
			s.logger.Warn("removed Raft peer", "peer", srv.Address, "id", srv.ID)
			return nil
		}
	}
	if args.ID != "" {
		return fmt.Errorf("id %q was not found in the Raft configuration", args.ID)
	}
	return fmt.Errorf("address %q was not found in the Raft configuration", args.Address)
}
