package structs

import "time"

// SessionBehavior says what happens to a session's locks when it is
// invalidated.
type SessionBehavior string

// Session behaviors.
const (
	SessionKeysRelease SessionBehavior = "release"
	SessionKeysDelete  SessionBehavior = "delete"
)

// SessionTTLMultiplier is how much longer than its TTL the leader waits
// before it destroys a session that was not renewed, as in Consul.
const SessionTTLMultiplier = 2

// ServiceCheck names a service check a session depends on.
type ServiceCheck struct {
	ID        string
	Namespace string `json:",omitempty"`
}

// Session ties locks to the health of a node and checks: when any of its
// checks turns critical, or its TTL lapses, the session is invalidated and
// its locks released (or deleted).
type Session struct {
	ID            string
	Name          string
	Node          string
	LockDelay     time.Duration
	Behavior      SessionBehavior
	TTL           string
	NodeChecks    []string
	ServiceChecks []ServiceCheck
	RaftIndex
}

// Sessions is a list of sessions.
type Sessions []*Session

// CheckIDs lists every check (node and service) the session depends on.
func (s *Session) CheckIDs() []string {
	ids := make([]string, 0, len(s.NodeChecks)+len(s.ServiceChecks))
	ids = append(ids, s.NodeChecks...)
	for _, sc := range s.ServiceChecks {
		ids = append(ids, sc.ID)
	}
	return ids
}

// SessionOp is a session write verb.
type SessionOp string

// Session verbs.
const (
	SessionCreate  SessionOp = "create"
	SessionDestroy SessionOp = "destroy"
)

// SessionRequest creates or destroys a session: the Session Raft command.
type SessionRequest struct {
	Op      SessionOp
	Session Session
	WriteRequest
}

// SessionSpecificRequest reads one session.
type SessionSpecificRequest struct {
	SessionID string
	QueryOptions
}

// IndexedSessions is a read result of sessions.
type IndexedSessions struct {
	Sessions Sessions
	QueryMeta
}
