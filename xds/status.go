package xds

import "time"

// Stream states reported in StreamStatus.State.
const (
	// StateWaiting: the stream is open but the Source has not delivered any
	// resources yet (typically the proxy is not registered yet).
	StateWaiting = "waiting"
	// StateServing: the stream has resources and serves them.
	StateServing = "serving"
)

// Protocols reported in StreamStatus.Protocol.
const (
	ProtocolDelta = "delta"
	ProtocolSotW  = "sotw"
)

// StreamStatus describes one open ADS stream, for
// GET /v1/agent/proxy-status/<proxy-id>. It is a copy: later changes of the
// stream do not show in it.
type StreamStatus struct {
	// StreamID is unique among the streams of this server.
	StreamID uint64
	// ProxyID is the Envoy node ID; Node the node it is registered on.
	ProxyID string
	Node    string
	// Protocol is ProtocolDelta or ProtocolSotW.
	Protocol    string
	ConnectedAt time.Time
	// State is StateWaiting until the first resources arrive, then
	// StateServing.
	State string
	// Types has one entry per type URL the client subscribed to, in
	// make-before-break order.
	Types []TypeStatus
}

// TypeStatus is the ACK/NACK bookkeeping of one resource type on one
// stream. Versions are those of this server's responses: the
// state-of-the-world version_info, or the delta system_version_info (a
// fingerprint of everything of the type the client holds after applying
// the response).
type TypeStatus struct {
	TypeURL string
	// LastSentVersion and LastSentNonce identify the latest response.
	LastSentVersion string
	LastSentNonce   string
	LastSentAt      time.Time `json:",omitzero"`
	// LastAckedVersion is the latest response the client accepted.
	LastAckedVersion string
	LastAckedAt      time.Time `json:",omitzero"`
	// LastNackedVersion is the latest response the client rejected, with
	// Envoy's error_detail message verbatim and its code.
	LastNackedVersion string
	LastNackedAt      time.Time `json:",omitzero"`
	LastNackError     string
	LastNackCode      int32
	// Pending is true while a response awaits its ACK or NACK.
	Pending bool
	// Suppressed is true after a NACK until the type's resources change:
	// the rejected content is not sent again.
	Suppressed bool
	// Wildcard and Subscribed describe the subscription (Subscribed counts
	// the explicitly named resources).
	Wildcard   bool
	Subscribed int
	// Held counts the resources the client holds, as far as the server
	// knows.
	Held int
}
