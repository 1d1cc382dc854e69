package server

import (
	"bufio"
	"context"
	"crypto/tls"
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
	// tls, when set, serves TLS connections and may refuse plaintext ones.
	tls  RPCTLS
	ln   net.Listener
	raft *chanListener
	grpc *chanListener
	// insecure gets the TLS connections that presented no client
	// certificate to a port that verifies incoming connections (possible
	// only with auto_encrypt.allow_tls): they may only ask for one.
	insecure *chanListener
	wg       sync.WaitGroup
}

func newPortMux(ln net.Listener, t RPCTLS, logger *slog.Logger) *portMux {
	m := &portMux{
		logger:   logger,
		tls:      t,
		ln:       ln,
		raft:     newChanListener(ln.Addr()),
		grpc:     newChanListener(ln.Addr()),
		insecure: newChanListener(ln.Addr()),
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
	unverified := false
	if m.tls != nil {
		cfg, required := m.tls.IncomingRPCConfig()
		switch {
		case first[0] == tlsRecordHandshake && cfg != nil:
			if conn, br, first, err = m.handshake(conn, br, cfg); err != nil {
				m.logger.Warn("server port: TLS handshake failed", "remote", conn.RemoteAddr().String(), "error", err)
				_ = conn.Close()
				return
			}
			if tc, ok := conn.(*tls.Conn); ok && required && len(tc.ConnectionState().PeerCertificates) == 0 {
				unverified = true
			}
		case required:
			// internal_rpc.verify_incoming: nothing of a plaintext
			// connection is read past its first byte.
			m.logger.Warn("server port: refused a plaintext connection (verify_incoming is set)", "remote", conn.RemoteAddr().String())
			_ = conn.Close()
			return
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	target := m.grpc
	switch {
	case unverified && first[0] == raftConnByte:
		m.logger.Warn("server port: refused Raft over a connection without a client certificate", "remote", conn.RemoteAddr().String())
		_ = conn.Close()
		return
	case unverified:
		target = m.insecure
	case first[0] == raftConnByte:
		_, _ = br.Discard(1)
		target = m.raft
	}
	if !target.deliver(&peekedConn{Conn: conn, r: br}) {
		_ = conn.Close()
	}
}

// handshake runs the server side of TLS over a connection whose first byte
// was peeked, then peeks the first byte inside it.
func (m *portMux) handshake(conn net.Conn, br *bufio.Reader, cfg *tls.Config) (net.Conn, *bufio.Reader, []byte, error) {
	tc := tls.Server(&peekedConn{Conn: conn, r: br}, cfg)
	_ = tc.SetDeadline(time.Now().Add(firstByteTimeout))
	if err := tc.Handshake(); err != nil {
		return conn, nil, nil, err
	}
	inner := bufio.NewReader(tc)
	first, err := inner.Peek(1)
	if err != nil {
		return tc, nil, nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, inner, first, nil
}

// Close stops accepting, closes both virtual listeners and waits for the
// routing goroutines.
func (m *portMux) Close() error {
	err := m.ln.Close()
	_ = m.raft.Close()
	_ = m.grpc.Close()
	_ = m.insecure.Close()
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
	dial      dialFunc // secureDial's: TCP, TLS when configured
}

func (r *raftLayer) Addr() net.Addr { return r.advertise }

func (r *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := r.dial(ctx, string(address))
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte{raftConnByte}); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}
