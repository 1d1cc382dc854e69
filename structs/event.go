package structs

import "strconv"

// UserEvent is a custom event fired over Serf to every agent
// (/v1/event/fire, `trellis event`). Events are gossip, not Raft: they are
// not stored by the servers, each agent keeps the last ones it received
// and accepted. NodeFilter, ServiceFilter and TagFilter are regular
// expressions a receiving agent matches against its own node name and its
// local services; an agent that matches none of them ignores the event.
type UserEvent struct {
	ID            string
	Name          string
	Payload       []byte
	NodeFilter    string
	ServiceFilter string
	TagFilter     string
	// Version is the event encoding's version (UserEventVersion).
	Version int
	// LTime is Serf's Lamport time of the event, set on receipt; 0 in the
	// answer to a fire.
	LTime uint64
}

// UserEventVersion is the version of the user events this agent fires
// and the highest it accepts, as Consul's.
const UserEventVersion = 1

// UserEventIndex is the blocking-query index of an event list whose newest
// event has the given ID, in Consul's scheme: the XOR of the two halves of
// the UUID's hex digits (the official client's IDToIndex). It is not
// monotonic, so clients compare it only for equality. Zero for an ID that
// is not a UUID.
func UserEventIndex(id string) uint64 {
	if len(id) != 36 {
		return 0
	}
	lo, err1 := strconv.ParseUint(id[0:8]+id[9:13]+id[14:18], 16, 64)
	hi, err2 := strconv.ParseUint(id[19:23]+id[24:36], 16, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return lo ^ hi
}
