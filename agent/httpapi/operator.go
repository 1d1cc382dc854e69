package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// Consul's operator endpoints beyond the Raft configuration and health
// (status.go): the autopilot configuration and state, leadership
// transfer, and catalog usage.

// autopilotConfigJSON is the autopilot configuration as Consul's API
// encodes it: durations as Go duration strings (numbers of nanoseconds
// are accepted too). A duration missing from a PUT body is zero, as in
// Consul, whose PUT replaces the whole configuration.
type autopilotConfigJSON struct {
	CleanupDeadServers      bool
	LastContactThreshold    *structs.Duration
	MaxTrailingLogs         uint64
	MinQuorum               uint
	ServerStabilizationTime *structs.Duration
	RedundancyZoneTag       string
	DisableUpgradeMigration bool
	UpgradeVersionTag       string
	CreateIndex             uint64
	ModifyIndex             uint64
}

func autopilotConfigToJSON(c structs.AutopilotConfig) autopilotConfigJSON {
	lct, sst := structs.Duration(c.LastContactThreshold), structs.Duration(c.ServerStabilizationTime)
	return autopilotConfigJSON{
		CleanupDeadServers: c.CleanupDeadServers, LastContactThreshold: &lct, MaxTrailingLogs: c.MaxTrailingLogs,
		MinQuorum: c.MinQuorum, ServerStabilizationTime: &sst, RedundancyZoneTag: c.RedundancyZoneTag,
		DisableUpgradeMigration: c.DisableUpgradeMigration, UpgradeVersionTag: c.UpgradeVersionTag,
		CreateIndex: c.CreateIndex, ModifyIndex: c.ModifyIndex,
	}
}

func (j autopilotConfigJSON) config() structs.AutopilotConfig {
	c := structs.AutopilotConfig{
		CleanupDeadServers: j.CleanupDeadServers, MaxTrailingLogs: j.MaxTrailingLogs, MinQuorum: j.MinQuorum,
		RedundancyZoneTag: j.RedundancyZoneTag, DisableUpgradeMigration: j.DisableUpgradeMigration,
		UpgradeVersionTag: j.UpgradeVersionTag,
	}
	if j.LastContactThreshold != nil {
		c.LastContactThreshold = j.LastContactThreshold.Duration()
	}
	if j.ServerStabilizationTime != nil {
		c.ServerStabilizationTime = j.ServerStabilizationTime.Duration()
	}
	return c
}

// operatorAutopilotConfiguration serves GET and PUT
// /v1/operator/autopilot/configuration. A PUT answers true, or with
// ?cas=<index> whether the check-and-set won; a body or cas that does not
// parse is Consul's 400, and a negative duration is refused by name.
func (s *Server) operatorAutopilotConfiguration(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method == http.MethodGet {
		var args structs.DCSpecificRequest
		if err := s.parseQuery(r, &args.QueryOptions); err != nil {
			return nil, err
		}
		var out structs.AutopilotConfigResponse
		if err := structs.MethodOperatorAutopilotGetConfiguration.Call(r.Context(), s.rpc, &args, &out); err != nil {
			return nil, err
		}
		return autopilotConfigToJSON(out.Config), nil
	}
	var args structs.AutopilotSetConfigRequest
	s.parseWrite(r, &args.WriteRequest)
	body, err := readBody(r, maxJSONBody)
	if errors.Is(err, errBodyTooLarge) {
		return nil, tooLarge(fmt.Sprintf("Request body too large, max size: %d bytes", maxJSONBody))
	}
	var in autopilotConfigJSON
	if err == nil {
		err = decodeJSON(body, &in)
	}
	if err != nil {
		return nil, badRequest(fmt.Sprintf("Error parsing autopilot config: %v", err))
	}
	args.Config = in.config()
	for name, d := range map[string]time.Duration{"LastContactThreshold": args.Config.LastContactThreshold, "ServerStabilizationTime": args.Config.ServerStabilizationTime} {
		if d < 0 {
			return nil, badRequest(fmt.Sprintf("Error parsing autopilot config: %s must not be negative", name))
		}
	}
	if params := r.URL.Query(); params.Has("cas") {
		cas, err := strconv.ParseUint(params.Get("cas"), 10, 64)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("Error parsing cas value: %v", err))
		}
		args.Config.ModifyIndex, args.CAS = cas, true
	}
	var ok bool
	if err := structs.MethodOperatorAutopilotSetConfiguration.Call(r.Context(), s.rpc, &args, &ok); err != nil {
		return nil, err
	}
	// Consul answers the outcome only for a check-and-set.
	return ok || !args.CAS, nil
}

// autopilotServerJSON is one server of /v1/operator/autopilot/state.
type autopilotServerJSON struct {
	ID, Name, Address, NodeStatus, Version string
	LastContact                            string
	LastTerm, LastIndex                    uint64
	Healthy                                bool
	StableSince                            time.Time
	ReadReplica                            bool
	Status                                 string
	Meta                                   map[string]string
	NodeType                               string
}

// operatorAutopilotState serves GET /v1/operator/autopilot/state, Consul's
// shape without the Enterprise parts (redundancy zones, read replicas,
// upgrade), which Consul leaves out too when they are empty.
func (s *Server) operatorAutopilotState(_ http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.AutopilotState
	if err := structs.MethodOperatorAutopilotState.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	body := struct {
		Healthy                    bool
		FailureTolerance           int
		OptimisticFailureTolerance int
		Servers                    map[string]autopilotServerJSON
		Leader                     string
		Voters                     []string
	}{
		Healthy: out.Healthy, FailureTolerance: out.FailureTolerance, OptimisticFailureTolerance: out.OptimisticFailureTolerance,
		Servers: make(map[string]autopilotServerJSON, len(out.Servers)), Leader: out.Leader, Voters: orEmpty(out.Voters),
	}
	for id, srv := range out.Servers {
		body.Servers[id] = autopilotServerJSON{
			ID: srv.ID, Name: srv.Name, Address: srv.Address, NodeStatus: srv.NodeStatus, Version: srv.Version,
			LastContact: srv.LastContact.String(), LastTerm: srv.LastTerm, LastIndex: srv.LastIndex, Healthy: srv.Healthy,
			StableSince: srv.StableSince.Round(time.Second).UTC(), ReadReplica: srv.ReadReplica, Status: srv.Status,
			Meta: orEmptyMap(srv.Meta), NodeType: srv.NodeType,
		}
	}
	return body, nil
}

// operatorRaftTransferLeader serves POST
// /v1/operator/raft/transfer-leader?id=: the leader hands its leadership
// to the voter id, or to any other voter, and answers {"Success":true}.
func (s *Server) operatorRaftTransferLeader(_ http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.RaftTransferLeaderRequest
	s.parseWrite(r, &args.WriteRequest)
	args.ID = r.URL.Query().Get("id")
	var ok bool
	if err := structs.MethodOperatorRaftTransferLeader.Call(r.Context(), s.rpc, &args, &ok); err != nil {
		return nil, err
	}
	return struct{ Success bool }{Success: ok}, nil
}

// operatorUsage serves GET /v1/operator/usage: the catalog's counts,
// keyed by datacenter as Consul's (one: this agent's, or ?dc's).
func (s *Server) operatorUsage(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.UsageResponse
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodOperatorUsage.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return struct {
		Usage map[string]structs.ServiceUsage
	}{Usage: map[string]structs.ServiceUsage{args.Datacenter: out.Usage}}, nil
}
