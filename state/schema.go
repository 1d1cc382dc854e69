package state

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Table names.
const (
	tableIndex      = "index"
	tableNodes      = "nodes"
	tableServices   = "services"
	tableChecks     = "checks"
	tableKVs        = "kvs"
	tableTombstones = "tombstones"
	tableSessions   = "sessions"
)

// Index names. "id" is memdb's mandatory primary index.
const (
	indexID          = "id"
	indexIDPrefix    = "id_prefix"
	indexUUID        = "uuid"
	indexNode        = "node"
	indexService     = "service"
	indexConnect     = "connect"
	indexStatus      = "status"
	indexNodeService = "node_service"
	indexSession     = "session"
)

// serviceRow is what the services table stores: one service instance and
// the name of the node it is registered on (the NodeService type itself does
// not carry its node).
type serviceRow struct {
	Node    string
	Service *structs.NodeService
}

// schema describes every table. Node names, service names and IDs and check
// IDs are indexed case-insensitively, as Consul does; KV keys and session IDs
// are exact.
func schema() *memdb.DBSchema {
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tableIndex: {
			Name: tableIndex,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Key"}},
			},
		},
		tableNodes: {
			Name: tableNodes,
			Indexes: map[string]*memdb.IndexSchema{
				indexID:   {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Node", Lowercase: true}},
				indexUUID: {Name: indexUUID, Unique: true, AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "ID", Lowercase: true}},
			},
		},
		tableServices: {
			Name: tableServices,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: keyIndexer(func(r *serviceRow) []string {
					return []string{r.Node, r.Service.ID}
				})},
				indexNode: {Name: indexNode, Indexer: keyIndexer(func(r *serviceRow) []string {
					return []string{r.Node}
				})},
				indexService: {Name: indexService, Indexer: keyIndexer(func(r *serviceRow) []string {
					return []string{r.Service.Service}
				})},
				indexConnect: {Name: indexConnect, AllowMissing: true, Indexer: keyIndexer(func(r *serviceRow) []string {
					if d := connectDestination(r.Service); d != "" {
						return []string{d}
					}
					return nil
				})},
			},
		},
		tableChecks: {
			Name: tableChecks,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: keyIndexer(func(c *structs.HealthCheck) []string {
					return []string{c.Node, c.CheckID}
				})},
				indexNode: {Name: indexNode, Indexer: keyIndexer(func(c *structs.HealthCheck) []string {
					return []string{c.Node}
				})},
				indexStatus: {Name: indexStatus, Indexer: &memdb.StringFieldIndex{Field: "Status"}},
				indexService: {Name: indexService, AllowMissing: true, Indexer: keyIndexer(func(c *structs.HealthCheck) []string {
					if c.ServiceName == "" {
						return nil
					}
					return []string{c.ServiceName}
				})},
				indexNodeService: {Name: indexNodeService, AllowMissing: true, Indexer: keyIndexer(func(c *structs.HealthCheck) []string {
					if c.ServiceID == "" {
						return nil
					}
					return []string{c.Node, c.ServiceID}
				})},
			},
		},
		tableKVs: {
			Name: tableKVs,
			Indexes: map[string]*memdb.IndexSchema{
				indexID:      {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Key"}},
				indexSession: {Name: indexSession, AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "Session"}},
			},
		},
		tableTombstones: {
			Name: tableTombstones,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Key"}},
			},
		},
		tableSessions: {
			Name: tableSessions,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
				indexNode: {Name: indexNode, Indexer: keyIndexer(func(s *structs.Session) []string {
					return []string{s.Node}
				})},
			},
		},
		// The Connect CA (connect_ca.go).
		tableCAConfig: caConfigTableSchema(),
		tableCARoots:  caRootsTableSchema(),
		tableCAKeys:   caKeysTableSchema(),
		tableCASerial: caSerialTableSchema(),
		// Config entries and intentions (config_entry.go).
		tableConfigEntries: configEntriesTableSchema(),
		// The FSM's at-most-once guard (requests.go).
		tableRequests: requestsTableSchema(),
		// Network coordinates (coordinates.go).
		tableCoordinates: coordinatesTableSchema(),
		// Which gateway fronts which service (gateway_services.go).
		tableGatewayServices: gatewayServicesTableSchema(),
		// Prepared queries (prepared_query.go).
		tablePreparedQueries: preparedQueriesTableSchema(),
		// Virtual IPs of mesh services (virtual_ip.go).
		tableVirtualIPs: virtualIPsTableSchema(),
		// The autopilot configuration (autopilot.go).
		tableAutopilotConfig: autopilotConfigTableSchema(),
		// ACL tokens, policies and roles (acl*.go).
		tableACLTokens:   aclTokensTableSchema(),
		tableACLPolicies: aclPoliciesTableSchema(),
		tableACLRoles:    aclRolesTableSchema(),
	}}
}

// connectDestination names the service whose Connect endpoint svc is: the
// destination of a connect-proxy, or the service itself when it is
// Connect-native. It is empty for anything else.
func connectDestination(svc *structs.NodeService) string {
	if svc.Kind == structs.ServiceKindConnectProxy {
		return svc.Proxy.DestinationServiceName
	}
	if svc.Connect.Native {
		return svc.Service
	}
	return ""
}

// compoundIndexer indexes objects of type T by a tuple of strings, compared
// case-insensitively. Lookups pass the same number of string arguments.
// A nil tuple means the object is not in the index.
type compoundIndexer[T any] struct {
	parts func(T) []string
}

func keyIndexer[T any](parts func(T) []string) *compoundIndexer[T] {
	return &compoundIndexer[T]{parts: parts}
}

func encodeKey(parts []string) []byte {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strings.ToLower(p))
		// The NUL terminator keeps "ab"+"c" apart from "a"+"bc" and makes
		// an exact lookup of "web" miss "web2".
		b.WriteByte(0)
	}
	return []byte(b.String())
}

// FromObject implements memdb.SingleIndexer.
func (c *compoundIndexer[T]) FromObject(raw interface{}) (bool, []byte, error) {
	obj, ok := raw.(T)
	if !ok {
		return false, nil, fmt.Errorf("unexpected object type %T", raw)
	}
	parts := c.parts(obj)
	if parts == nil {
		return false, nil, nil
	}
	return true, encodeKey(parts), nil
}

// FromArgs implements memdb.Indexer.
func (c *compoundIndexer[T]) FromArgs(args ...interface{}) ([]byte, error) {
	parts := make([]string, len(args))
	for i, a := range args {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("argument %d must be a string: %#v", i, a)
		}
		parts[i] = s
	}
	return encodeKey(parts), nil
}
