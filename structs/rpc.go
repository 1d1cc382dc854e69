package structs

import "time"

// QueryOptions are the options every read carries: which datacenter, the
// consistency mode and the blocking-query parameters.
type QueryOptions struct {
	Datacenter string
	// Token is the caller's ACL SecretID. It crosses the internal RPC
	// (NewRPCCodec: the server decides what a token may do, never the
	// agent that received the request) but neither HTTP JSON nor the Raft
	// log, where a write's command must not keep its caller's secret.
	Token string `json:"-" rpc:"Token"`
	// MinQueryIndex makes the read block until the result's index passes it
	// (or MaxQueryTime elapses). Zero means do not block.
	MinQueryIndex uint64
	MaxQueryTime  time.Duration
	// AllowStale lets any server answer from its local store.
	AllowStale bool
	// RequireConsistent makes the leader confirm its leadership with a
	// quorum before it answers.
	RequireConsistent bool
	// Filter is Consul's ?filter= expression (ParseFilter syntax) over the
	// elements of the result. The server that answers the read applies it
	// to a Filterable reply; any other reply refuses it with
	// ErrFilterNotSupported.
	Filter string
}

// QueryOpts gives generic code (RPC forwarding, blocking) the options of any
// request that embeds QueryOptions.
func (q *QueryOptions) QueryOpts() *QueryOptions { return q }

// QueryMeta describes how a read was served: the index of the data, how long
// since the answering server heard from the leader, and whether a leader is
// known. It becomes the X-Consul-* headers.
type QueryMeta struct {
	Index       uint64
	LastContact time.Duration
	KnownLeader bool
	// ResultsFilteredByACLs says the server left out what the caller's
	// token may not read (X-Consul-Results-Filtered-By-ACLs); never set
	// for the anonymous token, as Consul.
	ResultsFilteredByACLs bool
}

// Meta gives generic code the meta of any result that embeds QueryMeta.
func (m *QueryMeta) Meta() *QueryMeta { return m }

// WriteRequest is what every write carries.
type WriteRequest struct {
	Datacenter string `json:",omitempty"`
	// Token is the caller's ACL SecretID; see QueryOptions.Token.
	Token string `json:"-" rpc:"Token"`
	// RequestID names one client write across every retry of it: the first
	// agent that handles the write gives it one (EnsureRequestID), every
	// forward and retry carries it, and the FSM applies a command with a
	// given ID at most once (see DedupRequest). Never read from HTTP JSON:
	// an ID is the agent's to choose.
	RequestID string `json:"-" codec:"RequestID"`
}

// WriteOpts gives generic code the options of any write.
func (w *WriteRequest) WriteOpts() *WriteRequest { return w }

// DCSpecificRequest is a read scoped to a datacenter only.
type DCSpecificRequest struct {
	NodeMetaFilters map[string]string
	// Source, when it names a node, sorts the nodes of the result by
	// estimated round trip time from it (?near=).
	Source QuerySource
	QueryOptions
}

// NodeSpecificRequest is a read about one node.
type NodeSpecificRequest struct {
	Node string
	QueryOptions
}

// ServiceSpecificRequest is a read about one service's instances.
type ServiceSpecificRequest struct {
	ServiceName string
	// ServiceTags, with TagFilter, keeps only instances carrying every tag.
	ServiceTags []string
	TagFilter   bool
	// Connect asks for the service's Connect endpoints (its sidecar proxies
	// and Connect-native instances) instead of the service itself.
	Connect bool
	// Ingress asks for the instances of the ingress gateways that expose
	// the service (by name or through a wildcard) instead
	// (/v1/health/ingress/<service>).
	Ingress bool
	// PassingOnly drops instances with any check not passing.
	PassingOnly     bool
	NodeMetaFilters map[string]string
	// Source, when it names a node, sorts the instances by estimated round
	// trip time from it (?near=).
	Source QuerySource
	QueryOptions
}

// ChecksInStateRequest lists checks in one state ("any" for all).
type ChecksInStateRequest struct {
	State string
	QueryOptions
}

// IndexedNodes is a read result of nodes.
type IndexedNodes struct {
	Nodes Nodes
	QueryMeta
}

// IndexedServices maps each service name to its (deduplicated) tags.
type IndexedServices struct {
	Services map[string][]string
	QueryMeta
}

// IndexedServiceNodes is a read result of flattened instances.
type IndexedServiceNodes struct {
	ServiceNodes ServiceNodes
	QueryMeta
}

// IndexedNodeServices is a read result of one node and its services (nil
// when the node does not exist).
type IndexedNodeServices struct {
	NodeServices *NodeServices
	QueryMeta
}

// IndexedHealthChecks is a read result of checks.
type IndexedHealthChecks struct {
	HealthChecks HealthChecks
	QueryMeta
}

// IndexedCheckServiceNodes is a read result of instances with health.
type IndexedCheckServiceNodes struct {
	Nodes CheckServiceNodes
	QueryMeta
}

// RaftServer is one server in the Raft configuration, as
// /v1/operator/raft/configuration shows it.
type RaftServer struct {
	ID              string
	Node            string
	Address         string
	Leader          bool
	ProtocolVersion string
	Voter           bool
	LastIndex       uint64
}

// RaftConfigurationResponse is the Raft configuration with the index it was
// read at.
type RaftConfigurationResponse struct {
	Servers []*RaftServer
	Index   uint64
}
