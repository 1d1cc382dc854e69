package xds

import (
	"google.golang.org/grpc"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
)

type sotwEnv struct {
	src *fakeSource
	srv *Server[Resources]
	c   *sotwClient
}

// expectSotW receives the next response and checks its type and names.
func expectSotW(t *testing.T, c *sotwClient, typeURL string, names ...string) *discoveryv3.DiscoveryResponse {
	t.Helper()
	r := c.recv()
	if got := sotwNames(t, r); r.GetTypeUrl() != typeURL || !slices.Equal(got, names) {
		t.Fatalf("got %s %v, want %s %v", typeOf(r.GetTypeUrl()), got, typeOf(typeURL), names)
	}
	if r.GetVersionInfo() == "" || r.GetNonce() == "" {
		t.Fatalf("response without version or nonce: %v", r)
	}
	return r
}

// sotwInit runs an eager Envoy's initial exchange and checks the order.
func sotwInit(t *testing.T, c *sotwClient, id string) map[string]*discoveryv3.DiscoveryResponse {
	t.Helper()
	last := map[string]*discoveryv3.DiscoveryResponse{}
	c.send(&discoveryv3.DiscoveryRequest{Node: node(id, ""), TypeUrl: cdsURL})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: ldsURL})
	r := expectSotW(t, c, cdsURL, "a", "b")
	sotwAck(c, r)
	c.none()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: edsURL, ResourceNames: []string{"a", "b"}})
	last[edsURL] = expectSotW(t, c, edsURL, "a", "b")
	sotwAck(c, last[edsURL], "a", "b")
	last[ldsURL] = expectSotW(t, c, ldsURL, "public_listener")
	sotwAck(c, last[ldsURL])
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: rdsURL, ResourceNames: []string{"api"}})
	last[rdsURL] = expectSotW(t, c, rdsURL, "api")
	sotwAck(c, last[rdsURL], "api")
	c.none()
	last[cdsURL] = r
	return last
}

func TestSotWProtocol(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, e sotwEnv)
	}{
		{"initial config in order", func(t *testing.T, e sotwEnv) {
			e.src.Set(proxyID, baseSet())
			sotwInit(t, e.c, proxyID)
		}},
		{"a change sends the whole type, a cluster change its endpoints too", func(t *testing.T, e sotwEnv) {
			e.src.Set(proxyID, baseSet())
			sotwInit(t, e.c, proxyID)
			e.src.Set(proxyID, withSet(cla("a", 1)))
			sotwAck(e.c, expectSotW(t, e.c, edsURL, "a", "b"), "a", "b")
			e.c.none()
			e.src.Set(proxyID, withSet(cla("a", 1), cluster("b", 1)))
			r := expectSotW(t, e.c, cdsURL, "a", "b")
			r2 := expectSotW(t, e.c, edsURL, "a", "b")
			sotwAck(e.c, r)
			sotwAck(e.c, r2, "a", "b")
			e.c.none()
		}},
		{"requests naming a subset get that subset", func(t *testing.T, e sotwEnv) {
			// gRPC clients ask for single names, listeners first.
			e.src.Set(proxyID, withSet(listener("other", 21001)))
			e.c.send(&discoveryv3.DiscoveryRequest{Node: node(proxyID, ""), TypeUrl: ldsURL, ResourceNames: []string{"public_listener"}})
			sotwAck(e.c, expectSotW(t, e.c, ldsURL, "public_listener"), "public_listener")
			e.c.send(&discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"a"}})
			sotwAck(e.c, expectSotW(t, e.c, cdsURL, "a"), "a")
			e.c.send(&discoveryv3.DiscoveryRequest{TypeUrl: edsURL, ResourceNames: []string{"a"}})
			sotwAck(e.c, expectSotW(t, e.c, edsURL, "a"), "a")
			e.src.Set(proxyID, withSet(listener("other", 21002), cla("b", 1)))
			e.c.none() // nothing it asked for changed
		}},
		{"removals go last", func(t *testing.T, e sotwEnv) {
			e.src.Set(proxyID, baseSet())
			last := sotwInit(t, e.c, proxyID)
			next := without(withSet(listener("public_listener", 21001), cluster("c", 0), cla("c", 7070)), cdsURL, "b")
			e.src.Set(proxyID, without(next, edsURL, "b"))
			r := expectSotW(t, e.c, cdsURL, "a", "b", "c") // b kept until the listener moved on
			sotwAck(e.c, r)
			e.c.none()
			e.c.send(&discoveryv3.DiscoveryRequest{TypeUrl: edsURL, ResourceNames: []string{"a", "c"},
				VersionInfo: last[edsURL].GetVersionInfo(), ResponseNonce: last[edsURL].GetNonce()})
			sotwAck(e.c, expectSotW(t, e.c, edsURL, "a", "c"), "a", "c")
			r = expectSotW(t, e.c, ldsURL, "public_listener")
			e.c.none()
			sotwAck(e.c, r)
			sotwAck(e.c, expectSotW(t, e.c, cdsURL, "a", "c"))
			e.c.none()
		}},
		{"removed endpoints are left to the client", func(t *testing.T, e sotwEnv) {
			e.src.Set(proxyID, baseSet())
			sotwInit(t, e.c, proxyID)
			e.src.Set(proxyID, without(without(baseSet(), cdsURL, "b"), edsURL, "b"))
			sotwAck(e.c, expectSotW(t, e.c, cdsURL, "a"))
			e.c.none() // omitting b from an endpoint response would mean nothing
		}},
		{"nack bookkeeping, rejected clusters not re-sent", func(t *testing.T, e sotwEnv) {
			e.src.Set(proxyID, baseSet())
			last := sotwInit(t, e.c, proxyID)
			e.src.Set(proxyID, withSet(cluster("a", 1)))
			r := expectSotW(t, e.c, cdsURL, "a", "b")
			r2 := expectSotW(t, e.c, edsURL, "a", "b")
			const envoyErr = "Error adding/updating cluster(s) a: bad"
			nack := &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: last[cdsURL].GetVersionInfo(),
				ResponseNonce: r.GetNonce(), ErrorDetail: &rpcstatus.Status{Code: 13, Message: envoyErr}}
			e.c.send(nack)
			sotwAck(e.c, r2, "a", "b")
			waitFor(t, "NACK recorded", func() bool { return typeStatus(t, e.srv, proxyID, cdsURL).LastNackError != "" })
			st := typeStatus(t, e.srv, proxyID, cdsURL)
			if st.LastNackError != envoyErr || st.LastNackedVersion != r.GetVersionInfo() ||
				st.LastAckedVersion != last[cdsURL].GetVersionInfo() || !st.Suppressed {
				t.Errorf("status after NACK = %+v", st)
			}
			e.c.none()
			e.c.send(nack) // a repeated NACK is not a reason to send again
			e.c.none()
			e.src.Set(proxyID, withSet(cluster("a", 1), cla("a", 1)))
			sotwAck(e.c, expectSotW(t, e.c, edsURL, "a", "b"), "a", "b")
			e.c.none()
			e.src.Set(proxyID, withSet(cluster("a", 2)))
			r = expectSotW(t, e.c, cdsURL, "a", "b")
			sotwAck(e.c, r)
			sotwAck(e.c, expectSotW(t, e.c, edsURL, "a", "b"), "a", "b")
			waitFor(t, "ACK recorded", func() bool {
				return typeStatus(t, e.srv, proxyID, cdsURL).LastAckedVersion == r.GetVersionInfo()
			})
		}},
		{"stale nonce is ignored", func(t *testing.T, e sotwEnv) {
			e.src.Set(proxyID, baseSet())
			sotwInit(t, e.c, proxyID)
			e.c.send(&discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "999", ResourceNames: []string{"a"}})
			e.c.none()
			e.src.Set(proxyID, withSet(cluster("b", 1)))
			expectSotW(t, e.c, cdsURL, "a", "b")
		}},
		{"endpoint request without names subscribes to nothing", func(t *testing.T, e sotwEnv) {
			e.src.Set(proxyID, baseSet())
			last := sotwInit(t, e.c, proxyID)
			e.c.send(&discoveryv3.DiscoveryRequest{TypeUrl: edsURL, VersionInfo: last[edsURL].GetVersionInfo(),
				ResponseNonce: last[edsURL].GetNonce()})
			waitFor(t, "unsubscribed", func() bool { return typeStatus(t, e.srv, proxyID, edsURL).Subscribed == 0 })
			e.src.Set(proxyID, withSet(cla("a", 1)))
			e.c.none()
		}},
		{"unknown type URL is answered and the stream goes on", func(t *testing.T, e sotwEnv) {
			e.src.Set(proxyID, baseSet())
			sotwInit(t, e.c, proxyID)
			const unknown = "type.googleapis.com/trellis.test.Unknown"
			e.c.send(&discoveryv3.DiscoveryRequest{TypeUrl: unknown})
			sotwAck(e.c, expectSotW(t, e.c, unknown))
			e.src.Set(proxyID, withSet(cla("b", 1)))
			expectSotW(t, e.c, edsURL, "a", "b")
		}},
		{"unregistered proxy stays silent, then receives", func(t *testing.T, e sotwEnv) {
			e.c.send(&discoveryv3.DiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL})
			e.c.none()
			waitFor(t, "stream status", func() bool { return len(e.srv.Status(proxyID)) == 1 })
			if st := e.srv.Status(proxyID)[0]; st.State != StateWaiting || st.Protocol != ProtocolSotW {
				t.Errorf("status = %+v", st)
			}
			e.src.Set(proxyID, baseSet())
			expectSotW(t, e.c, cdsURL, "a", "b")
		}},
		{"empty types are answered once", func(t *testing.T, e sotwEnv) {
			e.src.Set(proxyID, set(cluster("a", 0), cla("a", 1)))
			e.c.send(&discoveryv3.DiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL})
			e.c.send(&discoveryv3.DiscoveryRequest{TypeUrl: ldsURL})
			sotwAck(e.c, expectSotW(t, e.c, cdsURL, "a"))
			e.c.send(&discoveryv3.DiscoveryRequest{TypeUrl: edsURL, ResourceNames: []string{"a"}})
			sotwAck(e.c, expectSotW(t, e.c, edsURL, "a"), "a")
			sotwAck(e.c, expectSotW(t, e.c, ldsURL))
			e.c.none()
		}},
	}
	for _, tc := range tests {
		onEveryServerKind(t, tc.name, func(t *testing.T, src *fakeSource, srv *Server[Resources], conn *grpc.ClientConn) {
			tc.run(t, sotwEnv{src: src, srv: srv, c: newSotWClient(t, conn, "")})
		})
	}
}
