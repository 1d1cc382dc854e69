// Package xds serves Envoy's aggregated discovery service (ADS), delta and
// state-of-the-world, to the proxies of one agent.
//
// The server knows nothing of the catalog or of proxycfg: a Source hands it
// complete Resources sets per proxy, and the server owns the protocol —
// per-resource versions, diffs, make-before-break ordering, one
// unacknowledged response per type, NACK bookkeeping — and reports it per
// stream through Status.
package xds

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Config holds every dependency of an ADS server whose Source delivers
// values of U.
type Config[U any] struct {
	// Source delivers each proxy's configuration. Required.
	Source Source[U]
	// NodeName is this agent's node: the node of a proxy whose Envoy does
	// not send the node_name metadata. Required.
	NodeName string
	// Logger receives NACKs and stream errors. Nil discards.
	Logger *slog.Logger
}

// Server is the ADS server. It implements
// discoveryv3.AggregatedDiscoveryServiceServer; serve it on the agent's
// gRPC port (-grpc-port) through NewGRPCServer, or Register it on another
// gRPC server. Call Stop before the gRPC server's GracefulStop: ADS
// streams never end on their own.
type Server[U any] struct {
	source   Source[U]
	nodeName string
	log      *slog.Logger
	// encoded is set once the server's gRPC server uses its codec
	// (NewGRPCServer): streams then send responses as their encoding.
	encoded atomic.Bool

	// ctx ends every stream when the server stops.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts stream handlers and their receive and send goroutines.
	wg sync.WaitGroup

	// shared holds what streams share: endpoint sets (see prepare).
	shared shared

	mu      sync.Mutex
	stopped bool
	nextID  uint64
	streams map[uint64]*stream
}

var _ discoveryv3.AggregatedDiscoveryServiceServer = (*Server[Resources])(nil)

// New returns a server ready to Register.
func New[U any](cfg Config[U]) (*Server[U], error) {
	if cfg.Source == nil {
		return nil, wrapf(ErrInvalidConfig, "Source is required")
	}
	if cfg.NodeName == "" {
		return nil, wrapf(ErrInvalidConfig, "NodeName is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background()) //nolint:gosec // cancel is kept in the Server and called by Close
	return &Server[U]{
		source:   cfg.Source,
		nodeName: cfg.NodeName,
		log:      log,
		ctx:      ctx,
		cancel:   cancel,
		streams:  map[uint64]*stream{},
	}, nil
}

// Register adds the aggregated discovery service to a gRPC server, which
// may use any codec: responses are sent as messages. NewGRPCServer is the
// cheaper way.
func (s *Server[U]) Register(r grpc.ServiceRegistrar) {
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(r, s)
}

// NewGRPCServer returns a gRPC server (with opts) that serves this server's
// ADS with its own codec: a response is encoded straight from the
// resources' encodings into a buffer of grpc-go's pool, which the
// transport takes back once the response is on the wire, instead of
// becoming a message tree that gRPC encodes and the collector reclaims
// (at 1,000 streams, a thousand per endpoint change). Requests are decoded
// as grpc-go's proto codec would. Call it once per Server, and do not also
// Register the Server elsewhere: its streams then all send encodings.
func (s *Server[U]) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	gs := grpc.NewServer(append(slices.Clip(opts), grpc.ForceServerCodecV2(newCodec()))...)
	s.encoded.Store(true)
	s.Register(gs)
	return gs
}

// Stop ends every stream with codes.Unavailable (Envoy reconnects, to this
// agent once it is back or to another), refuses new ones, and waits until
// every goroutine of every stream has returned, including the Sources'
// watches. It is safe to call more than once.
func (s *Server[U]) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// StreamAggregatedResources serves a state-of-the-world ADS stream.
func (s *Server[U]) StreamAggregatedResources(gs discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	var r discoveryv3.DiscoveryRequest // see recvInto
	return s.serve(gs.Context(), ProtocolSotW, func() (request, error) {
		if err := recvInto(gs, &r); err != nil {
			return request{}, err
		}
		return sotwRequest(&r), nil
	}, func(r *response) error {
		if s.encoded.Load() {
			return sendEncoded(gs, r)
		}
		return gs.Send(r.message().(*discoveryv3.DiscoveryResponse))
	})
}

// DeltaAggregatedResources serves a delta (incremental) ADS stream.
func (s *Server[U]) DeltaAggregatedResources(gs discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	var r discoveryv3.DeltaDiscoveryRequest // see recvInto
	return s.serve(gs.Context(), ProtocolDelta, func() (request, error) {
		if err := recvInto(gs, &r); err != nil {
			return request{}, err
		}
		return deltaRequest(&r), nil
	}, func(r *response) error {
		if s.encoded.Load() {
			return sendEncoded(gs, r)
		}
		return gs.Send(r.message().(*discoveryv3.DeltaDiscoveryResponse))
	})
}

// recvInto receives the stream's next request into m, one message reused
// for every request of the stream (by its receiver goroutine alone): an
// ACK then costs no new message, at 1,000 streams a thousand per change.
// It is safe because sotwRequest and deltaRequest copy every field out,
// and resetting m replaces its fields without touching what they pointed
// to, which the requests handed on keep.
func recvInto(gs interface{ RecvMsg(any) error }, m proto.Message) error {
	proto.Reset(m)
	return gs.RecvMsg(m)
}

// Status returns the status of every open stream of a proxy (usually one),
// ordered by stream ID; empty when none is connected.
func (s *Server[U]) Status(proxyID string) []StreamStatus {
	s.mu.Lock()
	streams := make([]*stream, 0, 1)
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	var out []StreamStatus
	for _, st := range streams {
		if ss, ok := st.status(); ok && ss.ProxyID == proxyID {
			out = append(out, ss)
		}
	}
	slices.SortFunc(out, func(a, b StreamStatus) int { return cmp.Compare(a.StreamID, b.StreamID) })
	return out
}

// open registers a new stream, unless the server is stopping. The caller
// must call close.
func (s *Server[U]) open(protocol string) (*stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, ErrStopped
	}
	s.nextID++
	st := &stream{id: s.nextID, protocol: protocol, connectedAt: time.Now()}
	st.log = s.log.With("stream", st.id, "protocol", protocol)
	st.sess = newSession(protocol == ProtocolDelta, st.log, time.Now)
	s.streams[st.id] = st
	s.wg.Add(1)
	return st, nil
}

// close unregisters a stream.
func (s *Server[U]) close(st *stream) {
	s.mu.Lock()
	delete(s.streams, st.id)
	s.mu.Unlock()
	s.wg.Done()
}

// Streams reports how many ADS streams are open, for the agent's
// consul.xds.server.streams gauge.
func (s *Server[U]) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}
