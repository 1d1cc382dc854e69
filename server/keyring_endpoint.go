package server

import (
	"context"

	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

// Keyring runs gossip keyring operations on one of the agent's pools
// (gossip.Gossip, or gossip.Holder before it starts).
type Keyring interface {
	KeyringOperation(op gossip.KeyOp, key string, relayFactor uint8) (*serf.KeyResponse, error)
}

// keyringOperation runs the operation on the WAN pool (unless LocalOnly or
// there is none), then on the LAN pool, answering one response per pool
// as Consul's Internal.KeyringOperation does. A pool's failure (a member
// that refused, an unencrypted pool) is that response's Error, so that
// the caller sees what every pool said.
func (s *Server) keyringOperation(_ context.Context, args *structs.KeyringRequest, reply *structs.KeyringResponses) error {
	type pool struct {
		wan  bool
		ring Keyring
	}
	var pools []pool
	if s.cfg.WANKeyring != nil && !args.LocalOnly {
		pools = append(pools, pool{true, s.cfg.WANKeyring})
	}
	if s.cfg.LANKeyring != nil {
		pools = append(pools, pool{false, s.cfg.LANKeyring})
	}
	for _, p := range pools {
		resp, err := p.ring.KeyringOperation(gossip.KeyOp(args.Operation), args.Key, args.RelayFactor)
		out := &structs.KeyringResponse{WAN: p.wan, Datacenter: s.cfg.Datacenter}
		if resp != nil {
			out.Messages, out.Keys, out.PrimaryKeys, out.NumNodes = resp.Messages, resp.Keys, resp.PrimaryKeys, resp.NumNodes
		}
		if err != nil {
			out.Error = err.Error()
		}
		reply.Responses = append(reply.Responses, out)
	}
	return nil
}
