package structs

import (
	"maps"
	"slices"
)

// PreparedQuery is Consul's prepared query (/v1/query): a stored service
// lookup that clients run by ID or name over HTTP
// (/v1/query/<id-or-name>/execute) or DNS (<name>.query.<domain>). A query
// with a Template answers every name its Name prefixes, rendering its
// fields from the name that was asked for (see Render).
type PreparedQuery struct {
	ID string
	// Name is how clients run the query; empty means it runs by ID only
	// (or, for a template, that it matches every name). Names are
	// case-insensitive and unique among all queries.
	Name string
	// Session, when set, ties the query's life to the session: the query
	// is deleted when the session is invalidated.
	Session string
	// Token, when set, is the ACL token every execution of the query
	// runs with instead of the caller's; it reads as "<hidden>" to callers
	// that may not write ACLs (Redacted).
	Token    string
	Template QueryTemplateOptions
	Service  ServiceQuery
	DNS      QueryDNSOptions
	RaftIndex
}

// QueryTemplateOptions makes a query a template. Type must be
// QueryTemplateTypeNamePrefixMatch.
type QueryTemplateOptions struct {
	Type string
	// Regexp is matched against the full name asked for; its captures are
	// ${match(N)} in the template's fields.
	Regexp string
	// RemoveEmptyTags drops the tags that render to "".
	RemoveEmptyTags bool
}

// QueryTemplateTypeNamePrefixMatch is the only template type: the template
// whose Name is the longest prefix of the name asked for answers it.
const QueryTemplateTypeNamePrefixMatch = "name_prefix_match"

// ServiceQuery says which instances of a service a query returns.
type ServiceQuery struct {
	Service  string
	Failover QueryFailoverOptions
	// OnlyPassing drops instances with a warning check too (instances with
	// a critical check are always dropped).
	OnlyPassing bool
	// IgnoreCheckIDs are checks whose status does not count.
	IgnoreCheckIDs []string
	// Near sorts by round trip time from a node: a node name, "_agent"
	// (the agent that runs the query) or "_ip" (the node whose address is
	// the client's).
	Near string
	// Tags each must be on the instance, or with a leading "!" must not
	// be (case-insensitive).
	Tags        []string
	NodeMeta    map[string]string
	ServiceMeta map[string]string
	// Connect returns the service's Connect endpoints instead of the
	// service itself.
	Connect bool
}

// QueryFailoverOptions says which other datacenters a query tries when its
// own has no healthy instance.
type QueryFailoverOptions struct {
	NearestN    int
	Datacenters []string
	Targets     []QueryFailoverTarget
}

// QueryFailoverTarget is one failover destination.
type QueryFailoverTarget struct {
	Peer       string `json:",omitempty"`
	Datacenter string `json:",omitempty"`
}

// QueryDNSOptions are the DNS answers' settings: TTL is a duration ("10s");
// empty uses the agent's service TTL.
type QueryDNSOptions struct {
	TTL string
}

// PreparedQueries is a list of prepared queries.
type PreparedQueries []*PreparedQuery

// Clone returns a deep copy of the query (nil for nil).
func (q *PreparedQuery) Clone() *PreparedQuery {
	if q == nil {
		return nil
	}
	c := *q
	c.Service.IgnoreCheckIDs = slices.Clone(q.Service.IgnoreCheckIDs)
	c.Service.Tags = slices.Clone(q.Service.Tags)
	c.Service.NodeMeta = maps.Clone(q.Service.NodeMeta)
	c.Service.ServiceMeta = maps.Clone(q.Service.ServiceMeta)
	c.Service.Failover.Datacenters = slices.Clone(q.Service.Failover.Datacenters)
	c.Service.Failover.Targets = slices.Clone(q.Service.Failover.Targets)
	return &c
}

// PreparedQueryOp is a prepared query write verb.
type PreparedQueryOp string

// Prepared query verbs.
const (
	PreparedQueryCreate PreparedQueryOp = "create"
	PreparedQueryUpdate PreparedQueryOp = "update"
	PreparedQueryDelete PreparedQueryOp = "delete"
)

// PreparedQueryRequest creates, updates or deletes a query: the
// PreparedQuery Raft command. A delete needs only Query.ID.
type PreparedQueryRequest struct {
	Op    PreparedQueryOp
	Query *PreparedQuery
	WriteRequest
}

// PreparedQuerySpecificRequest reads one query by ID.
type PreparedQuerySpecificRequest struct {
	QueryID string
	QueryOptions
}

// PreparedQueryExecuteRequest runs a query by ID or name.
type PreparedQueryExecuteRequest struct {
	QueryIDOrName string
	// Limit keeps at most this many instances (0: all).
	Limit int
	// Source, from ?near=, overrides the query's Near.
	Source QuerySource
	// Agent is the agent that runs the query: what Near "_agent" means,
	// and the segment of ${agent.segment}.
	Agent QuerySource
	// SourceIP is the client's address, what Near "_ip" looks up.
	SourceIP string
	// Connect (?connect=true) asks for the Connect endpoints whatever the
	// query's own Connect says.
	Connect bool
	QueryOptions
}

// IndexedPreparedQueries is a read result of queries.
type IndexedPreparedQueries struct {
	Queries PreparedQueries
	QueryMeta
}

// PreparedQueryExecuteResponse is the answer of an execute, in Consul's
// JSON.
type PreparedQueryExecuteResponse struct {
	Service    string
	Nodes      CheckServiceNodes
	DNS        QueryDNSOptions
	Datacenter string
	// Failovers is how many other datacenters were asked.
	Failovers int
	QueryMeta `json:"-"`
}

// PreparedQueryExplainResponse is the query an execute with the same name
// would run, template rendered.
type PreparedQueryExplainResponse struct {
	Query     PreparedQuery
	QueryMeta `json:"-"`
}

// ErrQueryNotFound: no query has the ID, or answers the name, a read or an
// execute names (Consul's text, a 404 over HTTP).
var ErrQueryNotFound = newError("QueryNotFound", CodeNotFound, "Query not found")

// Redacted is a copy of the query whose Token, if any, reads "<hidden>",
// for callers that may read the query but not write ACLs, as Consul
// shows it. The copy shares everything else with q.
func (q *PreparedQuery) Redacted() *PreparedQuery {
	c := *q
	if c.Token != "" {
		c.Token = redactedSecret
	}
	return &c
}
