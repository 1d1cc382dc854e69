package structs

// TxnKVOp is one KV operation inside a transaction.
type TxnKVOp struct {
	Verb   KVOp
	DirEnt DirEntry
}

// TxnOp is one operation of a transaction. Only KV operations exist so far;
// each kind gets its own field, as in Consul.
type TxnOp struct {
	KV *TxnKVOp `json:",omitempty"`
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

// TxnResult is one operation's result.
type TxnResult struct {
	KV *DirEntry `json:",omitempty"`
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
