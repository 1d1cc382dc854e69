// Package state is Trellis' replicated state: a go-memdb database holding the
// catalog (nodes, services, checks), the KV store with its tombstones,
// sessions, and an index table that records the Raft index at which every
// table (and finer key, such as one service's health) last changed.
//
// The FSM is the only writer: it calls the write methods with the Raft index
// of the log entry it applies, so every replica ends in the same state. The
// server's RPC endpoints call the reads inside blocking-query loops: every
// read returns the highest Raft index its result depends on and adds the
// memdb watch channels that close when that result may have changed to the
// WatchSet it is given (which may be nil).
//
// Ownership: every object stored is a private copy made at write time and is
// never mutated afterwards (readers share it through memdb's immutable
// trees). Every object a read returns is a fresh deep copy that the caller
// owns and may modify. Writes never modify the objects they are given.
//
// The package knows nothing of Raft or HTTP.
package state

import (
	"sync"
	"time"

	"github.com/hashicorp/go-memdb"
)

// Store is the state store. It is safe for concurrent use: writes are
// serialised by memdb, reads run on lock-free snapshots.
type Store struct {
	db *memdb.MemDB

	// abandonCh is closed when a snapshot restore replaces this store, so
	// that blocking queries still watching it wake up and re-read the new
	// one.
	abandonCh   chan struct{}
	abandonOnce sync.Once

	// lockDelay is not replicated: each server keeps the lock delays of the
	// sessions it saw invalidated.
	lockDelay *lockDelays
}

// NewStore returns an empty store.
func NewStore() *Store {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		// The schema is a constant of this package: an error is a bug.
		panic("state: invalid memdb schema: " + err.Error())
	}
	return &Store{
		db:        db,
		abandonCh: make(chan struct{}),
		lockDelay: newLockDelays(),
	}
}

// AbandonCh is closed by Abandon. Blocking queries add it to their WatchSet
// so that they wake up when a snapshot restore replaces the store.
func (s *Store) AbandonCh() <-chan struct{} { return s.abandonCh }

// Abandon marks the store as replaced. It is safe to call more than once.
func (s *Store) Abandon() {
	s.abandonOnce.Do(func() { close(s.abandonCh) })
}

// LastIndex returns the highest index recorded in the index table, across
// every table and key: the last Raft index that changed anything.
func (s *Store) LastIndex() uint64 {
	tx := s.db.Txn(false)
	defer tx.Abort()
	return lastIndexTxn(tx)
}

// writeTxn is a memdb write transaction together with the Raft index of the
// write it performs and the store it belongs to.
type writeTxn struct {
	*memdb.Txn
	idx   uint64
	store *Store
}

// write runs fn in one memdb write transaction at Raft index idx and commits
// it only when fn succeeds, so that a failed write leaves no trace.
func (s *Store) write(idx uint64, fn func(tx *writeTxn) error) error {
	tx := &writeTxn{Txn: s.db.Txn(true), idx: idx, store: s}
	defer tx.Abort()
	if err := fn(tx); err != nil {
		return err
	}
	tx.Commit()
	return nil
}

// lockDelays remembers, per KV key, until when a new lock on it must wait
// after the session that held it was invalidated (Consul's lock-delay): it
// gives the old holder time to notice it lost the lock.
type lockDelays struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func newLockDelays() *lockDelays { return &lockDelays{m: make(map[string]time.Time)} }

// set records a delay for key starting now; a longer delay already in
// place is kept.
func (l *lockDelays) set(key string, now time.Time, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	until := now.Add(d)
	if cur, ok := l.m[key]; ok && cur.After(until) {
		return
	}
	// Expired entries are dropped here so the map does not grow forever.
	for k, t := range l.m {
		if !t.After(now) {
			delete(l.m, k)
		}
	}
	l.m[key] = until
}

// get returns the end of key's lock delay, or the zero time when none is in
// effect.
func (l *lockDelays) get(key string, now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.m[key]
	if !ok {
		return time.Time{}
	}
	if !t.After(now) {
		delete(l.m, key)
		return time.Time{}
	}
	return t
}
