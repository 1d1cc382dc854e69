package httpapi

import (
	"net/http"

	"github.com/trellis-mesh/trellis/structs"
)

// statusLeader handles GET /v1/status/leader: the leader's server RPC
// address as a JSON string ("127.0.0.1:8300"), or "" while there is none.
// Like Consul, it sends no X-Consul-* read headers.
func (s *Server) statusLeader(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out string
	if err := s.rpc.RPC(r.Context(), structs.MethodStatusLeader, &args, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// statusPeers handles GET /v1/status/peers: the Raft voters' addresses.
func (s *Server) statusPeers(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out []string
	if err := s.rpc.RPC(r.Context(), structs.MethodStatusPeers, &args, &out); err != nil {
		return nil, err
	}
	return orEmpty(out), nil
}

// operatorRaftConfiguration handles GET /v1/operator/raft/configuration.
// operatorRaftPeer serves DELETE /v1/operator/raft/peer?address=|?id=:
// removes a server from the Raft configuration, with Consul's 400s for
// naming none or both.
func (s *Server) operatorRaftPeer(_ http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.RaftRemovePeerRequest
	s.parseWrite(r, &args.WriteRequest)
	q := r.URL.Query()
	_, hasID := q["id"]
	_, hasAddress := q["address"]
	switch {
	case !hasID && !hasAddress:
		return nil, badRequest("Must specify either ?id with the server's ID or ?address with IP:port of peer to remove")
	case hasID && hasAddress:
		return nil, badRequest("Must specify only one of ?id or ?address")
	}
	args.ID, args.Address = q.Get("id"), q.Get("address")
	if err := s.rpc.RPC(r.Context(), structs.MethodOperatorRaftRemovePeer, &args, &struct{}{}); err != nil {
		return nil, err
	}
	return nil, nil
}

func (s *Server) operatorRaftConfiguration(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.RaftConfigurationResponse
	if err := s.rpc.RPC(r.Context(), structs.MethodOperatorRaftConfig, &args, &out); err != nil {
		return nil, err
	}
	if out.Servers == nil {
		out.Servers = []*structs.RaftServer{}
	}
	return out, nil
}
