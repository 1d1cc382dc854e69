package server

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

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

func (s *Server) operatorRaftRemovePeer(_ context.Context, args *structs.RaftRemovePeerRequest, _ *struct{}) error {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, srv := range f.Configuration().Servers {
		if (args.ID != "" && string(srv.ID) == args.ID) || (args.Address != "" && string(srv.Address) == args.Address) {
			return s.raft.RemoveServer(srv.ID, 0, 0).Error()
		}
	}
	return fmt.Errorf("no raft peer with address %q or ID %q", args.Address, args.ID)
}
