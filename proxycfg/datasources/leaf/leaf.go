// Package leaf implements proxycfg's Leaf data source over the agent's
// leaf certificate manager (agent/leafcert), on client agents and servers
// alike: the manager already caches one certificate per service, renews it
// before expiry and re-issues it on root rotation, and its blocking Get
// wakes on every new certificate. Each distinct request (service and
// token) runs one blocking Get loop shared by every proxy asking for that
// service's leaf with that token; the leaf is signed with the request's
// token, so a proxy gets a certificate only if its own token may write the
// service.
package leaf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/internal/fanout"
	"github.com/trellis-mesh/trellis/structs"
)

// Sentinel errors of the package.
var (
	// ErrInvalidConfig is returned by New without a Getter.
	ErrInvalidConfig = errors.New("leaf: invalid config")
	// ErrInvalidRequest is returned by Notify for a request without a
	// service.
	ErrInvalidRequest = errors.New("leaf: invalid request")
)

// DefaultWait is how long one blocking Get waits for a new certificate
// before it is asked again.
const DefaultWait = 10 * time.Minute

// DefaultErrorPause is the pause after a failed Get (see Source.loop).
const DefaultErrorPause = 20 * time.Millisecond

// Getter is the leaf manager's blocking read (*leafcert.Manager) of the
// service's leaf signed with token: with minIndex > 0 it returns once the
// certificate has a
// ModifyIndex above minIndex, once a new attempt to get the service's
// first certificate failed, or when wait elapses. It returns a copy the
// caller owns.
type Getter interface {
	Get(ctx context.Context, service, token string, minIndex uint64, wait time.Duration) (*structs.IssuedCert, error)
}

// Config holds what the source needs. Getter is required.
type Config struct {
	Getter Getter
	Logger *slog.Logger
	// Wait is the blocking time of one Get (DefaultWait when zero).
	Wait time.Duration
	// ErrorPause is the pause after a failed Get (DefaultErrorPause when
	// zero).
	ErrorPause time.Duration
}

// Source is the Leaf data source. Close stops every goroutine.
type Source struct {
	cfg   Config
	group *fanout.Group
}

var _ proxycfg.Leaf = (*Source)(nil)

// New returns the source; nothing runs until a Notify.
func New(cfg Config) (*Source, error) {
	if cfg.Getter == nil {
		return nil, fmt.Errorf("%w: Getter is required", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.ErrorPause <= 0 {
		cfg.ErrorPause = DefaultErrorPause
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

// loop follows one service's certificate with blocking Gets. A failure
// (a refused first signing, say) is published and followed at once by a
// blocking Get, which returns when the manager's next attempt has an
// outcome: the proxy gets its certificate as soon as the manager has it,
// not at the end of a backoff. errorPause only keeps a Getter that fails
// without blocking (one being stopped) from spinning; a certificate that
// arrives during it is returned by the next Get at once.
func (s *Source) loop(service, token string) fanout.Runner {
	return func(ctx context.Context, out fanout.Sink) {
		var index uint64
		for ctx.Err() == nil {
			cert, err := s.cfg.Getter.Get(ctx, service, token, index, s.cfg.Wait)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				out.Error(err)
				// Any index above zero makes the next Get block.
				index = max(index, 1)
				fanout.Sleep(ctx, s.cfg.ErrorPause)
				continue
			}
			out.Result(cert)
			// A zero index would make the next Get return at once: wait
			// for any certificate above it instead.
			index = max(cert.ModifyIndex, 1)
		}
	}
}

// Stats are the counters of the source: running loops (one per
// service), their subscribers, and the loops started so far.
type Stats = fanout.Stats

// Stats returns the counters of the source.
func (s *Source) Stats() Stats { return s.group.Stats() }

// Close stops every loop and waits for it. Close the manager first.
func (s *Source) Close() { s.group.Close() }
