package state

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Sessions tie KV locks to the health of a node and checks (Consul's
// agent/consul/state/session.go). A session is destroyed explicitly, when
// its TTL lapses (the leader applies a destroy), when its node is
// deregistered, or when one of its checks turns critical or is removed;
// destroying it releases or deletes the keys it holds.

// SessionCreate stores a new session with the ID the caller chose. Its node
// must be registered, and every check it lists must be registered on that
// node and not critical. An empty Behavior means release.
func (s *Store) SessionCreate(idx uint64, in *structs.Session) error {
	return s.write(idx, func(tx *writeTxn) error {
		if in.ID == "" {
			return ErrMissingSessionID
		}
		if in.Node == "" {
			return ErrMissingNodeName
		}
		sess := in.Clone()
		switch sess.Behavior {
		case "":
			sess.Behavior = structs.SessionKeysRelease
		case structs.SessionKeysRelease, structs.SessionKeysDelete:
		default:
			return errorf(ErrInvalidSessionBehavior, "Invalid session behavior: %s", sess.Behavior)
		}
		if existing, err := getSession(tx.Txn, nil, sess.ID); err != nil {
			return err
		} else if existing != nil {
			return errorf(ErrSessionExists, "session %q already exists", sess.ID)
		}
		n, err := getNode(tx.Txn, sess.Node)
		if err != nil {
			return err
		}
		if n == nil {
			return ErrMissingNode
		}
		for _, id := range sess.CheckIDs() {
			c, err := getCheck(tx.Txn, n.Node, id)
			if err != nil {
				return err
			}
			if c == nil {
				return errorf(ErrMissingSessionCheck, "Missing check '%s' registration", id)
			}
			if c.Status == structs.HealthCritical {
				return errorf(ErrSessionCheckCritical, "Check '%s' is in critical state", id)
			}
		}
		sess.CreateIndex = tx.idx
		sess.ModifyIndex = tx.idx
		if err := tx.Insert(tableSessions, sess); err != nil {
			return fmt.Errorf("failed inserting session: %w", err)
		}
		return tx.bumpIndex(tableSessions)
	})
}

// SessionGet returns one session, or nil when it does not exist.
func (s *Store) SessionGet(ws memdb.WatchSet, id string) (uint64, *structs.Session, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	sess, err := getSession(tx, ws, id)
	if err != nil {
		return 0, nil, err
	}
	return maxIndex(tx, tableSessions), sess.Clone(), nil
}

// SessionList returns every session, ordered by ID.
func (s *Store) SessionList(ws memdb.WatchSet) (uint64, structs.Sessions, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	it, err := tx.Get(tableSessions, indexID)
	if err != nil {
		return 0, nil, fmt.Errorf("failed session lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	out := structs.Sessions{}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.Session).Clone())
	}
	return maxIndex(tx, tableSessions), out, nil
}

// NodeSessions returns the sessions of one node.
func (s *Store) NodeSessions(ws memdb.WatchSet, node string) (uint64, structs.Sessions, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	sessions, err := sessionsOnNode(tx, ws, node)
	if err != nil {
		return 0, nil, err
	}
	out := make(structs.Sessions, 0, len(sessions))
	for _, sess := range sessions {
		out = append(out, sess.Clone())
	}
	return maxIndex(tx, tableSessions), out, nil
}

// SessionDestroy destroys a session: the keys it holds are released
// (Behavior release: the lock is cleared, ModifyIndex moves) or deleted
// (Behavior delete, leaving tombstones), and each gets the session's lock
// delay. A missing session is not an error.
func (s *Store) SessionDestroy(idx uint64, id string) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.deleteSession(id) })
}

func (tx *writeTxn) deleteSession(id string) error {
	sess, err := getSession(tx.Txn, nil, id)
	if err != nil || sess == nil {
		return err
	}
	if err := tx.Delete(tableSessions, sess); err != nil {
		return fmt.Errorf("failed deleting session: %w", err)
	}
	if err := tx.bumpIndex(tableSessions); err != nil {
		return err
	}
	if err := tx.deleteSessionQueries(sess.ID); err != nil {
		return err
	}

	it, err := tx.Get(tableKVs, indexSession, sess.ID)
	if err != nil {
		return fmt.Errorf("failed kvs lookup: %w", err)
	}
	var held []*structs.DirEntry
	for raw := it.Next(); raw != nil; raw = it.Next() {
		held = append(held, raw.(*structs.DirEntry))
	}
	for _, e := range held {
		switch sess.Behavior {
		case structs.SessionKeysDelete:
			if err := tx.deleteKVEntry(e); err != nil {
				return err
			}
		default:
			released := e.Clone()
			released.Session = ""
			released.ModifyIndex = tx.idx
			if err := tx.insertKV(released); err != nil {
				return err
			}
		}
	}

	if sess.LockDelay > 0 && len(held) > 0 {
		keys := make([]string, len(held))
		for i, e := range held {
			keys[i] = e.Key
		}
		delays, d := tx.store.lockDelay, sess.LockDelay
		// Only once the transaction commits: a rolled-back destroy must
		// not hold anyone off.
		tx.Defer(func() {
			now := time.Now()
			for _, k := range keys {
				delays.set(k, now, d)
			}
		})
	}
	return nil
}

// getSession looks a session up by ID and watches it.
func getSession(tx *memdb.Txn, ws memdb.WatchSet, id string) (*structs.Session, error) {
	ch, raw, err := tx.FirstWatch(tableSessions, indexID, id)
	if err != nil {
		return nil, fmt.Errorf("failed session lookup: %w", err)
	}
	ws.Add(ch)
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.Session), nil
}

// sessionsOnNode lists the sessions of node.
func sessionsOnNode(tx *memdb.Txn, ws memdb.WatchSet, node string) ([]*structs.Session, error) {
	it, err := tx.Get(tableSessions, indexNode, node)
	if err != nil {
		return nil, fmt.Errorf("failed session lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	var out []*structs.Session
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.Session))
	}
	return out, nil
}
