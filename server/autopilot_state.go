package server

import (
	"context"
	"maps"

	"github.com/trellis-mesh/trellis/structs"
)

// operatorAutopilotState answers Consul's autopilot state from the
// leader's health view (autopilot.go): every server by ID with its gossip
// status, Raft role and catalog node metadata, the leader, the voters.
func (s *Server) operatorAutopilotState(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.AutopilotState) error {
	var health structs.OperatorHealthReply
	if err := s.operatorServerHealth(ctx, args, &health); err != nil {
		return err
	}
	st := s.fsm.State()
	*reply = structs.AutopilotState{
		Healthy:                    health.Healthy,
		FailureTolerance:           health.FailureTolerance,
		OptimisticFailureTolerance: health.FailureTolerance,
		Servers:                    make(map[string]structs.AutopilotServer, len(health.Servers)),
		Voters:                     []string{},
	}
	for _, h := range health.Servers {
		srv := structs.AutopilotServer{
			ID: h.ID, Name: h.Name, Address: h.Address, NodeStatus: nodeStatus(h.SerfStatus), Version: h.Version,
			LastContact: h.LastContact, LastTerm: h.LastTerm, LastIndex: h.LastIndex, Healthy: h.Healthy,
			StableSince: h.StableSince, Status: structs.AutopilotStatusNonVoter, NodeType: structs.AutopilotTypeVoter,
			Meta: map[string]string{},
		}
		if h.Name != "" {
			if _, n, err := st.GetNode(nil, h.Name); err == nil && n != nil {
				srv.Meta = maps.Clone(n.Meta)
				if srv.Meta == nil {
					srv.Meta = map[string]string{}
				}
			}
		}
		switch {
		case h.Leader:
			srv.Status = structs.AutopilotStatusLeader
			reply.Leader = h.ID
		case h.Voter:
			srv.Status = structs.AutopilotStatusVoter
		}
		if h.Voter {
			reply.Voters = append(reply.Voters, h.ID)
		}
		reply.Servers[h.ID] = srv
	}
	return nil
}

// nodeStatus is autopilot's name for a gossip status: a leaving server
// is still alive, and one gossip does not know is unknown.
func nodeStatus(serf string) string {
	switch serf {
	case "alive", "leaving":
		return "alive"
	case "left", "failed":
		return serf
	}
	return "unknown"
}
