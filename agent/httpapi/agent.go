package httpapi

import (
	"net/http"
	"time"

	"github.com/trellis-mesh/trellis/telemetry"
)

// SelfInfo is what /v1/agent/self reports about this agent beyond the node
// name and datacenter the Server already knows. Config.Self returns it on
// each request, so that it can change (a member's status, say).
type SelfInfo struct {
	// NodeID is the node's UUID.
	NodeID string
	// Server is true on a server agent.
	Server bool
	// Version is the Consul-compatible version reported to clients
	// ("1.22.0"); Revision and BuildDate describe the build.
	Version   string
	Revision  string
	BuildDate string
	// PrimaryDatacenter defaults to the agent's datacenter.
	PrimaryDatacenter string
	// Member is this agent as its Serf LAN pool sees it.
	Member MemberInfo
	// Meta is the node's metadata.
	Meta map[string]string
	// SerfAdvertiseAddrLAN and SerfBindAddrLAN are the Serf LAN
	// addresses, "ip:port"; DebugConfig shows them as Consul does, as
	// "tcp://ip:port" (tools strip the scheme to join the agent).
	SerfAdvertiseAddrLAN string
	SerfBindAddrLAN      string
	// Stats are the sections of Consul's Stats block ("agent", "consul",
	// "raft", "serf_lan", "runtime", "build"), each of string values.
	Stats map[string]map[string]string
}

// MemberInfo is a Serf member in the shape Consul's agent endpoints use.
type MemberInfo struct {
	Name string
	Addr string
	Port uint16
	Tags map[string]string
	// Status is Serf's member status: 1 alive, 2 leaving, 3 left, 4 failed.
	Status int
	// Protocol and delegate versions, as Serf reports them.
	ProtocolMin, ProtocolMax, ProtocolCur uint8
	DelegateMin, DelegateMax, DelegateCur uint8
}

// memberAlive is Serf's MemberStatus for a live member.
const memberAlive = 1

// agentSelfConfig is the "Config" block of /v1/agent/self. SessionTTLMin is
// not in Consul's current answer but was in its older one (in nanoseconds),
// and Patroni still reads it there to pick a valid session TTL.
type agentSelfConfig struct {
	Datacenter        string
	PrimaryDatacenter string
	NodeName          string
	NodeID            string
	Revision          string
	Server            bool
	Version           string
	BuildDate         string
	SessionTTLMin     time.Duration
}

// agentSelfDebugConfig is the part of Consul's "DebugConfig" block Trellis
// fills in (durations are Go strings there).
type agentSelfDebugConfig struct {
	Datacenter           string
	NodeName             string
	SessionTTLMin        string
	SerfAdvertiseAddrLAN string `json:",omitempty"`
	SerfBindAddrLAN      string `json:",omitempty"`
}

// agentSelfResponse is the /v1/agent/self answer.
type agentSelfResponse struct {
	Config      agentSelfConfig
	DebugConfig agentSelfDebugConfig
	Coord       *struct{}
	Member      MemberInfo
	Stats       map[string]map[string]string
	Meta        map[string]string
}

// agentSelf handles GET /v1/agent/self.
func (s *Server) agentSelf(w http.ResponseWriter, r *http.Request) (any, error) {
	var info SelfInfo
	if s.self != nil {
		info = s.self()
	}
	if info.PrimaryDatacenter == "" {
		info.PrimaryDatacenter = s.dc
	}
	m := info.Member
	if m.Name == "" {
		m.Name = s.nodeName
	}
	if m.Status == 0 {
		m.Status = memberAlive
	}
	if m.Tags == nil {
		m.Tags = map[string]string{}
	}
	return agentSelfResponse{
		Config: agentSelfConfig{
			Datacenter:        s.dc,
			PrimaryDatacenter: info.PrimaryDatacenter,
			NodeName:          s.nodeName,
			NodeID:            info.NodeID,
			Revision:          info.Revision,
			Server:            info.Server,
			Version:           info.Version,
			BuildDate:         info.BuildDate,
			SessionTTLMin:     s.sessionMin,
		},
		DebugConfig: agentSelfDebugConfig{
			Datacenter:           s.dc,
			NodeName:             s.nodeName,
			SessionTTLMin:        s.sessionMin.String(),
			SerfAdvertiseAddrLAN: tcpAddr(info.SerfAdvertiseAddrLAN),
			SerfBindAddrLAN:      tcpAddr(info.SerfBindAddrLAN),
		},
		Member: m,
		Stats:  orEmptyStats(info.Stats),
		Meta:   orEmptyMap(info.Meta),
	}, nil
}

// agentMetrics handles GET /v1/agent/metrics by delegating to the
// configured metrics handler.
func (s *Server) agentMetrics(w http.ResponseWriter, r *http.Request) (any, error) {
	if s.metrics != nil {
		s.metrics.ServeHTTP(w, r)
		return nil, nil
	}
	// Consul's summary shape, with nothing measured.
	return telemetry.Summarize(nil, time.Now()), nil
}

// tcpAddr is addr as Consul's DebugConfig shows a TCP address; "" stays
// "" (and is left out).
func tcpAddr(addr string) string {
	if addr == "" {
		return ""
	}
	return "tcp://" + addr
}

func orEmptyStats(m map[string]map[string]string) map[string]map[string]string {
	if m == nil {
		return map[string]map[string]string{}
	}
	return m
}
