package xds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config[Resources]
		ok   bool
	}{
		{"complete", Config[Resources]{Source: newFakeSource(), NodeName: "n1"}, true},
		{"no source", Config[Resources]{NodeName: "n1"}, false},
		{"no node name", Config[Resources]{Source: newFakeSource()}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(tc.cfg)
			if tc.ok != (err == nil) {
				t.Fatalf("New() error = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v is not ErrInvalidConfig", err)
			}
			if srv != nil {
				srv.Stop()
			}
		})
	}
}

func TestProxyIdentity(t *testing.T) {
	tests := []struct {
		name     string
		nodeName string
		token    string
		want     ProxyRef
	}{
		{"defaults to this agent's node", "", "", ProxyRef{ServiceID: proxyID, Node: "agent-node"}},
		{"node_name metadata and token", "node-7", "secret-token", ProxyRef{ServiceID: proxyID, Node: "node-7", Token: "secret-token"}},
	}
	for _, tc := range tests {
		for _, protocol := range []string{ProtocolDelta, ProtocolSotW} {
			t.Run(tc.name+"/"+protocol, func(t *testing.T) {
				src := newFakeSource()
				srv, conn := startServer(t, src, testLogger(t))
				if protocol == ProtocolDelta {
					c := newDeltaClient(t, conn, tc.token)
					c.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(proxyID, tc.nodeName), TypeUrl: cdsURL})
				} else {
					c := newSotWClient(t, conn, tc.token)
					c.send(&discoveryv3.DiscoveryRequest{Node: node(proxyID, tc.nodeName), TypeUrl: cdsURL})
				}
				waitFor(t, "watch", func() bool { return len(src.Refs()) == 1 })
				got := src.Refs()[0]
				if got.Listeners == nil {
					t.Error("no listener Subscription")
				}
				if got.Listeners = nil; got != tc.want {
					t.Errorf("ProxyRef = %+v, want %+v", got, tc.want)
				}
				if st := srv.Status(proxyID); len(st) != 1 || st[0].Node != tc.want.Node || st[0].Protocol != protocol {
					t.Errorf("status = %+v", st)
				}
			})
		}
	}
}

// TestGarbageDoesNotAffectOtherStreams runs a well-behaved proxy next to
// streams sending garbage, and checks that only the garbage streams notice.
func TestGarbageDoesNotAffectOtherStreams(t *testing.T) {
	src := newFakeSource()
	src.Set(proxyID, baseSet())
	src.Set("junk-proxy", baseSet())
	_, conn := startServer(t, src, testLogger(t))
	good := newDeltaClient(t, conn, "")
	deltaInit(t, good, proxyID)

	// A first request without a node ends that stream only.
	noNode := newDeltaClient(t, conn, "")
	noNode.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL})
	if code := status.Code(noNode.ended()); code != codes.InvalidArgument {
		t.Errorf("stream without node ended with %v, want InvalidArgument", code)
	}
	noNodeSotW := newSotWClient(t, conn, "")
	noNodeSotW.send(&discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, Node: node("", "")})
	if code := status.Code(noNodeSotW.ended()); code != codes.InvalidArgument {
		t.Errorf("SotW stream without node ended with %v, want InvalidArgument", code)
	}

	// Bad nonces, empty and unknown type URLs, unsubscribing what was never
	// subscribed: the stream survives and keeps working.
	junk := newDeltaClient(t, conn, "")
	junk.send(&discoveryv3.DeltaDiscoveryRequest{Node: node("junk-proxy", ""), TypeUrl: ""})
	junk.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "no-such-nonce"})
	r := expectDelta(t, junk, cdsURL, "a", "b")
	junk.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "forged"})
	junk.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResourceNamesUnsubscribe: []string{"x", "*"}})
	junk.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: "\x00garbage"})
	deltaAck(junk, r)
	expectDelta(t, junk, edsURL) // a named-only type subscribed to nothing: empty
	expectDelta(t, junk, "\x00garbage")

	sotwJunk := newSotWClient(t, conn, "")
	sotwJunk.send(&discoveryv3.DiscoveryRequest{Node: node("junk-proxy", ""), TypeUrl: ldsURL, ResponseNonce: "bogus"})
	sotwJunk.send(&discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResponseNonce: "bogus-again"})
	expectSotW(t, sotwJunk, ldsURL, "public_listener")

	// A client that vanishes mid-stream.
	gone := newDeltaClient(t, conn, "")
	gone.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL})
	gone.close()

	src.Set(proxyID, withSet(cla("a", 1)))
	deltaAck(good, expectDelta(t, good, edsURL, "a"))
	good.none()
	src.Set("junk-proxy", withSet(cluster("b", 3)))
	expectDelta(t, junk, cdsURL, "b")
}

func TestStreamEnds(t *testing.T) {
	tests := []struct {
		name     string
		watchErr error
		act      func(src *fakeSource, srv *Server[Resources])
		want     codes.Code
	}{
		{"source closes the watch", nil, func(src *fakeSource, _ *Server[Resources]) { src.CloseAll() }, codes.Unavailable},
		{"server stops", nil, func(_ *fakeSource, srv *Server[Resources]) { srv.Stop() }, codes.Unavailable},
		{"watch refused with a status", status.Error(codes.PermissionDenied, "ACL not found"), nil, codes.PermissionDenied},
		{"watch fails", errors.New("boom"), nil, codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newFakeSource()
			src.err = tc.watchErr
			src.Set(proxyID, baseSet())
			srv, conn := startServer(t, src, testLogger(t))
			c := newDeltaClient(t, conn, "")
			c.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL})
			if tc.act != nil {
				expectDelta(t, c, cdsURL, "a", "b")
				tc.act(src, srv)
			}
			if code := status.Code(c.ended()); code != tc.want {
				t.Errorf("stream ended with %v, want %v", code, tc.want)
			}
			waitFor(t, "stream gone from status", func() bool { return len(srv.Status(proxyID)) == 0 })
		})
	}
}

func TestStopRefusesNewStreams(t *testing.T) {
	src := newFakeSource()
	srv, conn := startServer(t, src, slog.New(slog.DiscardHandler))
	srv.Stop()
	c := newSotWClient(t, conn, "")
	c.send(&discoveryv3.DiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL})
	if code := status.Code(c.ended()); code != codes.Unavailable {
		t.Errorf("stream after Stop ended with %v, want Unavailable", code)
	}
}

func TestStatusListsEveryStreamOfAProxy(t *testing.T) {
	src := newFakeSource()
	src.Set(proxyID, baseSet())
	srv, conn := startServer(t, src, testLogger(t))
	d := newDeltaClient(t, conn, "")
	d.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL})
	deltaAck(d, expectDelta(t, d, cdsURL, "a", "b"))
	s := newSotWClient(t, conn, "")
	s.send(&discoveryv3.DiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL})
	sotwAck(s, expectSotW(t, s, cdsURL, "a", "b"))
	waitFor(t, "both ACKs", func() bool {
		sts := srv.Status(proxyID)
		return len(sts) == 2 && sts[0].Types[0].LastAckedVersion != "" && sts[1].Types[0].LastAckedVersion != ""
	})
	sts := srv.Status(proxyID)
	if sts[0].Protocol != ProtocolDelta || sts[1].Protocol != ProtocolSotW || sts[0].StreamID >= sts[1].StreamID {
		t.Errorf("status = %+v", sts)
	}
	if got := srv.Status("someone-else"); len(got) != 0 {
		t.Errorf("status of an unknown proxy = %+v", got)
	}
	d.close()
	waitFor(t, "closed stream gone", func() bool { return len(srv.Status(proxyID)) == 1 })
}

// TestStopDoesNotWaitForAStalledClient: a client that stops reading leaves
// the stream's sender blocked in Send once gRPC's flow control is
// exhausted; Stop must still end the stream (only a helper goroutine calls
// Send, and gRPC releases it when the handler returns) instead of waiting
// forever.
func TestStopDoesNotWaitForAStalledClient(t *testing.T) {
	// Thousands of clusters and endpoint sets: each response is far larger
	// than the client's fixed 64 KiB window and gRPC's per-stream write
	// quota, so the second one blocks.
	var msgs []proto.Message
	var names []string
	for i := range 3000 {
		name := fmt.Sprintf("cluster-%04d", i)
		names = append(names, name)
		msgs = append(msgs, cluster(name, 0), cla(name, 8000+i%1000))
	}
	for _, kind := range serverKinds {
		t.Run(kind.name, func(t *testing.T) {
			src := newFakeSource()
			src.Set(proxyID, set(msgs...))
			srv, conn := startServerKind(t, src, testLogger(t), kind.register)
			stalled, err := grpc.NewClient(conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stalled.Close() }()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(stalled).DeltaAggregatedResources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Subscribe, then never Recv.
			for _, r := range []*discoveryv3.DeltaDiscoveryRequest{
				{Node: node(proxyID, ""), TypeUrl: cdsURL},
				{TypeUrl: edsURL, ResourceNamesSubscribe: names},
			} {
				if err := stream.Send(r); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "both responses planned", func() bool {
				sts := srv.Status(proxyID)
				if len(sts) != 1 {
					return false
				}
				sent := 0
				for _, ts := range sts[0].Types {
					if ts.LastSentNonce != "" {
						sent++
					}
				}
				return sent == 2
			})
			stopped := make(chan struct{})
			go func() {
				srv.Stop()
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("Stop is still waiting for the stream of a client that stopped reading")
			}
		})
	}
}
