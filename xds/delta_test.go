package xds

import (
	"fmt"
	"slices"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

const proxyID = "web-sidecar-proxy"

// deltaEnv is one delta client of a server with a fake source.
type deltaEnv struct {
	src  *fakeSource
	srv  *Server[Resources]
	conn *grpc.ClientConn
	c    *deltaClient
}

// expectDelta receives the next response and checks its type and its
// resource names ("-x" for a removal of x).
func expectDelta(t *testing.T, c *deltaClient, typeURL string, names ...string) *discoveryv3.DeltaDiscoveryResponse {
	t.Helper()
	r := c.recv()
	if r.GetTypeUrl() != typeURL || !slices.Equal(deltaNames(r), names) {
		t.Fatalf("got %s %v, want %s %v", typeOf(r.GetTypeUrl()), deltaNames(r), typeOf(typeURL), names)
	}
	return r
}

// deltaInit runs the initial exchange the way an eager Envoy would (asking
// for listeners right away) and checks that the config arrives in
// make-before-break order: clusters, endpoints, listeners, routes.
func deltaInit(t *testing.T, c *deltaClient, id string) map[string]string {
	t.Helper()
	versions := map[string]string{}
	keep := func(r *discoveryv3.DeltaDiscoveryResponse) {
		for _, res := range r.GetResources() {
			versions[typeOf(r.GetTypeUrl())+"/"+res.GetName()] = res.GetVersion()
		}
	}
	c.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(id, ""), TypeUrl: cdsURL})
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsURL})
	r := expectDelta(t, c, cdsURL, "a", "b")
	keep(r)
	deltaAck(c, r)
	c.none() // listeners wait until the clusters have their endpoints
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResourceNamesSubscribe: []string{"a", "b"}})
	r = expectDelta(t, c, edsURL, "a", "b")
	keep(r)
	deltaAck(c, r)
	r = expectDelta(t, c, ldsURL, "public_listener")
	keep(r)
	deltaAck(c, r)
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: rdsURL, ResourceNamesSubscribe: []string{"api"}})
	r = expectDelta(t, c, rdsURL, "api")
	keep(r)
	deltaAck(c, r)
	c.none()
	return versions
}

// withSet returns baseSet with messages replaced or added.
func withSet(msgs ...proto.Message) Resources {
	res := baseSet()
	for typeURL, byName := range set(msgs...) {
		if res[typeURL] == nil {
			res[typeURL] = byName
			continue
		}
		for n, m := range byName {
			res[typeURL][n] = m
		}
	}
	return res
}

// without returns res minus the named resources of a type.
func without(res Resources, typeURL string, names ...string) Resources {
	for _, n := range names {
		delete(res[typeURL], n)
	}
	return res
}

func TestDeltaProtocol(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, e deltaEnv)
	}{
		{"initial config in order", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			deltaInit(t, e.c, proxyID)
		}},
		{"updates send only changed resources", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			v := deltaInit(t, e.c, proxyID)
			e.src.Set(proxyID, withSet(cla("a", 8081)))
			r := expectDelta(t, e.c, edsURL, "a")
			if got := r.GetResources()[0].GetVersion(); got == v["EDS/a"] {
				t.Errorf("changed endpoint kept version %s", got)
			}
			deltaAck(e.c, r)
			// A new set with equal content (new pointers) sends nothing.
			e.src.Set(proxyID, withSet(cla("a", 8081)))
			e.c.none()
		}},
		{"cluster change re-sends its endpoints", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			v := deltaInit(t, e.c, proxyID)
			e.src.Set(proxyID, withSet(cluster("b", 1)))
			r := expectDelta(t, e.c, cdsURL, "b")
			r2 := expectDelta(t, e.c, edsURL, "b")
			if got := r2.GetResources()[0].GetVersion(); got != v["EDS/b"] {
				t.Errorf("endpoint version %s, want unchanged %s", got, v["EDS/b"])
			}
			deltaAck(e.c, r)
			deltaAck(e.c, r2)
			e.c.none()
		}},
		{"removals go last, referrers first", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			deltaInit(t, e.c, proxyID)
			next := without(withSet(listener("public_listener", 21001), cluster("c", 0), cla("c", 7070)), cdsURL, "b")
			next = without(next, edsURL, "b")
			e.src.Set(proxyID, next)
			r := expectDelta(t, e.c, cdsURL, "c")
			deltaAck(e.c, r)
			e.c.none() // listener waits for c's endpoints
			e.c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResourceNamesSubscribe: []string{"c"}})
			deltaAck(e.c, expectDelta(t, e.c, edsURL, "c"))
			r = expectDelta(t, e.c, ldsURL, "public_listener")
			e.c.none() // no removal while the listener is unacknowledged
			deltaAck(e.c, r)
			r = expectDelta(t, e.c, cdsURL, "-b")
			r2 := expectDelta(t, e.c, edsURL, "-b")
			deltaAck(e.c, r)
			deltaAck(e.c, r2)
			e.c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResourceNamesUnsubscribe: []string{"b"}})
			e.c.none()
		}},
		{"ack and nack bookkeeping, nacked listener not re-sent", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			deltaInit(t, e.c, proxyID)
			acked := ldsStatus(t, e.srv).LastAckedVersion
			e.src.Set(proxyID, withSet(listener("public_listener", 1)))
			r := expectDelta(t, e.c, ldsURL, "public_listener")
			const envoyErr = "Error adding/updating listener(s) public_listener: cannot bind '127.0.0.1:1': Permission denied"
			deltaNack(e.c, r, envoyErr)
			waitFor(t, "NACK recorded", func() bool { return ldsStatus(t, e.srv).LastNackError != "" })
			st := ldsStatus(t, e.srv)
			if st.LastNackError != envoyErr || st.LastNackCode != 3 || st.LastNackedVersion != r.GetSystemVersionInfo() ||
				st.LastSentVersion != r.GetSystemVersionInfo() || st.LastSentNonce != r.GetNonce() ||
				st.LastAckedVersion != acked || !st.Suppressed || st.Pending {
				t.Errorf("status after NACK = %+v", st)
			}
			e.c.none()
			// Re-delivering the same content, and an unrelated change, do
			// not bring the rejected listener back.
			e.src.Set(proxyID, withSet(listener("public_listener", 1)))
			e.c.none()
			e.src.Set(proxyID, withSet(listener("public_listener", 1), cluster("a", 1)))
			deltaAck(e.c, expectDelta(t, e.c, cdsURL, "a"))
			deltaAck(e.c, expectDelta(t, e.c, edsURL, "a"))
			e.c.none()
			// Going back to what Envoy kept sends nothing: it still has it.
			e.src.Set(proxyID, withSet(cluster("a", 1)))
			e.c.none()
			// A changed listener goes out and is acknowledged.
			e.src.Set(proxyID, withSet(listener("public_listener", 21002), cluster("a", 1)))
			r = expectDelta(t, e.c, ldsURL, "public_listener")
			deltaAck(e.c, r)
			waitFor(t, "ACK recorded", func() bool { return ldsStatus(t, e.srv).LastAckedVersion == r.GetSystemVersionInfo() })
			if st := ldsStatus(t, e.srv); st.Suppressed || st.LastNackError != envoyErr {
				t.Errorf("status after ACK = %+v", st)
			}
		}},
		{"a rejected resource is retried with the next change of its type", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			deltaInit(t, e.c, proxyID)
			e.src.Set(proxyID, withSet(listener("public_listener", 1)))
			deltaNack(e.c, expectDelta(t, e.c, ldsURL, "public_listener"), "cannot bind")
			e.c.none()
			// Envoy kept the old public_listener, so it still needs the new
			// one (a bind error may be gone by now).
			e.src.Set(proxyID, withSet(listener("public_listener", 1), listener("extra", 2)))
			deltaAck(e.c, expectDelta(t, e.c, ldsURL, "extra", "public_listener"))
			e.c.none()
		}},
		{"one unacknowledged response per type, changes coalesce", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			deltaInit(t, e.c, proxyID)
			e.src.Set(proxyID, withSet(cla("a", 1)))
			r := expectDelta(t, e.c, edsURL, "a")
			for port := 2; port <= 4; port++ {
				e.src.Set(proxyID, withSet(cla("a", port), cla("b", 10+port), listener("public_listener", 21000+port)))
			}
			e.c.none()
			deltaAck(e.c, r)
			r = expectDelta(t, e.c, edsURL, "a", "b")
			var got endpointv3.ClusterLoadAssignment
			if err := r.GetResources()[0].GetResource().UnmarshalTo(&got); err != nil {
				t.Fatal(err)
			}
			if port := got.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue(); port != 4 {
				t.Errorf("coalesced endpoint port %d, want the latest, 4", port)
			}
			e.c.none() // the listener waits for the endpoints' ACK
			deltaAck(e.c, r)
			r = expectDelta(t, e.c, ldsURL, "public_listener")
			var l listenerv3.Listener
			if err := r.GetResources()[0].GetResource().UnmarshalTo(&l); err != nil {
				t.Fatal(err)
			}
			if port := l.GetAddress().GetSocketAddress().GetPortValue(); port != 21004 {
				t.Errorf("listener port %d, want 21004", port)
			}
			deltaAck(e.c, r)
			e.c.none()
		}},
		{"unknown type URL is answered and the stream goes on", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			deltaInit(t, e.c, proxyID)
			for _, typeURL := range []string{"type.googleapis.com/trellis.test.Unknown", "not a type url"} {
				e.c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL})
				r := expectDelta(t, e.c, typeURL)
				deltaAck(e.c, r)
			}
			e.src.Set(proxyID, withSet(cla("b", 1)))
			deltaAck(e.c, expectDelta(t, e.c, edsURL, "b"))
			e.c.none()
		}},
		{"unregistered proxy stays silent, then receives", func(t *testing.T, e deltaEnv) {
			e.c.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL})
			e.c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsURL})
			e.c.none()
			waitFor(t, "stream status", func() bool { return len(e.srv.Status(proxyID)) == 1 })
			if st := e.srv.Status(proxyID)[0]; st.State != StateWaiting || st.Protocol != ProtocolDelta || len(st.Types) != 2 {
				t.Errorf("status = %+v", st)
			}
			e.src.Set(proxyID, baseSet())
			deltaAck(e.c, expectDelta(t, e.c, cdsURL, "a", "b"))
			if st := e.srv.Status(proxyID)[0]; st.State != StateServing {
				t.Errorf("state %q after resources arrived", st.State)
			}
		}},
		{"reconnect with initial resource versions", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			v := deltaInit(t, e.c, proxyID)
			e.c.close()
			c2 := newDeltaClient(t, e.conn, "")
			c2.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL,
				InitialResourceVersions: map[string]string{"a": v["CDS/a"], "b": "stale", "gone": "1"}})
			r := expectDelta(t, c2, cdsURL, "b")
			deltaAck(c2, r)
			c2.none() // removals wait until b has its endpoints
			// Envoy announces the endpoints it holds; b's must still come
			// again, because b was re-sent and Envoy re-warms it.
			c2.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResourceNamesSubscribe: []string{"a", "b"},
				InitialResourceVersions: map[string]string{"a": v["EDS/a"], "b": v["EDS/b"]}})
			deltaAck(c2, expectDelta(t, c2, edsURL, "b"))
			deltaAck(c2, expectDelta(t, c2, cdsURL, "-gone"))
			c2.none()
		}},
		{"nonexistent subscribed resource is reported removed", func(t *testing.T, e deltaEnv) {
			e.src.Set(proxyID, baseSet())
			deltaInit(t, e.c, proxyID)
			e.c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResourceNamesSubscribe: []string{"nope"}})
			deltaAck(e.c, expectDelta(t, e.c, edsURL, "-nope"))
			e.c.none()
			e.src.Set(proxyID, withSet(cla("nope", 1)))
			deltaAck(e.c, expectDelta(t, e.c, edsURL, "nope"))
		}},
	}
	for _, tc := range tests {
		onEveryServerKind(t, tc.name, func(t *testing.T, src *fakeSource, srv *Server[Resources], conn *grpc.ClientConn) {
			tc.run(t, deltaEnv{src: src, srv: srv, conn: conn, c: newDeltaClient(t, conn, "")})
		})
	}
}

// ldsStatus returns the listener status of the only stream of proxyID.
func ldsStatus(t *testing.T, srv *Server[Resources]) TypeStatus {
	t.Helper()
	return typeStatus(t, srv, proxyID, ldsURL)
}

func typeStatus(t *testing.T, srv *Server[Resources], id, typeURL string) TypeStatus {
	t.Helper()
	sts := srv.Status(id)
	if len(sts) != 1 {
		t.Fatalf("%d streams for %s, want 1", len(sts), id)
	}
	for _, ts := range sts[0].Types {
		if ts.TypeURL == typeURL {
			return ts
		}
	}
	t.Fatalf("no status for %s: %+v", typeURL, sts[0])
	return TypeStatus{}
}

func TestDeltaManyTypesCapped(t *testing.T) {
	src := newFakeSource()
	src.Set(proxyID, baseSet())
	_, conn := startServer(t, src, testLogger(t))
	c := newDeltaClient(t, conn, "")
	c.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(proxyID, ""), TypeUrl: cdsURL})
	deltaAck(c, expectDelta(t, c, cdsURL, "a", "b"))
	for i := range maxTypesPerStream + 8 {
		c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: fmt.Sprintf("type.googleapis.com/x.T%d", i)})
	}
	for range maxTypesPerStream - 1 {
		deltaAck(c, c.recv())
	}
	c.none()
}
