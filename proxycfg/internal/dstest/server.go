package dstest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

// StartServer starts a one-server cluster in memory on a loopback port,
// waits until it leads and its CA exists, and shuts it down when the test
// ends. addr is its server (RPC) address.
func StartServer(t testing.TB, nodeName string) (srv *server.Server, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err = server.New(server.Config{
		NodeName:   nodeName,
		NodeID:     "00000000-0000-0000-0000-000000000001",
		Datacenter: "dc1",
		InMemory:   true,
		Listener:   ln,
		Advertise:  ln.Addr().(*net.TCPAddr),
		Bootstrap:  true,
	})
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	WaitFor(t, "leadership", srv.IsLeader)
	WaitFor(t, "the CA", func() bool {
		var roots structs.IndexedCARoots
		err := structs.MethodConnectCARoots.Call(context.Background(), srv, &structs.DCSpecificRequest{}, &roots)
		return err == nil && roots.ActiveRootID != ""
	})
	return srv, ln.Addr().String()
}

// Call makes one RPC to srv, failing the test on error.
func Call[A, R any](t testing.TB, srv *server.Server, m structs.Method[A, R], args *A, reply *R) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := m.Call(ctx, srv, args, reply); err != nil {
		t.Fatalf("%s: %v", m.Name(), err)
	}
}

// Register registers a service instance on node through the catalog RPC,
// as a client agent's anti-entropy would.
func Register(t testing.TB, srv *server.Server, node string, svc *structs.NodeService) {
	t.Helper()
	Call(t, srv, structs.MethodCatalogRegister, &structs.RegisterRequest{
		Node: node, Address: "127.0.0.1", Service: svc,
		Checks: structs.HealthChecks{{Node: node, CheckID: "service:" + svc.ID, Name: "c", Status: structs.HealthPassing, ServiceID: svc.ID}},
	}, &struct{}{})
}

// ApplyEntry writes a config entry through the RPC API.
func ApplyEntry(t testing.TB, srv *server.Server, e structs.ConfigEntry) {
	t.Helper()
	var ok bool
	Call(t, srv, structs.MethodConfigEntryApply, &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert, Entry: e}, &ok)
	if !ok {
		t.Fatalf("config entry %s/%s not applied", e.GetKind(), e.GetName())
	}
}

// Sidecar is the connect-proxy registration of dest's sidecar, with the
// given upstreams.
func Sidecar(dest string, port int, upstreams ...string) *structs.NodeService {
	svc := &structs.NodeService{
		Kind: structs.ServiceKindConnectProxy, ID: dest + "-sidecar-proxy", Service: dest + "-sidecar-proxy",
		Address: "127.0.0.1", Port: port,
		Proxy: structs.ConnectProxyConfig{DestinationServiceName: dest, DestinationServiceID: dest, LocalServicePort: 8080},
	}
	for i, u := range upstreams {
		svc.Proxy.Upstreams = append(svc.Proxy.Upstreams, structs.Upstream{DestinationName: u, LocalBindPort: 9000 + i})
	}
	return svc
}

// RotateCA makes the leader replace the active root with a new key
// (bits: 256 or 384, different from the current one).
func RotateCA(t testing.TB, srv *server.Server, bits int) {
	t.Helper()
	cfg := &structs.CAConfiguration{Provider: structs.ConsulCAProvider, Config: map[string]any{
		"LeafCertTTL": "72h", "PrivateKeyType": "ec", "PrivateKeyBits": bits,
	}}
	Call(t, srv, structs.MethodConnectCAConfigurationSet, &structs.CARequest{Config: cfg}, &struct{}{})
}
