package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ADSConn is one simulated Envoy's connection to an ADS server: a
// single HTTP/2 connection carrying a single delta ADS stream, spoken
// directly with an http2.Framer. It exists because grpc-go's client costs
// the tool a writer goroutine, a reader goroutine and buffer hand-offs
// per connection, CPU that competes with the target being measured when
// both share a machine; a real Envoy is a lean event loop. Everything
// here runs in the goroutine that calls Send and Recv: there is no other
// goroutine.
//
// What goes on the wire is what a gRPC client sends: the client preface,
// SETTINGS, one HEADERS opening the stream, then each request as a gRPC
// message (5-byte prefix, proto bytes) in DATA frames. The receive windows
// we advertise are large (as Envoy's are), so the server never waits for
// us; the server's windows are tracked, and a send that would exceed them
// fails (ErrSendWindow) rather than block, since nothing here reads while
// sending.
type ADSConn struct {
	conn net.Conn
	// stop unhooks the close-on-cancel of the dial's context.
	stop func() bool
	br   *bufio.Reader
	bw   *bufio.Writer
	fr   *http2.Framer

	// The server's limits on what we send: its connection and stream
	// flow-control windows, its SETTINGS_INITIAL_WINDOW_SIZE (to adjust the
	// stream window when it changes) and its SETTINGS_MAX_FRAME_SIZE.
	sendConn, sendStream int64
	peerInitialWindow    int64
	peerMaxFrame         int

	// recvUnacked counts DATA bytes received since we last widened our
	// receive windows again.
	recvUnacked int64

	// wbuf is the reused buffer a request is encoded into (prefix and proto).
	wbuf []byte
	// rbuf[roff:] holds received gRPC bytes not yet decoded: possibly
	// several messages, possibly part of one.
	rbuf []byte
	roff int
	// gotHeaders is set once the response headers arrived.
	gotHeaders bool
}

const (
	// h2ADSPath is the gRPC method of delta ADS.
	h2ADSPath = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
	// h2ADSStream is our only stream: the first a client opens.
	h2ADSStream = 1
	// h2RecvWindow is the receive window we give the server, per stream
	// and for the connection; once half of it was used we widen it again.
	h2RecvWindow = 1 << 30
	// h2InitialWindow is HTTP/2's default window (RFC 7540, 6.9.2).
	h2InitialWindow = 65535
	// h2MaxMessage bounds one received gRPC message.
	h2MaxMessage = 64 << 20
)

// Sentinel errors of the package.
var (
	// ErrSendWindow is returned by send when the server's flow-control
	// window has no room for the request.
	ErrSendWindow = errors.New("h2 ads: request exceeds the server's flow-control window")
	// ErrADSProtocol is returned when the server sends what a gRPC server
	// must not.
	ErrADSProtocol = errors.New("h2 ads: protocol error")
)

// DialADS connects to addr (host:port), performs
// the HTTP/2 handshake (preface, SETTINGS both ways, the server's first
// SETTINGS applied before anything is sent on the stream) and opens the
// delta ADS stream; a token that is not empty is sent as the
// x-consul-token header, as Envoy sends the one of its bootstrap.
// Cancelling ctx closes the connection, which makes a
// blocked send or recv return; close must still be called.
func DialADS(ctx context.Context, addr, token string) (*ADSConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &ADSConn{
		conn:              conn,
		stop:              context.AfterFunc(ctx, func() { _ = conn.Close() }),
		br:                bufio.NewReaderSize(conn, 16<<10),
		bw:                bufio.NewWriterSize(conn, 4<<10),
		sendConn:          h2InitialWindow,
		sendStream:        h2InitialWindow,
		peerInitialWindow: h2InitialWindow,
		peerMaxFrame:      16384,
	}
	c.fr = http2.NewFramer(c.bw, c.br)
	c.fr.SetReuseFrames()
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := c.handshake(addr, token); err != nil {
		c.Close()
		return nil, fmt.Errorf("h2 ads: handshake with %s: %w", addr, err)
	}
	return c, nil
}

func (c *ADSConn) handshake(authority, token string) error {
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		return err
	}
	if err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2RecvWindow},
	); err != nil {
		return err
	}
	if err := c.fr.WriteWindowUpdate(0, h2RecvWindow-h2InitialWindow); err != nil {
		return err
	}
	if err := c.bw.Flush(); err != nil {
		return err
	}
	// The server's preface is a SETTINGS frame; apply it before opening
	// the stream, so that its initial window counts from the start.
	f, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fmt.Errorf("%w: server preface is %v, not SETTINGS", ErrADSProtocol, f.Header())
	}
	if err := c.settings(sf); err != nil {
		return err
	}

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: h2ADSPath},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	}
	if token != "" {
		fields = append(fields, hpack.HeaderField{Name: "x-consul-token", Value: token, Sensitive: true})
	}
	for _, f := range fields {
		if err := enc.WriteField(f); err != nil {
			return err
		}
	}
	// A header block this small fits one frame: no CONTINUATION.
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h2ADSStream, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	return c.bw.Flush()
}

// close closes the connection.
func (c *ADSConn) Close() {
	c.stop()
	_ = c.conn.Close()
}

// send writes req as one gRPC message on the stream, in as many DATA
// frames as the server's SETTINGS_MAX_FRAME_SIZE needs, and flushes it.
// It fails with ErrSendWindow, writing nothing, if the server's windows
// have no room for it (they are only widened by frames recv reads).
func (c *ADSConn) Send(req *discoveryv3.DeltaDiscoveryRequest) error {
	b, err := proto.MarshalOptions{}.MarshalAppend(append(c.wbuf[:0], 0, 0, 0, 0, 0), req)
	if err != nil {
		return err
	}
	c.wbuf = b
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5)) //nolint:gosec // a gRPC message is far under 4 GiB (protobuf caps it at 2 GiB)
	n := int64(len(b))
	if n > c.sendConn || n > c.sendStream {
		return fmt.Errorf("%w: %d bytes, connection window %d, stream window %d", ErrSendWindow, n, c.sendConn, c.sendStream)
	}
	c.sendConn -= n
	c.sendStream -= n
	for len(b) > 0 {
		k := min(len(b), c.peerMaxFrame)
		if err := c.fr.WriteData(h2ADSStream, false, b[:k]); err != nil {
			return err
		}
		b = b[k:]
	}
	return c.bw.Flush()
}

// recv returns the next response on the stream, reading frames until one
// whole gRPC message is in and handling the control frames met on the way
// (SETTINGS, PING, WINDOW_UPDATE). The stream's end (trailers) is returned
// as the gRPC status error the server sent; GOAWAY and RST_STREAM as
// errors.
func (c *ADSConn) Recv() (*discoveryv3.DeltaDiscoveryResponse, error) {
	for {
		if msg, ok, err := c.nextMessage(); err != nil {
			return nil, err
		} else if ok {
			r := &discoveryv3.DeltaDiscoveryResponse{}
			if err := proto.Unmarshal(msg, r); err != nil {
				return nil, fmt.Errorf("h2 ads: decode response: %w", err)
			}
			return r, nil
		}
		if err := c.readFrame(); err != nil {
			return nil, err
		}
	}
}

// nextMessage takes the next whole gRPC message out of rbuf, if there is
// one. The bytes are valid until the next readFrame.
func (c *ADSConn) nextMessage() ([]byte, bool, error) {
	rest := c.rbuf[c.roff:]
	if len(rest) < 5 {
		return nil, false, nil
	}
	if rest[0] != 0 {
		return nil, false, fmt.Errorf("%w: compressed message (flag %d), none was negotiated", ErrADSProtocol, rest[0])
	}
	n := binary.BigEndian.Uint32(rest[1:5])
	if n > h2MaxMessage {
		return nil, false, fmt.Errorf("%w: message of %d bytes", ErrADSProtocol, n)
	}
	if len(rest) < 5+int(n) {
		return nil, false, nil
	}
	c.roff += 5 + int(n)
	return rest[5 : 5+n], true, nil
}

// readFrame reads and handles one frame.
func (c *ADSConn) readFrame() error {
	f, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.data(f)
	case *http2.MetaHeadersFrame:
		return c.headers(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := c.settings(f); err != nil {
			return err
		}
		if err := c.fr.WriteSettingsAck(); err != nil {
			return err
		}
		return c.bw.Flush()
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		if err := c.fr.WritePing(true, f.Data); err != nil {
			return err
		}
		return c.bw.Flush()
	case *http2.WindowUpdateFrame:
		// The increment is 1..2^31-1 (the Framer rejects 0 on a stream),
		// so int64 sums cannot overflow in any test's lifetime.
		switch f.StreamID {
		case 0:
			c.sendConn += int64(f.Increment)
		case h2ADSStream:
			c.sendStream += int64(f.Increment)
		}
		return nil
	case *http2.GoAwayFrame:
		return fmt.Errorf("h2 ads: GOAWAY from server: %v %q", f.ErrCode, f.DebugData())
	case *http2.RSTStreamFrame:
		if f.StreamID == h2ADSStream {
			return fmt.Errorf("h2 ads: stream reset by server: %v", f.ErrCode)
		}
		return nil
	default:
		// PRIORITY, unknown extension frames: nothing to do.
		return nil
	}
}

// settings applies the server's (non-ACK) SETTINGS.
func (c *ADSConn) settings(f *http2.SettingsFrame) error {
	return f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingInitialWindowSize:
			// RFC 7540, 6.9.2: a change applies to open streams by its
			// difference (which may make their windows negative).
			v := int64(s.Val)
			c.sendStream += v - c.peerInitialWindow
			c.peerInitialWindow = v
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = int(s.Val)
		}
		return nil
	})
}

// data appends a DATA frame's payload to rbuf and widens our receive
// windows again once half of them is used.
func (c *ADSConn) data(f *http2.DataFrame) error {
	if f.StreamID != h2ADSStream {
		return fmt.Errorf("%w: DATA on stream %d", ErrADSProtocol, f.StreamID)
	}
	if !c.gotHeaders {
		return fmt.Errorf("%w: DATA before response headers", ErrADSProtocol)
	}
	if c.roff > 0 {
		// Drop what was decoded (the caller is done with it: it only
		// called readFrame because no whole message was left).
		n := copy(c.rbuf, c.rbuf[c.roff:])
		c.rbuf, c.roff = c.rbuf[:n], 0
	}
	c.rbuf = append(c.rbuf, f.Data()...)
	// Flow control counts the whole frame, padding included.
	c.recvUnacked += int64(f.Length)
	if c.recvUnacked >= h2RecvWindow/2 {
		inc := uint32(c.recvUnacked) //nolint:gosec // at most one receive window, which is under 2^31
		c.recvUnacked = 0
		if err := c.fr.WriteWindowUpdate(0, inc); err != nil {
			return err
		}
		if err := c.fr.WriteWindowUpdate(h2ADSStream, inc); err != nil {
			return err
		}
		if err := c.bw.Flush(); err != nil {
			return err
		}
	}
	if f.StreamEnded() {
		return fmt.Errorf("%w: stream ended without trailers", ErrADSProtocol)
	}
	return nil
}

// headers handles the response headers and the trailers.
func (c *ADSConn) headers(f *http2.MetaHeadersFrame) error {
	if f.StreamID != h2ADSStream {
		return fmt.Errorf("%w: HEADERS on stream %d", ErrADSProtocol, f.StreamID)
	}
	if f.StreamEnded() {
		// Trailers, or a trailers-only response: the stream's gRPC status.
		return h2GRPCStatus(f)
	}
	if c.gotHeaders {
		return fmt.Errorf("%w: second HEADERS without END_STREAM", ErrADSProtocol)
	}
	if s := f.PseudoValue("status"); s != "200" {
		return fmt.Errorf("%w: response :status %q", ErrADSProtocol, s)
	}
	if ct := h2Field(f, "content-type"); !strings.HasPrefix(ct, "application/grpc") {
		return fmt.Errorf("%w: response content-type %q", ErrADSProtocol, ct)
	}
	c.gotHeaders = true
	return nil
}

// h2GRPCStatus turns trailers into the status error they carry.
func h2GRPCStatus(f *http2.MetaHeadersFrame) error {
	if s := f.PseudoValue("status"); s != "" && s != "200" {
		return fmt.Errorf("%w: response :status %q", ErrADSProtocol, s)
	}
	raw := h2Field(f, "grpc-status")
	code, err := strconv.ParseUint(raw, 10, 32)
	if err != nil {
		return fmt.Errorf("%w: trailers without a valid grpc-status (%q)", ErrADSProtocol, raw)
	}
	msg := h2Field(f, "grpc-message")
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	if code == 0 {
		return fmt.Errorf("h2 ads: stream ended by server (grpc-status 0, %q)", msg)
	}
	return status.Error(codes.Code(code), msg)
}

// h2Field is the value of the regular header field name in f ("" if none).
func h2Field(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}
