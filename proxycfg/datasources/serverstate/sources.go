// Package serverstate implements proxycfg's data sources on a server, by
// reading the server's own state store: every question reads with a
// memdb.WatchSet (plus the store's AbandonCh, so that a snapshot restore
// makes it re-read the new store), delivers the result when it changed,
// waits until a watched channel fires, and reads again; failed reads are
// retried with backoff. Proxies asking the same question (the same kind,
// request and ACL token) share its reads and results. A question holds no
// goroutine while it waits: one goroutine per distinct watch channel
// waits for every question watching it (watchhub.go), so that the
// questions only one proxy asks (its own intentions and service config)
// cost no stack each.
//
// The reads are those of state/query, which the server's
// RPC endpoints use too, and with Config.ACL each read passes the ACL rule
// of the RPC method that answers the same question (a check of the
// proxy's token before, a filter of the result after): a proxy served by a
// server sees exactly what a proxy on a client agent gets through RPC. A
// read its token may not make is delivered as an error (logged once per
// question) and retried with backoff; one whose result is filtered simply
// lacks what the token may not read.
//
// Typical wiring (agent/proxycfg.go):
//
//	ss, _ := serverstate.New(serverstate.Config{Store: srv.StateStore, Datacenter: "dc1"})
//	defer ss.Close() // after the manager's Close
//	ds := ss.DataSources(leafSource)
package serverstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/internal/fanout"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Sentinel errors of the package.
var (
	// ErrInvalidConfig is returned by New for a Config missing a required
	// field.
	ErrInvalidConfig = errors.New("serverstate: invalid config")
	// ErrInvalidRequest is returned by Notify for a request that cannot be
	// answered as asked (a missing name, an unknown config entry kind, a
	// malformed filter).
	ErrInvalidRequest = errors.New("serverstate: invalid request")
	// ErrRemoteDatacenter is delivered (as an event error) for a question
	// about another datacenter: the local store only knows its own.
	ErrRemoteDatacenter = errors.New("serverstate: no path to datacenter")
	// ErrClosed is returned by Notify after Close.
	ErrClosed = fanout.ErrClosed
)

// Stats are the counters of the sources: running queries, their
// subscribers, and the queries started so far.
type Stats = fanout.Stats

// Config holds what the sources need. Store and Datacenter are required.
type Config struct {
	Logger *slog.Logger
	// Store returns the server's current state store. It is called for
	// every read, because a snapshot restore replaces the store.
	Store func() *state.Store
	// Datacenter is the server's datacenter: the only one the store
	// answers for.
	Datacenter string
	// DefaultIntentionPolicy ("allow" or "deny"; empty means allow)
	// decides which services IntentionUpstreams lists when no intention
	// matches.
	DefaultIntentionPolicy string
	// RetryMin and RetryMax bound the backoff after a failed read (zero:
	// fanout's defaults).
	RetryMin, RetryMax time.Duration
	// ACL applies the servers' ACL rules to every read (the server); nil
	// reads without any, as a cluster without ACLs does.
	ACL ACL
}

// ACL applies the servers' ACL rules to a read of the store (implemented
// by *server.Server), so that a proxy's token gets here what the RPC
// method of the same read would give it.
type ACL interface {
	// EnforceRead checks args' token against method's rule (an error is
	// the denial) and filters reply, method's reply type, in place. It
	// adds the token to ws, so that a changed or deleted token re-runs
	// the read. It does nothing while ACLs are off.
	EnforceRead(ws memdb.WatchSet, method string, args, reply any) error
}

// Sources are the server-local data sources. Close stops every goroutine.
type Sources struct {
	cfg          Config
	group        *fanout.Group
	hub          *hub
	stopHub      context.CancelFunc
	defaultAllow bool
}

// New returns the sources; nothing runs until a Notify.
func New(cfg Config) (*Sources, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: Store is required", ErrInvalidConfig)
	}
	if cfg.Datacenter == "" {
		return nil, fmt.Errorf("%w: Datacenter is required", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Sources{
		cfg:          cfg,
		group:        fanout.NewGroup(fanout.Config{Name: "serverstate", Logger: cfg.Logger}),
		hub:          newHub(ctx),
		stopHub:      cancel,
		defaultAllow: !strings.EqualFold(cfg.DefaultIntentionPolicy, "deny"),
	}, nil
}

// DataSources returns every data source the manager needs. The leaf
// source is given, because certificates are signed by the leader, not
// read from the store (proxycfg/datasources/leaf over the agent's leaf
// manager).
func (s *Sources) DataSources(leaf proxycfg.Leaf) proxycfg.DataSources {
	return proxycfg.DataSources{
		CARoots:                caRoots{s},
		Leaf:                   leaf,
		Intentions:             intentionsSource{s},
		IntentionUpstreams:     intentionUpstreams{s},
		ConfigEntry:            configEntry{s},
		ConfigEntryList:        configEntryList{s},
		ResolvedServiceConfig:  serviceConfig{s},
		CompiledDiscoveryChain: discoveryChain{s},
		Health:                 health{s},
		ServiceList:            serviceList{s},
		GatewayServices:        gatewayServices{s},
		ServicesByKind:         servicesByKind{s},
		Datacenters:            datacenters{s},
	}
}

// Stats returns the counters of the sources.
func (s *Sources) Stats() Stats { return s.group.Stats() }

// Close stops every query and waits for every goroutine of the sources.
// Close the manager first: its watches end with it. Calling it again is
// harmless.
func (s *Sources) Close() {
	s.group.Close()
	s.stopHub()
	s.hub.close()
}

// readFn is one read of the store: it adds its watches to ws and returns
// a fresh, non-nil result.
type readFn func(ws memdb.WatchSet, st *state.Store) (any, error)

// watch subscribes ch to the question (kind, req), starting its read
// loop when it is new. dc is the request's datacenter ("" = local); what
// names the question in logs.
func (s *Sources) watch(ctx context.Context, kind string, req any, dc, what, corr string, ch chan<- proxycfg.UpdateEvent, read readFn) error {
	key := fanout.Key(kind, req)
	return s.group.Subscribe(ctx, key, kind+":"+what, corr, ch, func() fanout.Runner {
		if dc != "" && dc != s.cfg.Datacenter {
			err := fmt.Errorf("%w %q", ErrRemoteDatacenter, dc)
			// The answer never changes: no goroutine waits for it.
			return func(_ context.Context, out fanout.Sink) { out.Error(err) }
		}
		return s.runner(read)
	})
}

// guard is read followed by the ACL rule of method for args (method's
// request type) when the sources enforce ACLs.
func (s *Sources) guard(method structs.MethodInfo, args any, read readFn) readFn {
	if s.cfg.ACL == nil {
		return read
	}
	name := method.Name()
	return func(ws memdb.WatchSet, st *state.Store) (any, error) {
		v, err := read(ws, st)
		if err != nil {
			return nil, err
		}
		if err := s.cfg.ACL.EnforceRead(ws, name, args, v); err != nil {
			return nil, err
		}
		return v, nil
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}
