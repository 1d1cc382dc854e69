package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/trellis-mesh/trellis/structs"
)

// transportError is a call that failed before a server answered it (the
// connection could not be made or broke): safe to retry elsewhere for reads.
// For a write, sent says whether the request may have reached the server
// (and so may have been applied): only a write that was not sent, or whose
// handler is deduplicated, may go again.
type transportError struct {
	err  error
	sent bool
}

func (e *transportError) Error() string { return "rpc transport: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// dialFunc opens a connection to a server address.
type dialFunc func(ctx context.Context, addr string) (net.Conn, error)

// connPool keeps one gRPC connection per server address.
type connPool struct {
	codec *structs.Codec
	// dial, when set, opens the pool's connections instead of grpc-go.
	dial dialFunc

	mu sync.Mutex
	// conns is guarded by mu.
	conns map[string]*grpc.ClientConn
}

// ConnPoolConfig holds a client agent's pool dependencies.
type ConnPoolConfig struct {
	// TLS, when set, makes connections TLS whenever it returns a
	// configuration (internal_rpc.verify_outgoing).
	TLS OutgoingTLS
}

// NewConnPool is the client side of the internal RPC API, for client agents
// and for servers forwarding to the leader.
func NewConnPool(cfg ConnPoolConfig) *ConnPool {
	return &ConnPool{p: newConnPool(secureDial(nil, cfg.TLS))}
}

// ConnPool exposes the pool to client agents.
type ConnPool struct{ p *connPool }

// Call invokes method on the server at addr.
func (c *ConnPool) Call(ctx context.Context, addr, method string, args, reply any) error {
	return c.p.Call(ctx, addr, method, args, reply)
}

// Close closes every connection.
func (c *ConnPool) Close() { c.p.Close() }

func newConnPool(dial dialFunc) *connPool {
	return &connPool{codec: structs.NewRPCCodec(), dial: dial, conns: make(map[string]*grpc.ClientConn)}
}

func (p *connPool) conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// A snapshot archive sent without a stream is one message
		// (snapshot_endpoint.go).
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(rpcMaxMessage), grpc.MaxCallSendMsgSize(rpcMaxMessage)),
	}
	if p.dial != nil {
		opts = append(opts, grpc.WithContextDialer(p.dial))
	}
	c, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Call encodes args, invokes method on addr and decodes the reply. Errors
// the remote server returned come back as structs sentinels where they
// match one; failures to reach it are *transportError.
func (p *connPool) Call(ctx context.Context, addr, method string, args, reply any) error {
	if st := structs.StreamOf(ctx); st != nil {
		return p.streamCall(ctx, addr, method, args, reply, st) // rpc_stream.go
	}
	body, c, err := p.prepare(addr, method, args)
	if err != nil {
		return err
	}
	var out wrapperspb.BytesValue
	if err := c.Invoke(ctx, "/"+rpcService+"/"+method, wrapperspb.Bytes(body), &out); err != nil {
		return callError(method, err, false) // rpc_stream.go
	}
	return p.codec.Unmarshal(out.GetValue(), reply)
}

// prepare encodes a call's args and finds the connection to addr.
func (p *connPool) prepare(addr, method string, args any) ([]byte, *grpc.ClientConn, error) {
	body, err := p.codec.Marshal(args)
	if err != nil {
		return nil, nil, fmt.Errorf("encode %s: %w", method, err)
	}
	c, err := p.conn(addr)
	if err != nil {
		return nil, nil, &transportError{err: err}
	}
	return body, c, nil
}

// at is a structs.Caller that calls the server at addr.
func (p *connPool) at(addr string) serverAt { return serverAt{pool: p, addr: addr} }

// serverAt calls one server through the pool.
type serverAt struct {
	pool *connPool
	addr string
}

// RPC implements structs.Caller.
func (s serverAt) RPC(ctx context.Context, method string, args, reply any) error {
	return s.pool.Call(ctx, s.addr, method, args, reply)
}

// Close closes every connection.
func (p *connPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, c := range p.conns {
		_ = c.Close()
		delete(p.conns, addr)
	}
}

// neverSent reports whether a failed call's status proves the request
// never left: grpc-go fails a call with this text when no connection to
// the server could be made, before it writes anything. Any other failure
// may have come after the request was sent.
func neverSent(st *status.Status) bool {
	return st.Code() == codes.Unavailable && strings.Contains(st.Message(), "Error while dialing")
}
