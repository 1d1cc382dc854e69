package structs

// DirEntry is one KV entry: the shape /v1/kv returns (Value as base64).
type DirEntry struct {
	LockIndex uint64
	Key       string
	Flags     uint64
	Value     []byte
	Session   string `json:",omitempty"`
	RaftIndex
}

// DirEntries is a list of KV entries.
type DirEntries []*DirEntry

// KVOp is a KV verb, as Consul spells it in transactions and Raft commands.
type KVOp string

// KV verbs. The write verbs go through Raft; the read and check verbs are
// only meaningful inside a transaction.
const (
	KVSet            KVOp = "set"
	KVDelete         KVOp = "delete"
	KVDeleteCAS      KVOp = "delete-cas"
	KVDeleteTree     KVOp = "delete-tree"
	KVCAS            KVOp = "cas"
	KVLock           KVOp = "lock"
	KVUnlock         KVOp = "unlock"
	KVGet            KVOp = "get"
	KVGetTree        KVOp = "get-tree"
	KVCheckSession   KVOp = "check-session"
	KVCheckIndex     KVOp = "check-index"
	KVCheckNotExists KVOp = "check-not-exists"
)

// IsWrite reports whether the verb changes the store.
func (op KVOp) IsWrite() bool {
	switch op {
	case KVSet, KVDelete, KVDeleteCAS, KVDeleteTree, KVCAS, KVLock, KVUnlock:
		return true
	}
	return false
}

// KVSRequest is one KV write: the KVS Raft command.
type KVSRequest struct {
	Op     KVOp
	DirEnt DirEntry
	WriteRequest
}

// KeyRequest reads one key.
type KeyRequest struct {
	Key string
	QueryOptions
}

// KeyListRequest lists keys (or entries) under a prefix. Seperator (sic, as
// Consul spells it) stops listing at the next separator, like a directory.
type KeyListRequest struct {
	Prefix    string
	Seperator string
	QueryOptions
}

// IndexedDirEntries is a read result of KV entries.
type IndexedDirEntries struct {
	Entries DirEntries
	QueryMeta
}

// IndexedKeyList is a read result of key names.
type IndexedKeyList struct {
	Keys []string
	QueryMeta
}

// TombstoneRequest reaps KV tombstones up to ReapIndex: the leader issues it
// once no blocking query can still need them.
type TombstoneRequest struct {
	ReapIndex uint64
	WriteRequest
}
