package agent

import (
	"errors"

	"github.com/trellis-mesh/trellis/proxycfg"
	leafsource "github.com/trellis-mesh/trellis/proxycfg/datasources/leaf"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/remote"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/serverstate"
	catalogsource "github.com/trellis-mesh/trellis/proxycfg/sources/catalog"
	localsource "github.com/trellis-mesh/trellis/proxycfg/sources/local"
)

// Proxy configuration wiring: the proxycfg.Manager with the data sources
// of this agent's role, the local config source on every agent, and the
// catalog config source on servers.

// proxyConfig is everything startProxycfg started, stopped in reverse
// order by stop.
type proxyConfig struct {
	manager *proxycfg.Manager
	leaf    *leafsource.Source
	// Exactly one of server and remote is set: a server reads its own
	// state store, a client agent asks the servers.
	server  *serverstate.Sources
	remote  *remote.Sources
	local   *localsource.Source
	catalog *catalogsource.Source // servers only
	source  proxyWatcher          // xds.go
}

// startProxycfg builds the manager and the config sources. It needs the
// local state and the leaf manager, and (on a server) the server.
func (a *Agent) startProxycfg() (_ *proxyConfig, err error) {
	if a.local == nil || a.leaf == nil {
		return nil, errors.New("agent: proxycfg needs local state and the leaf manager")
	}
	rc := a.rc
	logger := a.logger.With("component", "proxycfg")
	p := &proxyConfig{}
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	if p.leaf, err = leafsource.New(leafsource.Config{Watcher: a.leaf, Logger: logger}); err != nil {
		return nil, err
	}
	var ds proxycfg.DataSources
	if a.server != nil {
		p.server, err = serverstate.New(serverstate.Config{
			Logger:                 logger,
			Store:                  a.server.StateStore,
			Datacenter:             rc.Datacenter,
			DefaultIntentionPolicy: rc.IntentionDefaultPolicy,
			// The store is read directly, so the server applies its RPC
			// methods' ACL rules to each read with the proxy's token.
			ACL: a.server,
		})
		if err != nil {
			return nil, err
		}
		ds = p.server.DataSources(p.leaf)
	} else {
		if p.remote, err = remote.New(remote.Config{RPC: a, Logger: logger, Datacenter: rc.Datacenter}); err != nil {
			return nil, err
		}
		ds = p.remote.DataSources(p.leaf)
	}
	p.manager, err = proxycfg.New(proxycfg.Config{
		Logger:                 logger,
		DataSources:            ds,
		Datacenter:             rc.Datacenter,
		DefaultIntentionPolicy: rc.IntentionDefaultPolicy,
		RateLimit:              proxycfg.RateLimit{PerSecond: rc.XDSUpdateMaxPerSecond},
	})
	if err != nil {
		return nil, err
	}
	p.local, err = localsource.New(localsource.Config{
		Logger:   logger,
		NodeName: rc.NodeName,
		State:    a.local.state,
		Manager:  p.manager,
		// A proxy registered without a token reads its configuration
		// with the default token, as Consul's do.
		Tokens: a.tokens,
	})
	if err != nil {
		return nil, err
	}
	p.local.Start()
	p.source = p.local
	if a.server != nil {
		p.catalog, err = catalogsource.New(catalogsource.Config{
			Logger:      logger,
			NodeName:    rc.NodeName,
			LocalState:  a.local.state,
			LocalSource: p.local,
			Manager:     p.manager,
			Store:       a.server.StateStore,
		})
		if err != nil {
			return nil, err
		}
		p.source = p.catalog
	}
	return p, nil
}

// stop ends every goroutine of the proxy configuration: the config
// sources first (they deregister their proxies), then the manager (whose
// state machines cancel their data watches), then the data sources.
func (p *proxyConfig) stop() {
	if p.catalog != nil {
		p.catalog.Close()
	}
	if p.local != nil {
		p.local.Stop()
	}
	if p.manager != nil {
		p.manager.Close()
	}
	if p.server != nil {
		p.server.Close()
	}
	if p.remote != nil {
		p.remote.Close()
	}
	if p.leaf != nil {
		p.leaf.Close()
	}
}

// Source is what the xDS server watches proxies through: on a server the
// catalog config source (any proxy of the datacenter), on a client agent
// the local one (the proxies registered to it).
func (p *proxyConfig) Source() proxyWatcher { return p.source }

// Manager is the agent's proxycfg.Manager (for its Stats).
func (p *proxyConfig) Manager() *proxycfg.Manager { return p.manager }
