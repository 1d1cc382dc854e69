package xds

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

// grpcNode is the node of a gRPC client's bootstrap.
func grpcNode(id string) *corev3.Node {
	md, _ := structpb.NewStruct(map[string]any{"TRELLIS_GRPC": "true", "namespace": "default", "partition": "default"})
	return &corev3.Node{Id: id, Cluster: "web", Metadata: md}
}

// subscribed waits until the stream's Subscription holds want.
func subscribed(t *testing.T, src *fakeSource, want ...string) {
	t.Helper()
	waitFor(t, "listener subscription", func() bool {
		refs := src.Refs()
		if len(refs) == 0 || refs[0].Listeners == nil {
			return false
		}
		names, _ := refs[0].Listeners.Names()
		return slices.Equal(names, want)
	})
}

// A gRPC client names the listeners it dials, one request at a time, on a
// state-of-the-world stream: the Source sees the node's flavour and each
// subscription change; a NACK shows in the stream status and the rejected
// version is not sent again until the resources change.
func TestProxylessStream(t *testing.T) {
	onEveryServerKind(t, "proxyless", func(t *testing.T, src *fakeSource, srv *Server[Resources], conn *grpc.ClientConn) {
		c := newSotWClient(t, conn, "")
		src.Set(proxyID, set(listener("api", 0), listener("db", 0)))
		c.send(&discoveryv3.DiscoveryRequest{Node: grpcNode(proxyID), TypeUrl: ldsURL, ResourceNames: []string{"api"}})
		r := expectSotW(t, c, ldsURL, "api")
		if refs := src.Refs(); len(refs) != 1 || !refs[0].Proxyless {
			t.Fatalf("refs = %+v, want one proxyless stream", refs)
		}
		subscribed(t, src, "api")
		sotwAck(c, r, "api")

		// grpc-go re-sends its whole listener set as the application dials
		// another target.
		c.send(&discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: []string{"db", "api"},
			VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
		r = expectSotW(t, c, ldsURL, "api", "db")
		subscribed(t, src, "api", "db")

		const grpcErr = `resource "db": unsupported network filter`
		nack := &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: []string{"api", "db"},
			ResponseNonce: r.GetNonce(), ErrorDetail: &rpcstatus.Status{Code: 3, Message: grpcErr}}
		c.send(nack)
		waitFor(t, "NACK recorded", func() bool { return typeStatus(t, srv, proxyID, ldsURL).LastNackError == grpcErr })
		if st := typeStatus(t, srv, proxyID, ldsURL); st.LastNackedVersion != r.GetVersionInfo() || !st.Suppressed {
			t.Errorf("status after NACK = %+v", st)
		}
		c.none()
		// Unchanged resources (another snapshot with the same content) are
		// not a reason to send the rejected version again.
		src.Set(proxyID, set(listener("api", 0), listener("db", 0)))
		c.none()
		src.Set(proxyID, set(listener("api", 0), listener("db", 1)))
		sotwAck(c, expectSotW(t, c, ldsURL, "api", "db"), "api", "db")

		c.send(&discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: []string{"db"}})
		subscribed(t, src, "db")
	})
}
