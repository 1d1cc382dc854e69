package xds

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// stream is one open ADS stream. Its handler and receiver goroutines share
// the session under mu, which also lets Status read it.
type stream struct {
	id          uint64
	protocol    string
	connectedAt time.Time
	log         *slog.Logger

	// out is written under mu (see outbox).
	out *outbox

	mu         sync.Mutex
	identified bool
	proxy      ProxyRef
	sess       *session
	// subGen is the generation of the listener subscription last copied
	// into proxy.Listeners.
	subGen uint64
}

// handleLocked applies one request to the session, follows the listener
// subscription into the stream's Subscription, and queues what the
// session plans.
func (st *stream) handleLocked(r request) {
	st.sess.handle(r)
	if names, gen, ok := st.sess.listenerNames(st.subGen); ok {
		st.subGen = gen
		st.proxy.Listeners.set(names)
	}
	st.out.push(st.sess.plan())
}

// status copies the stream's status; false until the proxy is identified.
func (st *stream) status() (StreamStatus, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.identified {
		return StreamStatus{}, false
	}
	ss := StreamStatus{
		StreamID:    st.id,
		ProxyID:     st.proxy.ServiceID,
		Node:        st.proxy.Node,
		Protocol:    st.protocol,
		ConnectedAt: st.connectedAt,
		State:       StateServing,
		Types:       st.sess.typeStatuses(),
	}
	if st.sess.waiting() {
		ss.State = StateWaiting
	}
	return ss, true
}

// serve runs one stream until the client goes away, the server stops, or
// the stream fails. recv and send wrap the protocol's gRPC stream.
//
// The work is shared so that nothing blocks anything else: the handler
// (this goroutine) identifies the proxy, follows its watch and builds and
// plans its resources; a receiver reads requests and handles them (ACKs,
// subscriptions) itself; the outbox sends the planned responses on a
// goroutine of its own while it has any, so a slow client never blocks
// planning. The helpers are released when the handler returns (gRPC ends
// a blocked Recv or Send then), and Stop waits for them.
func (s *Server[U]) serve(gctx context.Context, protocol string, recv func() (request, error), send func(*response) error) error {
	st, err := s.open(protocol)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	defer s.close(st)

	ctx, cancel := context.WithCancel(gctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()

	// first carries the first request to the handler, which identifies the
	// proxy; the receiver handles the next ones once identified is closed.
	first := make(chan request, 1)
	identified := make(chan struct{})
	// One error each from the receiver and the outbox, which report at
	// most once.
	errc := make(chan error, 2)
	st.out = &outbox{ctx: ctx, send: send, spawn: s.spawn, failed: func(err error) { errc <- err }}
	s.spawn(func() { errc <- s.receive(ctx, st, recv, first, identified) })

	err = s.loop(ctx, st, first, identified, errc)
	if s.ctx.Err() != nil {
		err = status.Error(codes.Unavailable, ErrStopped.Error())
	}
	switch code := status.Code(err); {
	case err == nil, code == codes.Canceled:
		st.log.Debug("xds: stream closed", "error", err)
	default:
		st.log.Info("xds: stream ended", "error", err)
	}
	return err
}

// receive reads the stream's requests until it fails: the first goes to
// the handler, the others are handled here, once the proxy is identified.
// io.EOF (the client closed its side) is reported as nil.
func (s *Server[U]) receive(ctx context.Context, st *stream, recv func() (request, error), first chan<- request, identified <-chan struct{}) error {
	for n := 0; ; n++ {
		r, err := recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if n == 0 {
			first <- r
			select {
			case <-identified:
			case <-ctx.Done():
				return nil
			}
			continue
		}
		st.mu.Lock()
		st.handleLocked(r)
		st.mu.Unlock()
	}
}

// loop is the handler's part: identify the proxy from the first request,
// start its watch, then build, prepare and plan every value it delivers.
func (s *Server[U]) loop(ctx context.Context, st *stream, first <-chan request, identified chan<- struct{}, errc <-chan error) error {
	var (
		values      <-chan U
		build       Builder[U]
		watchCancel context.CancelFunc
	)
	defer func() {
		if watchCancel != nil {
			watchCancel()
			// Wait for the Source to close the watch: its goroutines are
			// done once it has.
			for range values {
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case err := <-errc:
			return err
		case r := <-first:
			ref, err := proxyRef(ctx, r.node, s.nodeName)
			if err != nil {
				return status.Error(codes.InvalidArgument, err.Error())
			}
			// The Source sees the first request's listeners from the start;
			// the session's view of them follows once it handles it.
			ref.Listeners = newSubscription()
			ref.Listeners.set(requestListenerNames(r))
			wctx, wcancel := context.WithCancel(ctx)
			ch, err := s.source.Watch(wctx, ref)
			if err != nil {
				wcancel()
				if _, ok := status.FromError(err); ok {
					return err
				}
				return status.Error(codes.Unavailable, err.Error())
			}
			values, watchCancel, build = ch, wcancel, s.source.Builder(ref)
			st.log = st.log.With("proxy", ref.ServiceID, "node", ref.Node)
			st.mu.Lock()
			st.proxy, st.identified = ref, true
			st.sess.log = st.log
			st.handleLocked(r)
			st.mu.Unlock()
			close(identified)
			st.log.Debug("xds: stream identified")
		case v, ok := <-values:
			if !ok {
				return status.Error(codes.Unavailable, ErrSourceClosed.Error())
			}
			res, err := build(v)
			if _, ok := status.FromError(err); ok && err != nil {
				// The Builder refused the proxy (its token lacks access).
				return err
			}
			if err != nil {
				// Keep serving what the proxy has; the next value may build
				// cleanly.
				st.log.Warn("xds: cannot build resources", "error", err)
				continue
			}
			// Only this goroutine writes sess.res, so reading it unlocked
			// is safe; encoding happens outside the lock.
			p := prepare(res, st.sess.res, &s.shared, st.log)
			st.mu.Lock()
			st.sess.setResources(p)
			st.out.push(st.sess.plan())
			st.mu.Unlock()
		}
	}
}

// spawn runs f on a goroutine that Stop waits for. It is called only by
// the goroutines of open streams, each counted in wg, so that the count
// is never zero here while Stop may be waiting.
func (s *Server[U]) spawn(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// outbox queues a stream's responses and sends them, in order, from a
// goroutine that runs only while the queue is not empty: most streams are
// idle most of the time, and at 5,000 streams a sender goroutine each
// would be tens of megabytes of stacks. Pushing never blocks (responses
// are bounded by the protocol: one unacknowledged per type), so it may
// happen under the stream's lock, which keeps responses in the order they
// were planned.
type outbox struct {
	ctx   context.Context
	send  func(*response) error
	spawn func(func())
	// failed is told the first send failure, after which nothing is sent.
	failed func(error)

	mu sync.Mutex
	// Guarded by mu: queue is what waits to be sent, spare the sender's
	// previous batch (reused), sending whether a sender runs, dead
	// whether a send failed.
	queue, spare  []response
	sending, dead bool
}

// push queues responses, starting a sender unless one runs.
func (o *outbox) push(rs []response) {
	if len(rs) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead {
		return
	}
	o.queue = append(o.queue, rs...)
	if !o.sending {
		o.sending = true
		o.spawn(o.drain)
	}
}

// drain is the sender: it sends batches until the queue is empty, the
// stream ends, or a send fails.
func (o *outbox) drain() {
	for {
		o.mu.Lock()
		if len(o.queue) == 0 || o.ctx.Err() != nil {
			o.sending = false
			o.mu.Unlock()
			return
		}
		batch := o.queue
		o.queue, o.spare = o.spare[:0], nil
		o.mu.Unlock()
		for i := range batch {
			if err := o.send(&batch[i]); err != nil {
				o.mu.Lock()
				o.dead, o.sending, o.queue = true, false, nil
				o.mu.Unlock()
				o.failed(err)
				return
			}
			batch[i] = response{}
		}
		o.mu.Lock()
		o.spare = batch[:0]
		o.mu.Unlock()
	}
}
