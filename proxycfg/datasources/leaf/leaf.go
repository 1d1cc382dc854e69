// Package leaf implements proxycfg's Leaf data source over the agent's
// leaf certificate manager (agent/leafcert), on client agents and servers
// alike: the manager already caches one certificate per service, renews it
// before expiry and re-issues it on root rotation, and calls its watchers
// back on every new certificate. Each distinct request (service and
// token) is one watch of the manager shared by every proxy asking for
// that service's leaf with that token; the leaf is signed with the
// request's token, so a proxy gets a certificate only if its own token
// may write the service; it
// holds no goroutine while it waits, so 5,000 sidecars cost 5,000
// callbacks, not 5,000 blocked Gets.
package leaf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/internal/fanout"
	"github.com/trellis-mesh/trellis/structs"
)

// Sentinel errors of the package.
var (
	// ErrInvalidConfig is returned by New without a Watcher.
	ErrInvalidConfig = errors.New("leaf: invalid config")
	// ErrInvalidRequest is returned by Notify for a request without a
	// service.
	ErrInvalidRequest = errors.New("leaf: invalid request")
)

// Watcher is the leaf manager's watch (*leafcert.Manager): fn is called
// with each new certificate of service signed
// with token (the current one first, if any)
// and, while the service has none, with each failed attempt to get one,
// until ctx ends. Calls never overlap and never go back to an older
// certificate; the certificate is the caller's copy.
type Watcher interface {
	Watch(ctx context.Context, service, token string, fn func(*structs.IssuedCert, error)) error
}

// Config holds what the source needs. Watcher is required.
type Config struct {
	Watcher Watcher
	Logger  *slog.Logger
}

// Source is the Leaf data source. Close ends every watch.
type Source struct {
	cfg   Config
	group *fanout.Group
}

var _ proxycfg.Leaf = (*Source)(nil)

// New returns the source; nothing runs until a Notify.
func New(cfg Config) (*Source, error) {
	if cfg.Watcher == nil {
		return nil, fmt.Errorf("%w: Watcher is required", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Source{cfg: cfg, group: fanout.NewGroup(fanout.Config{Name: "leaf", Logger: cfg.Logger})}, nil
}

// Notify implements proxycfg.Leaf. Result: *structs.IssuedCert.
func (s *Source) Notify(ctx context.Context, req *proxycfg.LeafRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Service == "" {
		return fmt.Errorf("%w: no service", ErrInvalidRequest)
	}
	service, token := req.Service, req.Token
	return s.group.Subscribe(ctx, fanout.Key("leaf", req), "leaf:"+service, corr, ch, func() fanout.Runner {
		return s.loop(service, token)
	})
}

// loop starts one service's watch and returns: the manager calls the
// query's sink back from then on, until the query's ctx ends (fanout
// keeps the query while it has subscribers, whether or not its runner
// still runs). A failure (a refused first signing, say) is published as
// it happens, and the certificate as soon as the manager has it, not at
// the end of a backoff. A watch the manager refuses (it is stopping) is
// published as a failure.
func (s *Source) loop(service, token string) fanout.Runner {
	return func(ctx context.Context, out fanout.Sink) {
		err := s.cfg.Watcher.Watch(ctx, service, token, func(cert *structs.IssuedCert, err error) {
			if err != nil {
				out.Error(err)
				return
			}
			out.Result(cert)
		})
		if err != nil && ctx.Err() == nil {
			out.Error(err)
		}
	}
}

// Stats are the counters of the source: running watches (one per
// service), their subscribers, and the watches started so far.
type Stats = fanout.Stats

// Stats returns the counters of the source.
func (s *Source) Stats() Stats { return s.group.Stats() }

// Close ends every watch. Close the proxycfg manager first.
func (s *Source) Close() { s.group.Close() }
