package httpapi

import "net/http"

// ProxyStatuses reports a proxy's open xDS streams: per resource type, the
// last version sent, acknowledged and rejected (with Envoy's error text).
// The result is encoded as JSON as it is; an empty list when no stream is
// open.
type ProxyStatuses interface {
	ProxyStatus(proxyID string) any
}

// agentProxyStatus handles GET /v1/agent/proxy-status/<proxy-id>, a
// Trellis addition (Consul has no such endpoint).
func (s *Server) agentProxyStatus(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.proxyStatus == nil {
		return nil, errNotServed
	}
	id := pathSuffix(r, "/v1/agent/proxy-status/")
	if id == "" {
		return nil, badRequest("Missing proxy ID")
	}
	return s.proxyStatus.ProxyStatus(id), nil
}
