package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The server port carries two protocols, told apart by the first byte a
// client sends: Raft connections announce themselves with raftConnByte;
// everything else is the internal gRPC API (an HTTP/2 preface starts 'P').
const (
	raftConnByte     byte = 0x01
	firstByteTimeout      = 5 * time.Second
)

var errMuxClosed = errors.New("server: port multiplexer closed")

// portMux accepts connections on the server port and hands each to the
// Raft transport or to the gRPC server.
type portMux struct {
	logger *slog.Logger
	ln     net.Listener
	raft   *chanListener
	grpc   *chanListener
	wg     sync.WaitGroup
}

func newPortMux(ln net.Listener, logger *slog.Logger) *portMux {
	m := &portMux{
		logger: logger,
		ln:     ln,
		raft:   newChanListener(ln.Addr()),
		grpc:   newChanListener(ln.Addr()),
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

func (m *portMux) acceptLoop() {
	defer m.wg.Done()
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			m.logger.Warn("server port accept failed", "error", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.route(conn)
		}()
	}
}

func (m *portMux) route(conn net.Conn) {
	_ = conn.SetReadDeadline(time.Now().Add(firstByteTimeout))
	br := bufio.NewReader(conn)
	first, err := br.Peek(1)
	if err != nil {
		_ = conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	target := m.grpc
	if first[0] == raftConnByte {
		_, _ = br.Discard(1)
		target = m.raft
	}
	if !target.deliver(&peekedConn{Conn: conn, r: br}) {
		_ = conn.Close()
	}
}

// Close stops accepting, closes both virtual listeners and waits for the
// routing goroutines.
func (m *portMux) Close() error {
	err := m.ln.Close()
	_ = m.raft.Close()
	_ = m.grpc.Close()
	m.wg.Wait()
	return err
}

// peekedConn replays the bytes the router buffered while peeking.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener is a net.Listener fed by the multiplexer.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, fmt.Errorf("%w: %w", errMuxClosed, net.ErrClosed)
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// raftLayer is the raft.StreamLayer over the multiplexed port.
type raftLayer struct {
	*chanListener
	advertise net.Addr
	dial      func(ctx context.Context, addr string) (net.Conn, error) // nil: plain TCP
}

func (r *raftLayer) Addr() net.Addr { return r.advertise }

func (r *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dial := r.dial
	if dial == nil {
		dial = func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
	}
	conn, err := dial(ctx, string(address))
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte{raftConnByte}); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}
