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

// stream is one open ADS stream. Its receiver and worker goroutines share
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
// Three goroutines share the work: the handler (this one) identifies the
// proxy from the first request and then only waits for the stream to
// end; a receiver reads requests and handles them (ACKs, subscriptions)
// itself; a worker follows the proxy's watch, builds, prepares and plans
// every value, and sends every planned response, its own and the
// receiver's, in the order they were planned. The worker sends what it
// planned without handing it to another goroutine: during a fan-out to
// thousands of streams every hand-off waits behind thousands of runnable
// goroutines (at 1,000 proxies, the p99 of an endpoint change fell by a
// sixth when the worker stopped handing its responses to a sender
// goroutine). Recv and Send may block on the network, so only the
// helpers call them: gRPC ends a blocked Recv or Send once the handler
// returns, which it does as soon as the server stops, and Stop waits for
// the helpers.
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
	errc := make(chan error, 2)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		errc <- s.receive(ctx, st, recv, first, identified)
	}()

	err = s.handle(ctx, st, first, identified, errc, send)
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
		st.sess.handle(r)
		st.out.push(st.sess.plan())
		st.mu.Unlock()
	}
}

// handle is the handler's part: identify the proxy from the first request,
// start its watch and the worker, then wait for the stream to end.
func (s *Server[U]) handle(ctx context.Context, st *stream, first <-chan request, identified chan<- struct{}, errc chan error, send func(*response) error) error {
	var r request
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case err := <-errc:
		return err
	case r = <-first:
	}
	ref, err := proxyRef(ctx, r.node, s.nodeName)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	wctx, wcancel := context.WithCancel(ctx)
	values, err := s.source.Watch(wctx, ref)
	if err != nil {
		wcancel()
		if _, ok := status.FromError(err); ok {
			return err
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	st.log = st.log.With("proxy", ref.ServiceID, "node", ref.Node)
	st.mu.Lock()
	st.proxy, st.identified = ref, true
	st.sess.log = st.log
	st.sess.handle(r)
	st.out.push(st.sess.plan())
	st.mu.Unlock()
	close(identified)
	st.log.Debug("xds: stream identified")

	build := s.source.Builder(ref)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			wcancel()
			// Wait for the Source to close the watch: its goroutines are
			// done once it has.
			for range values {
			}
		}()
		if err := s.work(ctx, st, values, build, send); err != nil {
			errc <- err
		}
	}()
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case err := <-errc:
		return err
	}
}

// work is the worker's part: build, prepare and plan every value of the
// watch, and send what the stream planned, until ctx ends or a send fails.
func (s *Server[U]) work(ctx context.Context, st *stream, values <-chan U, build Builder[U], send func(*response) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-st.out.ready:
		case v, ok := <-values:
			if !ok {
				return status.Error(codes.Unavailable, ErrSourceClosed.Error())
			}
			res, err := build(v)
			if err != nil {
				// Keep serving what the proxy has; the next value may build
				// cleanly.
				st.log.Warn("xds: cannot build resources", "error", err)
				continue
			}
			// Only this goroutine writes sess.res, so reading it unlocked
			// is safe; encoding happens outside the lock.
			p := prepare(res, st.sess.res, &s.endpoints, st.log)
			st.mu.Lock()
			st.sess.setResources(p)
			st.out.push(st.sess.plan())
			st.mu.Unlock()
		}
		if err := st.out.send(send); err != nil {
			return err
		}
	}
}

// outbox queues a stream's responses, in the order they were planned, for
// the worker to send. Pushing never blocks (responses are bounded by the
// protocol: one unacknowledged per type), so it happens under the
// stream's lock, which keeps the queue in plan order.
type outbox struct {
	mu sync.Mutex
	// queue and spare are guarded by mu; spare is the storage of the
	// batch sent last, reused.
	queue, spare []response
	// ready holds a token while the queue may be non-empty.
	ready chan struct{}
}

func newOutbox() *outbox { return &outbox{ready: make(chan struct{}, 1)} }

// push queues responses for the worker.
func (o *outbox) push(rs []response) {
	if len(rs) == 0 {
		return
	}
	o.mu.Lock()
	o.queue = append(o.queue, rs...)
	o.mu.Unlock()
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// send sends the queued responses, in order, stopping at the first
// failure. Only the worker calls it, so responses go out one at a time.
func (o *outbox) send(send func(*response) error) error {
	o.mu.Lock()
	batch := o.queue
	o.queue, o.spare = o.spare[:0], nil
	o.mu.Unlock()
	for i := range batch {
		if err := send(&batch[i]); err != nil {
			return err
		}
		batch[i] = response{}
	}
	o.mu.Lock()
	o.spare = batch[:0]
	o.mu.Unlock()
	return nil
}
