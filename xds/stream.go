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
	"google.golang.org/protobuf/proto"
)

// stream is one open ADS stream. Its loop goroutine (the gRPC handler) owns
// the session; mu lets Status read it meanwhile.
type stream struct {
	id          uint64
	protocol    string
	connectedAt time.Time
	log         *slog.Logger

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
// the stream fails. recv and send wrap the protocol's gRPC stream. Sending
// and receiving each run in a goroutine of their own so the loop never
// blocks on a slow client: a blocked Send is released when the handler
// returns, and Stop waits for both goroutines.
func (s *Server) serve(gctx context.Context, protocol string, recv func() (request, error), send func(proto.Message) error) error {
	st, err := s.open(protocol)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	defer s.close(st)

	ctx, cancel := context.WithCancel(gctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()

	reqs := make(chan request)
	recvErr := make(chan error, 1)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for {
			r, err := recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	outbox := make(chan proto.Message)
	defer close(outbox)
	sendErr := make(chan error, 1)
	go func() {
		defer s.wg.Done()
		for m := range outbox {
			if err := send(m); err != nil {
				sendErr <- err
				return
			}
		}
	}()

	err = s.loop(ctx, st, reqs, recvErr, sendErr, outbox)
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

// loop is the stream's event loop: requests, resource sets and queued
// responses, one at a time.
func (s *Server) loop(ctx context.Context, st *stream, reqs <-chan request, recvErr, sendErr <-chan error, outbox chan<- proto.Message) error {
	var (
		resCh       <-chan Resources
		watchCancel context.CancelFunc
		queue       []proto.Message
	)
	defer func() {
		if watchCancel != nil {
			watchCancel()
			// Wait for the Source to close the watch: its goroutines are
			// done once it has.
			for range resCh {
			}
		}
	}()
	for {
		var out chan<- proto.Message
		var head proto.Message
		if len(queue) > 0 {
			out, head = outbox, queue[0]
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case err := <-sendErr:
			return err
		case out <- head:
			queue[0] = nil
			queue = queue[1:]
		case r := <-reqs:
			if resCh == nil {
				ref, err := proxyRef(ctx, r.node, s.nodeName)
				if err != nil {
					return status.Error(codes.InvalidArgument, err.Error())
				}
				wctx, wcancel := context.WithCancel(ctx)
				ch, err := s.source.Watch(wctx, ref)
				if err != nil {
					wcancel()
					if _, ok := status.FromError(err); ok {
						return err
					}
					return status.Error(codes.Unavailable, err.Error())
				}
				resCh, watchCancel = ch, wcancel
				st.log = st.log.With("proxy", ref.ServiceID, "node", ref.Node)
				st.mu.Lock()
				st.proxy, st.identified = ref, true
				st.sess.log = st.log
				st.mu.Unlock()
				st.log.Debug("xds: stream identified")
			}
			st.mu.Lock()
			st.sess.handle(r)
			queue = append(queue, st.sess.plan()...)
			st.mu.Unlock()
		case res, ok := <-resCh:
			if !ok {
				return status.Error(codes.Unavailable, ErrSourceClosed.Error())
			}
			// Only this goroutine writes sess.res, so reading it unlocked
			// is safe; encoding happens outside the lock Status takes.
			p := prepare(res, st.sess.res, st.log)
			st.mu.Lock()
			st.sess.setResources(p)
			queue = append(queue, st.sess.plan()...)
			st.mu.Unlock()
		}
	}
}
