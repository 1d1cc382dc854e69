package httpapi

import "net/http"

// Reloader re-reads the agent's configuration files for
// /v1/agent/reload.
type Reloader interface {
	// Reload applies the configuration as the files now say; an error
	// leaves the agent as it was.
	Reload() error
}

// agentReload handles PUT /v1/agent/reload. As in Consul, a failed reload
// answers 500 with the reason, and a successful one 200 with no body.
func (s *Server) agentReload(_ http.ResponseWriter, _ *http.Request) (any, error) {
	if s.reloader == nil {
		return nil, errNotServed
	}
	if err := s.reloader.Reload(); err != nil {
		return nil, serverError(err.Error())
	}
	return nil, nil
}
