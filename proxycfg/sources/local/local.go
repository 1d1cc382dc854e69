// Package local is the agent's local config source (step 2 of the flow
// in ARCHITECTURE.md): it keeps the proxycfg.Manager's registrations equal
// to the connect-proxy and gateway services in the agent's local state.
// It registers each with SourceLocal and overwrite (the local definition
// wins over a catalog one), re-registers it when its definition or token
// changes, and deregisters it when it leaves local state. On each change
// of local services it syncs the changed ones only, and all of them at
// start and, as a safety net, every ResyncInterval.
//
// Local proxies are registered under ProxyID{Node: this node, ServiceID,
// Token: ""}: every xDS stream for a local proxy shares one state machine
// whatever token it presents (the xDS server checks that token before it
// watches), and data is fetched with the token the service was registered
// with (the default token when it has none), as Consul does.
//
// Typical wiring:
//
//	src, _ := local.New(local.Config{NodeName: "n1", State: st, Manager: m})
//	src.Start()
//	defer src.Stop()
//	ch, _ := src.Watch(ctx, proxycfg.ProxyID{ServiceID: "web-sidecar-proxy"}) // closed when ctx ends
package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// DefaultResyncInterval is how often the source syncs without a change
// notification.
const DefaultResyncInterval = time.Minute

// Sentinel errors of the package.
var (
	// ErrInvalidConfig is returned by New for a Config missing a required
	// field.
	ErrInvalidConfig = errors.New("local config source: invalid config")
	// ErrMissingServiceID is returned by Watch without a proxy service ID.
	ErrMissingServiceID = errors.New("local config source: proxy service ID is required")
)

// State is the part of the agent's local state (*local.State of
// agent/local) the source reads.
type State interface {
	// Services returns copies of every local service, by ID: the first
	// sync and the safety net read them all.
	Services() map[string]*structs.NodeService
	// Service returns a copy of one service, nil when there is none.
	Service(id string) *structs.NodeService
	// ServiceToken is the ACL token a service was registered with.
	ServiceToken(id string) string
	// NotifyServiceChanges and StopNotifyServiceChanges (un)register a
	// channel signalled, without blocking, after every change of a
	// service; TakeServiceChanges returns (and forgets) the IDs changed
	// since the channel's last take.
	NotifyServiceChanges(ch chan<- struct{})
	TakeServiceChanges(ch chan<- struct{}) []string
	StopNotifyServiceChanges(ch chan<- struct{})
}

// Tokens is the part of the agent's token store (*token.Store of
// agent/token) the source reads.
type Tokens interface {
	// UserToken is the default token ("" when unset).
	UserToken() string
	// Changed returns a channel closed at the next change of a token.
	Changed() <-chan struct{}
}

// Manager is the part of *proxycfg.Manager the source uses.
type Manager interface {
	Register(id proxycfg.ProxyID, svc *structs.NodeService, source proxycfg.ProxySource, token string, overwrite bool) error
	Deregister(id proxycfg.ProxyID, source proxycfg.ProxySource)
	Watch(id proxycfg.ProxyID) (<-chan *proxycfg.ConfigSnapshot, proxycfg.CancelFunc)
}

// Config holds what the source needs. NodeName, State and Manager are
// required.
type Config struct {
	Logger *slog.Logger
	// NodeName is this agent's node: the Node of every local ProxyID.
	NodeName string
	State    State
	Manager  Manager
	// Tokens gives the token of a proxy registered without one (the
	// agent's default token, as Consul's proxies fall back to); nil means
	// none. A change of it re-syncs every proxy.
	Tokens Tokens
	// ResyncInterval is the period of the safety-net sync
	// (DefaultResyncInterval when zero).
	ResyncInterval time.Duration
}

// Source syncs local proxies into the manager. Start it, and Stop it
// before closing the manager.
type Source struct {
	cfg    Config
	logger *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	// Owned by the sync goroutine (and Stop, after it ended):
	// registered are the services this source registered; failed the
	// last registration error of each, so that a persistent error is
	// logged once rather than on every sync.
	registered map[string]bool
	failed     map[string]string
}

// New checks the configuration; nothing runs until Start.
func New(cfg Config) (*Source, error) {
	switch {
	case cfg.NodeName == "":
		return nil, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	case cfg.State == nil:
		return nil, fmt.Errorf("%w: State is required", ErrInvalidConfig)
	case cfg.Manager == nil:
		return nil, fmt.Errorf("%w: Manager is required", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Source{
		cfg: cfg, logger: cfg.Logger, ctx: ctx, cancel: cancel,
		registered: make(map[string]bool),
		failed:     make(map[string]string),
	}, nil
}

// Start begins syncing: at once, then on every change and every
// ResyncInterval. Calling it again does nothing.
func (s *Source) Start() {
	s.once.Do(func() {
		// Registered before the first sync, so that no change between
		// the two is missed.
		notify := make(chan struct{}, 1)
		s.cfg.State.NotifyServiceChanges(notify)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.cfg.State.StopNotifyServiceChanges(notify)
			s.run(notify)
		}()
	})
}

// Stop ends syncing and deregisters every proxy the source registered.
// Calling it again (or without Start) is harmless.
func (s *Source) Stop() {
	s.once.Do(func() {}) // a later Start must not start anything
	s.cancel()
	s.wg.Wait()
	for id := range s.registered {
		s.cfg.Manager.Deregister(s.ProxyID(id), proxycfg.SourceLocal)
		delete(s.registered, id)
	}
}

// ProxyID is the manager's ID of a local proxy.
func (s *Source) ProxyID(serviceID string) proxycfg.ProxyID {
	return proxycfg.ProxyID{Node: s.cfg.NodeName, ServiceID: serviceID}
}

// Watch returns the snapshots of a local proxy (the manager's watch of
// its local ProxyID) until ctx ends, when the channel is closed. id.Node
// defaults to this agent's node; id.Token is not part of a local proxy's
// ID (see the package doc). A proxy not registered (yet) is waited for:
// the channel delivers once it is.
func (s *Source) Watch(ctx context.Context, id proxycfg.ProxyID) (<-chan *proxycfg.ConfigSnapshot, error) {
	if id.ServiceID == "" {
		return nil, ErrMissingServiceID
	}
	if id.Node == "" {
		id.Node = s.cfg.NodeName
	}
	ch, cancel := s.cfg.Manager.Watch(proxycfg.ProxyID{Node: id.Node, ServiceID: id.ServiceID})
	context.AfterFunc(ctx, cancel)
	return ch, nil
}

// run syncs everything at first and every ResyncInterval, and in between
// only the services that changed: a registration among thousands of
// local services costs one service's work, and check updates none.
func (s *Source) run(notify chan struct{}) {
	t := time.NewTicker(s.cfg.ResyncInterval)
	defer t.Stop()
	// Taken before the first sync, as notify, so that no change between
	// the two is missed.
	tokens := s.tokensChanged()
	// Changes up to the full sync are in it.
	s.cfg.State.TakeServiceChanges(notify)
	s.sync()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-notify:
			for _, id := range s.cfg.State.TakeServiceChanges(notify) {
				s.syncOne(id, s.cfg.State.Service(id))
			}
		case <-tokens:
			// The default token may have changed: the proxies registered
			// without a token re-register with it (the others are
			// unchanged, which costs the manager nothing).
			tokens = s.tokensChanged()
			s.cfg.State.TakeServiceChanges(notify)
			s.sync()
		case <-t.C:
			s.cfg.State.TakeServiceChanges(notify)
			s.sync()
		}
	}
}

// tokensChanged is Config.Tokens' change channel (nil, which never fires,
// without Tokens).
func (s *Source) tokensChanged() <-chan struct{} {
	if s.cfg.Tokens == nil {
		return nil
	}
	return s.cfg.Tokens.Changed()
}

// IsProxy reports whether a service kind is one the manager serves.
func IsProxy(kind structs.ServiceKind) bool {
	switch kind {
	case structs.ServiceKindConnectProxy, structs.ServiceKindMeshGateway,
		structs.ServiceKindIngressGateway, structs.ServiceKindTerminatingGateway:
		return true
	}
	return false
}

// sync makes the manager's local registrations match local state.
func (s *Source) sync() {
	services := s.cfg.State.Services()
	for id, svc := range services {
		s.syncOne(id, svc)
	}
	for id := range s.registered {
		if services[id] == nil {
			s.syncOne(id, nil)
		}
	}
	for id := range s.failed {
		if services[id] == nil {
			delete(s.failed, id)
		}
	}
}

// syncOne makes the manager's registration of one local service match
// svc, its current definition (nil when it is gone).
func (s *Source) syncOne(id string, svc *structs.NodeService) {
	if svc == nil || !IsProxy(svc.Kind) {
		if s.registered[id] {
			s.cfg.Manager.Deregister(s.ProxyID(id), proxycfg.SourceLocal)
			delete(s.registered, id)
		}
		delete(s.failed, id)
		return
	}
	token := s.cfg.State.ServiceToken(id)
	if token == "" && s.cfg.Tokens != nil {
		token = s.cfg.Tokens.UserToken()
	}
	if err := s.cfg.Manager.Register(s.ProxyID(id), svc, proxycfg.SourceLocal, token, true); err != nil {
		if msg := err.Error(); s.failed[id] != msg {
			s.failed[id] = msg
			s.logger.Warn("cannot serve local proxy", "service", id, "error", err)
		}
		return
	}
	delete(s.failed, id)
	s.registered[id] = true
}
