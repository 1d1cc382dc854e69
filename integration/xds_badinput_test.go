package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// unknownType is a type URL no Envoy and no generator knows.
const unknownType = "type.googleapis.com/trellis.test.v1.NoSuchResource"

// waitingWindow is how long a stream for an unregistered proxy must stay
// silent.
const waitingWindow = 2 * time.Second

// TestXDSBadInput: a stream for a proxy that is not registered stays open
// and silent, shows as waiting in proxy-status, and gets its configuration
// once the proxy is registered; an unknown type URL is answered (with
// nothing) and the stream goes on; garbage on one stream (bogus nonces,
// NACKs of responses never sent, empty and invented type URLs, a stream
// without a node) affects no other stream of the same proxy.
func TestXDSBadInput(t *testing.T) {
	m := startMesh(t)

	phase(t, "an unregistered proxy waits, then gets its config")
	{
		const lateID = "late-sidecar-proxy"
		late := []*adsClient{
			startADS(t, adsClientConfig{Label: "late delta@client", Protocol: protoDelta, Addr: m.client.GRPCAddr(), ProxyID: lateID}),
			startADS(t, adsClientConfig{Label: "late sotw@server", Protocol: protoSotW, Addr: m.server.GRPCAddr(), ProxyID: lateID, NodeName: m.client.Node()}),
			startADS(t, adsClientConfig{Label: "late delta@server", Protocol: protoDelta, Addr: m.server.GRPCAddr(), ProxyID: lateID, NodeName: m.client.Node()}),
		}
		time.Sleep(waitingWindow)
		for _, c := range late {
			v := c.view()
			if v.Seq != 0 || v.Ended != nil {
				t.Fatalf("%s: %d responses, ended %v: want an open, silent stream", c.cfg.Label, v.Seq, v.Ended)
			}
		}
		for _, a := range []struct {
			agent   string
			streams int
			addr    string
		}{{m.client.Node(), 1, m.client.HTTPAddr()}, {m.server.Node(), 2, m.server.HTTPAddr()}} {
			var all []proxyStream
			if _, err := m.rc.getJSON(m.ctx, a.addr, "/v1/agent/proxy-status/"+lateID, &all); err != nil {
				t.Fatal(err)
			}
			if len(all) != a.streams {
				t.Fatalf("%s: %d streams of %s, want %d: %+v", a.agent, len(all), lateID, a.streams, all)
			}
			for _, st := range all {
				if st.State != "waiting" || st.Node != m.client.Node() || len(st.Types) != 2 {
					t.Errorf("%s: stream %+v, want waiting for CDS and LDS", a.agent, st)
				}
				for _, ts := range st.Types {
					if ts.LastSentNonce != "" {
						t.Errorf("%s: %s sent while waiting: %+v", a.agent, shortType(ts.TypeURL), ts)
					}
				}
			}
		}
		registered := time.Now()
		m.register(m.client, sidecarService("late", "late", 8090, "api"))
		for _, c := range late {
			c.waitSettled(meshSettleTimeout, settleQuiet)
			t.Logf("%s: configured %s after the registration returned", c.cfg.Label, c.responsesSince(0)[0].At.Sub(registered).Round(time.Millisecond))
			m.waitStatusMatches(m.agentOf(c), c)
		}
		if _, err := sameConfig(late[0].view(), late[2].view(), false); err != nil {
			t.Errorf("late on the client agent and on a server: %v", err)
		}
	}

	good := []*adsClient{
		startADS(t, adsClientConfig{Label: "web delta@client", Protocol: protoDelta, Addr: m.client.GRPCAddr(), ProxyID: "web-sidecar-proxy"}),
		startADS(t, adsClientConfig{Label: "web sotw@server", Protocol: protoSotW, Addr: m.server.GRPCAddr(), ProxyID: "web-sidecar-proxy", NodeName: m.client.Node()}),
	}
	settleAll(good...)

	phase(t, "an unknown type URL is answered and the stream goes on")
	{
		for _, c := range good {
			seq := c.view().Seq
			c.subscribe(unknownType, nil, nil)
			c.waitFor(updateTimeout, "answer for the unknown type", func(v adsView) error {
				if v.Acks[unknownType].AckedNonce == "" {
					return fmt.Errorf("no answer")
				}
				return nil
			})
			got := c.responsesSince(seq)
			if len(got) != 1 || got[0].TypeURL != unknownType || len(got[0].Resources) != 0 || len(got[0].Removed) != 0 {
				t.Errorf("%s: answered %v, want one empty response of the type", c.cfg.Label, got)
			}
			st := m.waitStatusMatches(m.agentOf(c), c)
			if _, ok := st.typeStatus(unknownType); !ok {
				t.Errorf("%s: proxy-status does not list the type: %+v", c.cfg.Label, st)
			}
		}
	}

	phase(t, "garbage on one stream affects no other")
	{
		conn, err := grpc.NewClient(m.client.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		defer cancel()

		// A stream whose first request names no proxy is refused.
		for _, open := range []func() error{
			func() error {
				s, err := ads.DeltaAggregatedResources(ctx)
				if err != nil {
					return err
				}
				if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsType}); err != nil {
					return err
				}
				_, err = s.Recv()
				return err
			},
			func() error {
				s, err := ads.StreamAggregatedResources(ctx)
				if err != nil {
					return err
				}
				if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: ldsType, Node: nil}); err != nil {
					return err
				}
				_, err = s.Recv()
				return err
			},
		} {
			if err := open(); status.Code(err) != codes.InvalidArgument {
				t.Errorf("stream without a node: %v, want InvalidArgument", err)
			}
		}

		// A state-of-the-world stream of web on the client agent, next to
		// the good delta one, that answers with nonsense.
		s, err := ads.StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		node := (&adsClient{cfg: adsClientConfig{ProxyID: "web-sidecar-proxy"}}).node()
		junk := []*discoveryv3.DiscoveryRequest{
			{Node: node, TypeUrl: cdsType},
			{TypeUrl: cdsType, ResponseNonce: "no-such-nonce", VersionInfo: "whatever"},
			{TypeUrl: ldsType, ResponseNonce: "99999", ErrorDetail: &rpcstatus.Status{Code: 3, Message: "NACK of nothing"}},
			{TypeUrl: ""},
			{TypeUrl: edsType, ResourceNames: []string{strings.Repeat("x", 64<<10), "", "*"}},
			{TypeUrl: rdsType, ResponseNonce: "1", ErrorDetail: &rpcstatus.Status{}},
		}
		for i := range 40 {
			junk = append(junk, &discoveryv3.DiscoveryRequest{TypeUrl: fmt.Sprintf("type.googleapis.com/junk.v%d.Thing", i)})
		}
		for _, r := range junk {
			if err := s.Send(r); err != nil {
				break // the server may end a stream that misbehaves
			}
		}
		// Whatever happens to it, the junk stream must end cleanly when
		// asked, and no other stream may notice.
		drained := make(chan error, 1)
		var junkResponses []string
		go func() {
			for {
				r, err := s.Recv()
				if err != nil {
					drained <- err
					return
				}
				junkResponses = append(junkResponses, fmt.Sprintf("%s(%d)", shortType(r.GetTypeUrl()), len(r.GetResources())))
			}
		}()
		time.Sleep(500 * time.Millisecond)
		if err := s.CloseSend(); err != nil {
			t.Logf("junk stream CloseSend: %v", err)
		}
		select {
		case err := <-drained:
			// The responses are read only after the goroutine is done.
			t.Logf("junk stream got %v, then ended with %v", junkResponses, err)
			if c := status.Code(err); err.Error() != "EOF" && c != codes.InvalidArgument && c != codes.ResourceExhausted {
				t.Errorf("junk stream ended with %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("junk stream did not end after CloseSend")
		}

		seq := map[*adsClient]int{}
		for _, c := range good {
			seq[c] = c.view().Seq
		}
		registered := time.Now()
		m.register(m.client, sidecarService("api-2", "api", 8082))
		apiCluster := m.sni("api")
		for _, c := range good {
			v := c.waitFor(updateTimeout, "second api endpoint", func(v adsView) error {
				if n := endpointCount(v, apiCluster); n != 2 {
					return fmt.Errorf("%d endpoints of %s", n, apiCluster)
				}
				return nil
			})
			if took := v.Last.Sub(registered); took > endpointBudget {
				t.Errorf("%s: endpoint update took %s", c.cfg.Label, took)
			}
			c.waitSettled(meshSettleTimeout, settleQuiet)
			m.waitStatusMatches(m.agentOf(c), c)
			for _, r := range c.responsesSince(seq[c]) {
				if r.TypeURL != edsType {
					t.Errorf("%s: unexpected %s", c.cfg.Label, r)
				}
			}
		}
	}
}
