package agent

import (
	"github.com/trellis-mesh/trellis/agent/httpapi"
	"github.com/trellis-mesh/trellis/agent/leafcert"
)

// Connect wiring: the leaf certificate manager and the authorize endpoint.

// startConnect starts the agent's leaf certificate manager. It signs
// through the agent's RPC path (the local server on a server agent, the
// servers on a client agent) and watches the CA roots until Stop.
func (a *Agent) startConnect() (*leafcert.Manager, error) {
	m, err := leafcert.New(leafcert.Config{
		RPC:        a,
		Datacenter: a.rc.Datacenter,
		Logger:     a.logger.With("component", "leafcert"),
	})
	if err != nil {
		return nil, err
	}
	m.Start()
	return m, nil
}

// connectHTTPConfig returns the Connect dependencies of the HTTP API. The
// authorizer is httpapi.DefaultAllowAuthorizer (allow, as Consul with ACLs
// disabled and no intentions) until intentions provide one: that is the
// place to plug it in.
func connectHTTPConfig(leaf *leafcert.Manager) (httpapi.LeafCerts, httpapi.ConnectAuthorizer) {
	var lc httpapi.LeafCerts
	if leaf != nil {
		lc = leaf
	}
	return lc, httpapi.DefaultAllowAuthorizer{}
}
