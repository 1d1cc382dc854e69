package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// h2ADSClient is one simulated Envoy's connection to an ADS server: a
// single HTTP/2 connection carrying a single delta ADS stream, spoken
// directly with an http2.Framer. It exists because grpc-go's client costs
// the benchmark's child process a writer goroutine, a reader goroutine and
// buffer hand-offs per connection, CPU that competes with the agent being
// measured; a real Envoy is a lean event loop. Everything here runs in the
// goroutine that calls send and recv: there is no other goroutine.
//
// What goes on the wire is what a gRPC client sends: the client preface,
// SETTINGS, one HEADERS opening the stream, then each request as a gRPC
// message (5-byte prefix, proto bytes) in DATA frames. The receive windows
// we advertise are large (as Envoy's are), so the server never waits for
// us; the server's windows are tracked, and a send that would exceed them
// fails (errH2SendWindow) rather than block, since nothing here reads while
// sending.
type h2ADSClient struct {
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

var (
	// errH2SendWindow is returned by send when the server's flow-control
	// window has no room for the request.
	errH2SendWindow = errors.New("h2 ads: request exceeds the server's flow-control window")
	// errH2Protocol is returned when the server sends what a gRPC server
	// must not.
	errH2Protocol = errors.New("h2 ads: protocol error")
)

// dialH2ADS connects to addr (which must be a loopback ip:port), performs
// the HTTP/2 handshake (preface, SETTINGS both ways, the server's first
// SETTINGS applied before anything is sent on the stream) and opens the
// delta ADS stream. Cancelling ctx closes the connection, which makes a
// blocked send or recv return; close must still be called.
func dialH2ADS(ctx context.Context, addr string) (*h2ADSClient, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("h2 ads: %s is not a loopback address", addr)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &h2ADSClient{
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
	if err := c.handshake(addr); err != nil {
		c.close()
		return nil, fmt.Errorf("h2 ads: handshake with %s: %w", addr, err)
	}
	return c, nil
}

func (c *h2ADSClient) handshake(authority string) error {
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
		return fmt.Errorf("%w: server preface is %v, not SETTINGS", errH2Protocol, f.Header())
	}
	if err := c.settings(sf); err != nil {
		return err
	}

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: h2ADSPath},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	} {
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
func (c *h2ADSClient) close() {
	c.stop()
	_ = c.conn.Close()
}

// send writes req as one gRPC message on the stream, in as many DATA
// frames as the server's SETTINGS_MAX_FRAME_SIZE needs, and flushes it.
// It fails with errH2SendWindow, writing nothing, if the server's windows
// have no room for it (they are only widened by frames recv reads).
func (c *h2ADSClient) send(req *discoveryv3.DeltaDiscoveryRequest) error {
	b, err := proto.MarshalOptions{}.MarshalAppend(append(c.wbuf[:0], 0, 0, 0, 0, 0), req)
	if err != nil {
		return err
	}
	c.wbuf = b
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
	n := int64(len(b))
	if n > c.sendConn || n > c.sendStream {
		return fmt.Errorf("%w: %d bytes, connection window %d, stream window %d", errH2SendWindow, n, c.sendConn, c.sendStream)
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
func (c *h2ADSClient) recv() (*discoveryv3.DeltaDiscoveryResponse, error) {
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
func (c *h2ADSClient) nextMessage() ([]byte, bool, error) {
	rest := c.rbuf[c.roff:]
	if len(rest) < 5 {
		return nil, false, nil
	}
	if rest[0] != 0 {
		return nil, false, fmt.Errorf("%w: compressed message (flag %d), none was negotiated", errH2Protocol, rest[0])
	}
	n := binary.BigEndian.Uint32(rest[1:5])
	if n > h2MaxMessage {
		return nil, false, fmt.Errorf("%w: message of %d bytes", errH2Protocol, n)
	}
	if len(rest) < 5+int(n) {
		return nil, false, nil
	}
	c.roff += 5 + int(n)
	return rest[5 : 5+n], true, nil
}

// readFrame reads and handles one frame.
func (c *h2ADSClient) readFrame() error {
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
func (c *h2ADSClient) settings(f *http2.SettingsFrame) error {
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
func (c *h2ADSClient) data(f *http2.DataFrame) error {
	if f.StreamID != h2ADSStream {
		return fmt.Errorf("%w: DATA on stream %d", errH2Protocol, f.StreamID)
	}
	if !c.gotHeaders {
		return fmt.Errorf("%w: DATA before response headers", errH2Protocol)
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
		inc := uint32(c.recvUnacked)
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
		return fmt.Errorf("%w: stream ended without trailers", errH2Protocol)
	}
	return nil
}

// headers handles the response headers and the trailers.
func (c *h2ADSClient) headers(f *http2.MetaHeadersFrame) error {
	if f.StreamID != h2ADSStream {
		return fmt.Errorf("%w: HEADERS on stream %d", errH2Protocol, f.StreamID)
	}
	if f.StreamEnded() {
		// Trailers, or a trailers-only response: the stream's gRPC status.
		return h2GRPCStatus(f)
	}
	if c.gotHeaders {
		return fmt.Errorf("%w: second HEADERS without END_STREAM", errH2Protocol)
	}
	if s := f.PseudoValue("status"); s != "200" {
		return fmt.Errorf("%w: response :status %q", errH2Protocol, s)
	}
	if ct := h2Field(f, "content-type"); !strings.HasPrefix(ct, "application/grpc") {
		return fmt.Errorf("%w: response content-type %q", errH2Protocol, ct)
	}
	c.gotHeaders = true
	return nil
}

// h2GRPCStatus turns trailers into the status error they carry.
func h2GRPCStatus(f *http2.MetaHeadersFrame) error {
	if s := f.PseudoValue("status"); s != "" && s != "200" {
		return fmt.Errorf("%w: response :status %q", errH2Protocol, s)
	}
	raw := h2Field(f, "grpc-status")
	code, err := strconv.ParseUint(raw, 10, 32)
	if err != nil {
		return fmt.Errorf("%w: trailers without a valid grpc-status (%q)", errH2Protocol, raw)
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

// h2EchoADS is the delta ADS server of TestH2ADSClient: it records every
// request and answers each with responses whose Nonce is the request's
// TypeUrl plus a counter, carrying one resource of a few bytes; requests
// of the type URLs below ask for something else.
type h2EchoADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	mu  sync.Mutex
	got []*discoveryv3.DeltaDiscoveryRequest
}

const (
	h2TestBig         = "test/big"   // one response with a 100 KiB resource
	h2TestBurst       = "test/burst" // five responses back to back
	h2TestFail        = "test/fail"  // the handler fails with h2TestFailMessage
	h2TestFailMessage = "told to fail: 100% ü"
	h2TestBigSize     = 100 << 10
	h2TestBurstSize   = 5
)

func (s *h2EchoADS) DeltaAggregatedResources(st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	count := 0
	for {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.got = append(s.got, req)
		s.mu.Unlock()
		responses, size := 1, 3
		switch req.GetTypeUrl() {
		case h2TestFail:
			return status.Error(codes.FailedPrecondition, h2TestFailMessage)
		case h2TestBig:
			size = h2TestBigSize
		case h2TestBurst:
			responses = h2TestBurstSize
		}
		for range responses {
			count++
			if err := st.Send(h2TestResponse(req.GetTypeUrl(), count, size)); err != nil {
				return err
			}
		}
	}
}

// h2TestResponse is response number count to a request of typeURL, with
// one resource of size bytes (all equal to byte(count)).
func h2TestResponse(typeURL string, count, size int) *discoveryv3.DeltaDiscoveryResponse {
	return &discoveryv3.DeltaDiscoveryResponse{
		TypeUrl: typeURL,
		Nonce:   typeURL + strconv.Itoa(count),
		Resources: []*discoveryv3.Resource{{
			Name:     "r" + strconv.Itoa(count),
			Version:  "1",
			Resource: &anypb.Any{TypeUrl: "test/bytes", Value: bytes.Repeat([]byte{byte(count)}, size)},
		}},
	}
}

// TestH2ADSClient runs the simulated Envoys' HTTP/2 client against a real
// grpc-go server: handshake, requests the server decodes, small, large
// (several DATA frames) and back-to-back responses, more requests on one
// stream than the server's initial 64 KiB window (so its WINDOW_UPDATEs
// must be followed), and the status of a failing handler.
func TestH2ADSClient(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	ads := &h2EchoADS{}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, ads)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialH2ADS(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()

	// The requests, in order, with what each must bring back.
	type step struct {
		req       *discoveryv3.DeltaDiscoveryRequest
		responses int
		size      int        // resource bytes of each response
		fail      codes.Code // the status recv must return instead
	}
	steps := []step{
		{req: &discoveryv3.DeltaDiscoveryRequest{
			Node:    &corev3.Node{Id: "client-7-sidecar-proxy", Cluster: "client-7"},
			TypeUrl: resource.ClusterType,
		}, responses: 1, size: 3},
		{req: &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType}, responses: 1, size: 3},
	}
	// 10 requests of ~8 KiB and one of ~20 KiB (more than a DATA frame
	// holds by default): more than the 64 KiB a server's window starts
	// with.
	for k := range 11 {
		names := make([]string, 64)
		if k == 10 {
			names = make([]string, 160)
		}
		for j := range names {
			names[j] = fmt.Sprintf("%03d-%03d-%s", k, j, strings.Repeat("n", 120))
		}
		steps = append(steps, step{req: &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names, ResponseNonce: strconv.Itoa(k),
		}, responses: 1, size: 3})
	}
	steps = append(steps,
		step{req: &discoveryv3.DeltaDiscoveryRequest{TypeUrl: h2TestBig}, responses: 1, size: h2TestBigSize},
		step{req: &discoveryv3.DeltaDiscoveryRequest{TypeUrl: h2TestBurst}, responses: h2TestBurstSize, size: 3},
		step{req: &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: "ack"}, responses: 1, size: 3},
		step{req: &discoveryv3.DeltaDiscoveryRequest{TypeUrl: h2TestFail}, fail: codes.FailedPrecondition},
	)

	sent, count := 0, 0
	for i, s := range steps {
		if err := c.send(s.req); err != nil {
			t.Fatalf("step %d: send: %v", i, err)
		}
		sent += 5 + proto.Size(s.req)
		if s.fail != codes.OK {
			_, err := c.recv()
			if st, ok := status.FromError(err); !ok || st.Code() != s.fail || st.Message() != h2TestFailMessage {
				t.Fatalf("step %d: recv error %v, want status %v %q", i, err, s.fail, h2TestFailMessage)
			}
			continue
		}
		for range s.responses {
			r, err := c.recv()
			if err != nil {
				t.Fatalf("step %d: recv: %v", i, err)
			}
			count++
			if want := h2TestResponse(s.req.GetTypeUrl(), count, s.size); !proto.Equal(r, want) {
				t.Fatalf("step %d: got response nonce %q with %d resources, want nonce %q with %d bytes",
					i, r.GetNonce(), len(r.GetResources()), want.GetNonce(), s.size)
			}
		}
	}
	if sent <= 70<<10 {
		t.Fatalf("sent only %d bytes: the server's initial window was never exhausted", sent)
	}

	ads.mu.Lock()
	defer ads.mu.Unlock()
	if len(ads.got) != len(steps) {
		t.Fatalf("server decoded %d requests, want %d", len(ads.got), len(steps))
	}
	for i, s := range steps {
		if !proto.Equal(ads.got[i], s.req) {
			t.Errorf("request %d: server decoded %v, want %v", i, ads.got[i], s.req)
		}
	}
}

// TestH2ADSClientSendWindow checks the client's accounting of the
// server's flow-control windows exactly, against a hand-driven HTTP/2
// server: the initial stream window from the server's SETTINGS, a change
// of it (applied by its difference), stream and connection WINDOW_UPDATEs,
// and the connection's default 65535. A send that does not fit must fail
// and write nothing. It also checks that messages sharing a DATA frame and
// spanning two are reassembled.
func TestH2ADSClientSendWindow(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	// The server writes its preface with a 1000-byte initial stream window,
	// hands the connection to the test, and counts the gRPC bytes the
	// client sends, which the test compares with the sends that succeeded.
	const initialWindow = 1000
	accepted := make(chan net.Conn, 1)
	received := make(chan int64, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(received)
		conn, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		defer func() { _ = conn.Close() }()
		if err := http2.NewFramer(conn, nil).WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: initialWindow}); err != nil {
			close(accepted)
			return
		}
		accepted <- conn
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(conn, preface); err != nil {
			return
		}
		fr := http2.NewFramer(nil, conn)
		var n int64
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				received <- n
				return
			}
			if d, ok := f.(*http2.DataFrame); ok {
				n += int64(len(d.Data()))
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialH2ADS(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, ok := <-accepted
	if !ok {
		t.Fatal("server failed to start")
	}
	w := http2.NewFramer(conn, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	if err := w.WriteHeaders(http2.HeadersFrameParam{StreamID: h2ADSStream, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}

	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{strings.Repeat("x", 380)}}
	size := int64(5 + proto.Size(req))
	// The test's model of the windows, which the client must match.
	stream, connWin := int64(initialWindow), int64(h2InitialWindow)
	var sent int64
	// fill sends until the client refuses, checking it refuses exactly
	// when the model says the next request does not fit.
	fill := func(what string) {
		t.Helper()
		want := min(stream, connWin) / size
		for k := int64(0); ; k++ {
			err := c.send(req)
			if k == want {
				if !errors.Is(err, errH2SendWindow) {
					t.Fatalf("%s: send %d: got %v, want %v", what, k+1, err, errH2SendWindow)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: send %d of %d that fit: %v", what, k+1, want, err)
			}
			stream, connWin, sent = stream-size, connWin-size, sent+size
		}
	}
	// serve writes frames, then a response, and has the client read them.
	nonce := 0
	serve := func(what string, frames func() error) {
		t.Helper()
		if err := frames(); err != nil {
			t.Fatal(err)
		}
		nonce++
		msg, err := proto.Marshal(h2TestResponse(what, nonce, 3))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteData(h2ADSStream, false, h2TestFrame(msg)); err != nil {
			t.Fatal(err)
		}
		r, err := c.recv()
		if err != nil {
			t.Fatalf("%s: recv: %v", what, err)
		}
		if want := what + strconv.Itoa(nonce); r.GetNonce() != want {
			t.Fatalf("%s: got nonce %q, want %q", what, r.GetNonce(), want)
		}
	}

	fill("initial stream window from SETTINGS")
	serve("initial window raised by 500", func() error {
		stream += 500
		return w.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: initialWindow + 500})
	})
	fill("stream window after SETTINGS")
	serve("stream WINDOW_UPDATE", func() error {
		stream += 1 << 20
		return w.WriteWindowUpdate(h2ADSStream, 1<<20)
	})
	fill("default connection window")
	serve("connection WINDOW_UPDATE", func() error {
		connWin += 3*size + 1
		return w.WriteWindowUpdate(0, uint32(3*size+1))
	})
	fill("connection window after WINDOW_UPDATE")

	// Three messages: two and the start of the third in one DATA frame,
	// the rest of the third in the next.
	var all []byte
	for k := range 3 {
		msg, err := proto.Marshal(h2TestResponse("shared", k, 3+k*1000))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, h2TestFrame(msg)...)
	}
	cut := len(all) - 500
	if err := w.WriteData(h2ADSStream, false, all[:cut]); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteData(h2ADSStream, false, all[cut:]); err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		r, err := c.recv()
		if err != nil {
			t.Fatalf("shared frames: recv %d: %v", k, err)
		}
		if want := h2TestResponse("shared", k, 3+k*1000); !proto.Equal(r, want) {
			t.Fatalf("shared frames: response %d has nonce %q, want %q", k, r.GetNonce(), want.GetNonce())
		}
	}

	c.close()
	if got := <-received; got != sent {
		t.Errorf("server received %d gRPC bytes, client sent %d in the sends that succeeded", got, sent)
	}
	wg.Wait()
}

// h2TestFrame prefixes msg as one uncompressed gRPC message.
func h2TestFrame(msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
}
