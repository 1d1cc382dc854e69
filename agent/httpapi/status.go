package httpapi

import (
	"net/http"
	"time"

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
	if err := structs.MethodStatusLeader.Call(r.Context(), s.rpc, &args, &out); err != nil {
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
	if err := structs.MethodStatusPeers.Call(r.Context(), s.rpc, &args, &out); err != nil {
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
	if err := structs.MethodOperatorRaftRemovePeer.Call(r.Context(), s.rpc, &args, &struct{}{}); err != nil {
		return nil, err
	}
	return nil, nil
}

// serverHealthJSON is one server in /v1/operator/autopilot/health, with
// Consul's encodings: LastContact a duration string, StableSince in UTC
// to the second.
type serverHealthJSON struct {
	ID, Name, Address, SerfStatus, Version string
	Leader                                 bool
	LastContact                            string
	LastTerm, LastIndex                    uint64
	Healthy, Voter                         bool
	StableSince                            time.Time
}

// operatorAutopilotHealth serves GET /v1/operator/autopilot/health: the
// leader's view of every server's health. An unhealthy cluster answers 429
// with the same body, as Consul's does, so that a probe can use the status.
func (s *Server) operatorAutopilotHealth(_ http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.OperatorHealthReply
	if err := structs.MethodOperatorServerHealth.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	body := struct {
		Healthy          bool
		FailureTolerance int
		Servers          []serverHealthJSON
	}{Healthy: out.Healthy, FailureTolerance: out.FailureTolerance, Servers: []serverHealthJSON{}}
	for _, h := range out.Servers {
		body.Servers = append(body.Servers, serverHealthJSON{
			ID: h.ID, Name: h.Name, Address: h.Address, SerfStatus: h.SerfStatus, Version: h.Version,
			Leader: h.Leader, LastContact: h.LastContact.String(), LastTerm: h.LastTerm, LastIndex: h.LastIndex,
			Healthy: h.Healthy, Voter: h.Voter, StableSince: h.StableSince.Round(time.Second).UTC(),
		})
	}
	if !out.Healthy {
		return withStatus{code: http.StatusTooManyRequests, body: body}, nil
	}
	return body, nil
}

func (s *Server) operatorRaftConfiguration(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.RaftConfigurationResponse
	if err := structs.MethodOperatorRaftConfig.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	if out.Servers == nil {
		out.Servers = []*structs.RaftServer{}
	}
	return out, nil
}
