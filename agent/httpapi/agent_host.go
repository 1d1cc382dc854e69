package httpapi

import (
	"context"
	"net/http"
)

// HostInfo reports the machine the agent runs on, for /v1/agent/host.
type HostInfo interface {
	// HostInfo returns Consul's host document (Memory, CPU, Host, Disk,
	// CollectionTime, Errors); a part that cannot be read is listed in
	// Errors rather than failing the whole.
	HostInfo(ctx context.Context) any
}

// agentHost handles GET /v1/agent/host.
func (s *Server) agentHost(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.host == nil {
		return nil, errNotServed
	}
	return s.host.HostInfo(r.Context()), nil
}
