package structs

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
