package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
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
	c, err := DialADS(ctx, ln.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

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
		if err := c.Send(s.req); err != nil {
			t.Fatalf("step %d: send: %v", i, err)
		}
		sent += 5 + proto.Size(s.req)
		if s.fail != codes.OK {
			_, err := c.Recv()
			if st, ok := status.FromError(err); !ok || st.Code() != s.fail || st.Message() != h2TestFailMessage {
				t.Fatalf("step %d: recv error %v, want status %v %q", i, err, s.fail, h2TestFailMessage)
			}
			continue
		}
		for range s.responses {
			r, err := c.Recv()
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
	c, err := DialADS(ctx, ln.Addr().String(), "")
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
			err := c.Send(req)
			if k == want {
				if !errors.Is(err, ErrSendWindow) {
					t.Fatalf("%s: send %d: got %v, want %v", what, k+1, err, ErrSendWindow)
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
		r, err := c.Recv()
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
		r, err := c.Recv()
		if err != nil {
			t.Fatalf("shared frames: recv %d: %v", k, err)
		}
		if want := h2TestResponse("shared", k, 3+k*1000); !proto.Equal(r, want) {
			t.Fatalf("shared frames: response %d has nonce %q, want %q", k, r.GetNonce(), want.GetNonce())
		}
	}

	c.Close()
	if got := <-received; got != sent {
		t.Errorf("server received %d gRPC bytes, client sent %d in the sends that succeeded", got, sent)
	}
	wg.Wait()
}

// h2TestFrame prefixes msg as one uncompressed gRPC message.
func h2TestFrame(msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
}
