// Package remote implements proxycfg's data sources on a client agent:
// blocking queries (MinQueryIndex/MaxQueryTime) to the servers through the
// agent's RPC client, deduplicated across the agent. Every Notify names a
// question (the RPC method and the request, ACL token included); all
// Notify calls asking the same question share one blocking-query loop and
// its results, which are fanned out, shared and read-only, to every
// subscriber. The loop starts with the first subscriber and stops when
// the last one's ctx ends: 500 sidecars watching one upstream are one
// query to the servers, not 500.
//
// Leaf certificates do not come from here: the agent's leaf manager owns
// them (proxycfg/datasources/leaf); DataSources takes that source.
//
// Typical wiring (agent/proxycfg.go):
//
//	rs, _ := remote.New(remote.Config{RPC: agent, Datacenter: "dc1"})
//	defer rs.Close() // after the manager's Close
//	ds := rs.DataSources(leafSource)
package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/trellis-mesh/trellis/internal/wait"
	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/internal/fanout"
	"github.com/trellis-mesh/trellis/structs"
)

// Sentinel errors of the package.
var (
	// ErrInvalidConfig is returned by New for a Config missing a required
	// field.
	ErrInvalidConfig = errors.New("remote: invalid config")
	// ErrInvalidRequest is returned by Notify for a request that cannot be
	// answered as asked (a missing name, an unknown config entry kind, a
	// malformed filter).
	ErrInvalidRequest = errors.New("remote: invalid request")
	// ErrClosed is returned by Notify after Close.
	ErrClosed = fanout.ErrClosed
)

// Defaults.
const (
	// DefaultMaxQueryTime is the blocking time of each query: the
	// servers' maximum, so that an idle question costs one RPC per ten
	// minutes.
	DefaultMaxQueryTime = 10 * time.Minute
	// rpcGrace is added to MaxQueryTime for the call's own deadline: the
	// server adds up to 1/16 of jitter, and an answer takes time to
	// arrive.
	rpcGrace = time.Minute
)

// Stats are the counters of the sources: running queries (one blocking
// loop each), their subscribers, and the queries started so far.
type Stats = fanout.Stats

// Config holds what the sources need. RPC and Datacenter are required.
type Config struct {
	// RPC reaches the servers (the agent: its router on a client agent).
	RPC    structs.Caller
	Logger *slog.Logger
	// Datacenter is the agent's datacenter (the Datacenters source lists
	// it alone: Trellis has no WAN federation yet).
	Datacenter string
	// MaxQueryTime is the blocking time of each query
	// (DefaultMaxQueryTime when zero).
	MaxQueryTime time.Duration
	// RetryMin and RetryMax bound the backoff after a failed query.
	RetryMin, RetryMax time.Duration
}

// Sources are the client agent's data sources. Close stops every
// goroutine.
type Sources struct {
	cfg   Config
	group *fanout.Group
}

// New returns the sources; nothing runs until a Notify.
func New(cfg Config) (*Sources, error) {
	if cfg.RPC == nil {
		return nil, fmt.Errorf("%w: RPC is required", ErrInvalidConfig)
	}
	if cfg.Datacenter == "" {
		return nil, fmt.Errorf("%w: Datacenter is required", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxQueryTime <= 0 {
		cfg.MaxQueryTime = DefaultMaxQueryTime
	}
	return &Sources{cfg: cfg, group: fanout.NewGroup(fanout.Config{Name: "remote", Logger: cfg.Logger})}, nil
}

// DataSources returns every data source the manager needs, with the given
// leaf source (proxycfg/datasources/leaf over the agent's leaf manager).
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

// Close stops every query and waits for its goroutine. Close the manager
// first: its watches end with it.
func (s *Sources) Close() { s.group.Close() }

// queryReq is a pointer to a request type embedding structs.QueryOptions;
// metaResp a pointer to a reply type embedding structs.QueryMeta.
type queryReq[T any] interface {
	*T
	QueryOpts() *structs.QueryOptions
}

type metaResp[T any] interface {
	*T
	Meta() *structs.QueryMeta
}

// subscribe joins ch to the question (method, req), starting its
// blocking loop when it is new. convert turns a reply into the documented
// result (nil: the reply itself). what names the question in logs.
func subscribe[Req, Resp any, PReq queryReq[Req], PResp metaResp[Resp]](
	s *Sources, ctx context.Context, method structs.Method[Req, Resp], req PReq, what, corr string,
	ch chan<- proxycfg.UpdateEvent, convert func(PResp) (any, error),
) error {
	return s.group.Subscribe(ctx, fanout.Key(method.Name(), req), method.Name()+":"+what, corr, ch, func() fanout.Runner {
		return blockingLoop[Req, Resp](s, method, req, convert)
	})
}

// blockingLoop is the runner of one question: a blocking query, its
// result published, then the next query from the result's index.
func blockingLoop[Req, Resp any, PReq queryReq[Req], PResp metaResp[Resp]](
	s *Sources, method structs.Method[Req, Resp], req PReq, convert func(PResp) (any, error),
) fanout.Runner {
	return func(ctx context.Context, out fanout.Sink) {
		bo := fanout.Backoff{Min: s.cfg.RetryMin, Max: s.cfg.RetryMax}
		var index uint64
		for ctx.Err() == nil {
			args := PReq(new(Req))
			*args = *req // a shallow copy: the caller's request stays untouched
			q := args.QueryOpts()
			q.MinQueryIndex, q.MaxQueryTime = index, s.cfg.MaxQueryTime
			// Any server may answer: reads spread over the servers, and
			// the index tells how fresh the answer is.
			q.AllowStale = true
			// Filters are applied here, not by the servers, so that
			// every subset of a service shares one query's data.
			q.Filter = ""
			reply := PResp(new(Resp))
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, s.cfg.MaxQueryTime+rpcGrace)
			err := method.Call(cctx, s.cfg.RPC, args, reply)
			cancel()
			if ctx.Err() != nil {
				return
			}
			var v any = reply
			if err == nil && convert != nil {
				v, err = convert(reply)
			}
			if err != nil {
				out.Error(err)
				wait.Sleep(ctx, bo.Next())
				continue
			}
			out.Result(v)
			next := reply.Meta().Index
			if next == index && time.Since(start) < s.cfg.MaxQueryTime/2 {
				// The server answered early without news (it is
				// shutting down, or does not block on this read):
				// back off rather than spin.
				wait.Sleep(ctx, bo.Next())
				continue
			}
			bo.Reset()
			// An index that went backwards (a restored snapshot, a
			// server behind the others) is taken as is: the next query
			// blocks from it, and the server answers at once if it is
			// behind.
			index = next
		}
	}
}
