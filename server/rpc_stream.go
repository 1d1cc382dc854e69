package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/trellis-mesh/trellis/structs"
)

// Streaming calls (structs.Stream) over the internal RPC: the same gRPC
// method as the unary call, marked by streamHeader in the call's metadata.
// The caller sends the args, then its Upload in chunks, then closes its
// side; the server answers the reply, then the handler's Download in
// chunks, then the call's status, which may be an error after bytes were
// sent (the stream is then to be discarded). A server that forwards a
// streamed call to the leader pipes both ways through its own pool.

// streamHeader, in a call's gRPC metadata, says that it streams.
const streamHeader = "trellis-stream"

// streamChunkSize is the largest chunk message: small enough to leave
// grpc-go's default 4 MiB message limit far away, large enough that the
// per-message cost does not show against the copying.
const streamChunkSize = 256 << 10

var streamDesc = grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// streamed marks registered methods as accepting a Stream over gRPC; a
// streamed call of another method is refused.
func streamed(table map[string]endpoint, methods ...structs.MethodInfo) {
	for _, m := range methods {
		ep := table[m.Name()]
		ep.streams = true
		table[m.Name()] = ep
	}
}

// isStreamed reports whether an incoming gRPC call carries a Stream.
func isStreamed(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(streamHeader)) > 0
}

// serveStream serves a streamed gRPC call: the call's stream becomes the
// handler's Stream, and the reply goes out before the first Download
// chunk (or at the end, if the handler writes none).
func (s *Server) serveStream(stream grpc.ServerStream, method string, ep endpoint, args, reply any) error {
	if !ep.streams {
		return status.Errorf(codes.InvalidArgument, "%s does not stream", method)
	}
	down := &chunkSender{send: func(b []byte) error { return stream.SendMsg(wrapperspb.Bytes(b)) }}
	down.before = func() error {
		out, err := s.rpcCodec.Marshal(reply)
		if err != nil {
			return status.Errorf(codes.Internal, "encode %s reply: %v", method, err)
		}
		return stream.SendMsg(wrapperspb.Bytes(out))
	}
	buf := bufio.NewWriterSize(down, streamChunkSize)
	up := &chunkReader{recv: func() ([]byte, error) {
		var m wrapperspb.BytesValue
		if err := stream.RecvMsg(&m); err != nil {
			return nil, err
		}
		return m.GetValue(), nil
	}}
	ctx := structs.WithStream(stream.Context(), &structs.Stream{Upload: up, Download: buf})
	if err := s.RPC(ctx, method, args, reply); err != nil {
		return statusOf(err) // rpc_errors.go
	}
	if err := buf.Flush(); err != nil {
		return err
	}
	return down.start()
}

// chunkSender writes messages of at most streamChunkSize, after calling
// before once (the reply).
type chunkSender struct {
	send    func([]byte) error
	before  func() error
	started bool
}

func (c *chunkSender) start() error {
	if c.started {
		return nil
	}
	c.started = true
	if c.before != nil {
		return c.before()
	}
	return nil
}

func (c *chunkSender) Write(p []byte) (int, error) {
	if err := c.start(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), streamChunkSize)]
		if err := c.send(chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// chunkReader reads a sequence of chunk messages as one byte stream; recv
// returns io.EOF after the last.
type chunkReader struct {
	recv func() ([]byte, error)
	cur  []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		b, err := c.recv()
		if err != nil {
			return 0, err
		}
		c.cur = b
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// streamCall makes a streamed call of method on addr: args and st.Upload
// out, the reply and then st.Download's bytes in.
func (p *connPool) streamCall(ctx context.Context, addr, method string, args, reply any, st *structs.Stream) error {
	body, c, err := p.prepare(addr, method, args) // pool.go
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, streamHeader, "1"))
	defer cancel()
	cs, err := c.NewStream(ctx, &streamDesc, "/"+rpcService+"/"+method)
	if err != nil {
		return callError(method, err, false)
	}
	if err := cs.SendMsg(wrapperspb.Bytes(body)); err != nil && !errors.Is(err, io.EOF) {
		// io.EOF: the server ended the call; RecvMsg tells why.
		return callError(method, err, false)
	}
	// uploaded and downloaded say whether the stream moved bytes, after
	// which the call must not be made again.
	var uploaded, downloaded atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if st.Upload != nil {
			up := &chunkSender{send: func(b []byte) error {
				uploaded.Store(true)
				return cs.SendMsg(wrapperspb.Bytes(b))
			}}
			if _, err := io.CopyBuffer(up, st.Upload, make([]byte, streamChunkSize)); err != nil {
				// The server's answer (an error status) or the
				// cancellation below ends the call.
				cancel()
				return
			}
		}
		_ = cs.CloseSend()
	}()
	err = p.receiveStream(cs, method, reply, st, &downloaded)
	if err != nil {
		cancel()
	}
	wg.Wait()
	return settleStreamError(err, uploaded.Load(), downloaded.Load())
}

// receiveStream reads the reply and then the download of a streamed call.
func (p *connPool) receiveStream(cs grpc.ClientStream, method string, reply any, st *structs.Stream, downloaded *atomic.Bool) error {
	var m wrapperspb.BytesValue
	if err := cs.RecvMsg(&m); err != nil {
		return callError(method, err, true)
	}
	if err := p.codec.Unmarshal(m.GetValue(), reply); err != nil {
		return fmt.Errorf("decode %s reply: %w", method, err)
	}
	for {
		var chunk wrapperspb.BytesValue
		err := cs.RecvMsg(&chunk)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return callError(method, err, true)
		}
		if st.Download == nil {
			return fmt.Errorf("rpc %s: the server streamed a reply nobody reads", method)
		}
		downloaded.Store(true)
		if _, err := st.Download.Write(chunk.GetValue()); err != nil {
			return fmt.Errorf("rpc %s: writing the streamed reply: %w", method, err)
		}
	}
}

// callError turns a failed gRPC call into the error Call gives: the
// server's sentinel, a transport error (sent tells whether the request
// may have left), or the status text.
func callError(method string, err error, sent bool) error {
	st, ok := status.FromError(err)
	if !ok {
		return &transportError{err: err, sent: true}
	}
	if serverErr := errorOf(st); serverErr != nil { // rpc_errors.go
		return serverErr
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return &transportError{err: err, sent: sent || !neverSent(st)}
	default:
		return fmt.Errorf("rpc %s: %s", method, st.Message())
	}
}

// settleStreamError keeps a call whose stream moved bytes from being made
// again: an upload cannot be read twice, nor a download's bytes taken
// back. A write whose upload left may have been applied; a read that
// delivered bytes has failed for good.
func settleStreamError(err error, uploaded, downloaded bool) error {
	if err == nil || !(uploaded || downloaded) {
		return err
	}
	if !Retryable(err) && !NotApplied(err) {
		return err
	}
	if uploaded && OutcomeUnknown(err) {
		return fmt.Errorf("%w: the stream broke after the upload began: %v", structs.ErrOutcomeUnknown, err) //nolint:errorlint // the cause must not make the call look retryable
	}
	return fmt.Errorf("rpc: the stream broke after it moved bytes: %v", err) //nolint:errorlint // the cause must not make the call look retryable
}
