package structs

// TxnKVOp is one KV operation inside a transaction.
type TxnKVOp struct {
	Verb   KVOp
	DirEnt DirEntry
}

// CatalogOp is the verb of a Node, Service or Check operation in a
// transaction, as Consul spells it (api.NodeOp, api.ServiceOp, api.CheckOp
// share these values).
type CatalogOp string

// Catalog verbs. cas and delete-cas compare the entity's ModifyIndex (a
// cas with ModifyIndex 0 creates only when the entity does not exist).
const (
	CatalogGet       CatalogOp = "get"
	CatalogSet       CatalogOp = "set"
	CatalogCAS       CatalogOp = "cas"
	CatalogDelete    CatalogOp = "delete"
	CatalogDeleteCAS CatalogOp = "delete-cas"
)

// IsWrite reports whether the verb needs Raft. As in Consul every verb but
// get counts, unknown ones included: they are refused by the state store
// with an error naming the operation.
func (op CatalogOp) IsWrite() bool { return op != CatalogGet }

// TxnNodeOp is one node operation. Get finds the node by ID when one is
// given, otherwise by name; the other verbs go by name.
type TxnNodeOp struct {
	Verb CatalogOp
	Node Node
}

// TxnServiceOp is one operation on the service instance Service.ID of
// node Node.
type TxnServiceOp struct {
	Verb    CatalogOp
	Node    string
	Service NodeService
}

// TxnCheckOp is one operation on the check Check.CheckID of node
// Check.Node.
type TxnCheckOp struct {
	Verb  CatalogOp
	Check HealthCheck
}

// TxnSessionVerb is the verb of a Session operation in a transaction
// (Consul's api.SessionOp; the Session Raft command has its own verbs).
type TxnSessionVerb string

// TxnSessionDelete destroys the session, releasing or deleting its locks.
// It is the only session verb, as in Consul.
const TxnSessionDelete TxnSessionVerb = "delete"

// TxnSessionOp is one session operation. Consul's HTTP API has no session
// operations: they exist for callers of the internal RPC.
type TxnSessionOp struct {
	Verb    TxnSessionVerb
	Session Session
}

// TxnOp is one operation of a transaction: exactly one field is set. When
// more are, the first in field order is the operation, as in Consul.
type TxnOp struct {
	KV      *TxnKVOp      `json:",omitempty"`
	Node    *TxnNodeOp    `json:",omitempty"`
	Service *TxnServiceOp `json:",omitempty"`
	Check   *TxnCheckOp   `json:",omitempty"`
	Session *TxnSessionOp `json:",omitempty"`
}

// IsEmpty reports whether the operation has no kind.
func (op *TxnOp) IsEmpty() bool {
	return op == nil || (op.KV == nil && op.Node == nil && op.Service == nil && op.Check == nil && op.Session == nil)
}

// IsWrite reports whether the operation must go through Raft.
func (op *TxnOp) IsWrite() bool {
	switch {
	case op == nil:
		return false
	case op.KV != nil:
		return op.KV.Verb.IsWrite()
	case op.Node != nil:
		return op.Node.Verb.IsWrite()
	case op.Service != nil:
		return op.Service.Verb.IsWrite()
	case op.Check != nil:
		return op.Check.Verb.IsWrite()
	}
	return op.Session != nil
}

// Verb is the operation's verb, for messages.
func (op *TxnOp) Verb() string {
	switch {
	case op == nil:
		return ""
	case op.KV != nil:
		return string(op.KV.Verb)
	case op.Node != nil:
		return string(op.Node.Verb)
	case op.Service != nil:
		return string(op.Service.Verb)
	case op.Check != nil:
		return string(op.Check.Verb)
	case op.Session != nil:
		return string(op.Session.Verb)
	}
	return ""
}

// TxnOps is the list of operations of one transaction.
type TxnOps []*TxnOp

// TxnRequest applies every operation atomically or none: the Txn Raft
// command (read-only transactions skip Raft).
type TxnRequest struct {
	Ops TxnOps
	WriteRequest
}

// TxnReadRequest is a transaction of only read and check verbs, served
// without Raft with the usual consistency modes.
type TxnReadRequest struct {
	Ops TxnOps
	QueryOptions
}

// TxnResult is one operation's result: at most one field is set.
type TxnResult struct {
	KV      *DirEntry    `json:",omitempty"`
	Node    *Node        `json:",omitempty"`
	Service *NodeService `json:",omitempty"`
	Check   *HealthCheck `json:",omitempty"`
}

// TxnResults lists results in operation order.
type TxnResults []*TxnResult

// TxnError says which operation failed and why.
type TxnError struct {
	OpIndex int
	What    string
}

// Error makes TxnError an error.
func (e TxnError) Error() string { return e.What }

// TxnErrors lists every failed operation.
type TxnErrors []*TxnError

// TxnResponse is a transaction's outcome: results when it committed,
// errors (and no results) when it was rolled back.
type TxnResponse struct {
	Results TxnResults
	Errors  TxnErrors
	QueryMeta
}
