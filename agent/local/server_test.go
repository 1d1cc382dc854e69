package local

import (
	"context"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

// startServer starts a single in-memory server that bootstraps itself
// (no gossip: the syncer talks RPC only) and waits for its leadership.
func startServer(t *testing.T) *server.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("TRELLIS_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := server.New(server.Config{
		Logger:     logger,
		NodeName:   "s1",
		NodeID:     "00000000-0000-0000-0000-000000000001",
		Datacenter: "dc1",
		InMemory:   true,
		Listener:   ln,
		Advertise:  ln.Addr().(*net.TCPAddr),
		Bootstrap:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Logf("server shutdown: %v", err)
		}
	})
	waitFor(t, 15*time.Second, "leadership", srv.IsLeader)
	return srv
}

func rpcOK[A, R any](t *testing.T, srv *server.Server, m structs.Method[A, R], args *A, reply *R) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Call(ctx, srv, args, reply); err != nil {
		t.Fatalf("%s: %v", m.Name(), err)
	}
}

func TestSyncerAgainstServer(t *testing.T) {
	srv := startServer(t)
	s := newTestState(t, func(c *Config) {
		c.NodeName = "client1"
		c.NodeMeta = map[string]string{"env": "test"}
	})
	sy := newTestSyncer(t, s, srv, func(c *SyncerConfig) { c.Interval = 200 * time.Millisecond })
	sy.Start()

	def := webWithSidecar()
	def.Address = "127.0.0.1"
	def.Meta = map[string]string{"version": "1"}
	def.Connect.SidecarService.Proxy = &structs.ConnectProxyConfig{
		Config:    map[string]any{"protocol": "http"},
		Upstreams: []structs.Upstream{{DestinationName: "db", LocalBindPort: 9191}},
	}
	if _, err := s.RegisterService(def, "", false); err != nil {
		t.Fatal(err)
	}

	health := func(name string, connect, passing bool) structs.CheckServiceNodes {
		var out structs.IndexedCheckServiceNodes
		rpcOK(t, srv, structs.MethodHealthServiceNodes, &structs.ServiceSpecificRequest{ServiceName: name, Connect: connect, PassingOnly: passing}, &out)
		return out.Nodes
	}
	waitFor(t, waitLimit, "web and its sidecar in the catalog", func() bool {
		web, proxies := health("web", false, false), health("web", true, false)
		return len(web) == 1 && len(web[0].Checks) == 1 && len(proxies) == 1 && len(proxies[0].Checks) == 2
	})
	inst := health("web", false, false)[0]
	if inst.Node.Node != "client1" || inst.Node.Address != "127.0.0.1" || inst.Node.Meta["env"] != "test" ||
		inst.Service.TaggedAddresses["lan_ipv4"] != (structs.ServiceAddress{Address: "127.0.0.1", Port: 8080}) {
		t.Fatalf("instance %+v %+v", inst.Node, inst.Service)
	}
	proxy := health("web", true, false)[0].Service
	if proxy.ID != "web1-sidecar-proxy" || proxy.Kind != structs.ServiceKindConnectProxy || proxy.Port != 21000 || proxy.Proxy.DestinationServiceID != "web1" {
		t.Fatalf("sidecar %+v", proxy)
	}

	// TTL pass reaches ?passing.
	s.UpdateCheck("service:web1", structs.HealthPassing, "ok")
	waitFor(t, waitLimit, "web passing", func() bool { return len(health("web", false, true)) == 1 })

	// Drift behind the agent's back, both ways, repaired by anti-entropy.
	rpcOK(t, srv, structs.MethodCatalogDeregister, &structs.DeregisterRequest{Node: "client1", ServiceID: "web1"}, &struct{}{})
	rpcOK(t, srv, structs.MethodCatalogRegister, &structs.RegisterRequest{Node: "client1", SkipNodeUpdate: true,
		Service: &structs.NodeService{ID: "rogue", Service: "rogue"}}, &struct{}{})
	nodeServices := func() (uint64, []string) {
		var out structs.IndexedNodeServices
		rpcOK(t, srv, structs.MethodCatalogNodeServices, &structs.NodeSpecificRequest{Node: "client1"}, &out)
		var ids []string
		if out.NodeServices != nil {
			for id := range out.NodeServices.Services {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return out.Index, ids
	}
	waitFor(t, waitLimit, "anti-entropy repair", func() bool {
		_, ids := nodeServices()
		return slices.Equal(ids, []string{"web1", "web1-sidecar-proxy"}) && len(health("web", false, true)) == 1
	})

	// Once in sync, full syncs write nothing: the catalog's index stays.
	waitFor(t, waitLimit, "a quiet full sync", func() bool {
		before, _ := nodeServices()
		if err := sy.SyncFull(context.Background()); err != nil {
			t.Fatal(err)
		}
		after, _ := nodeServices()
		return before == after
	})
	var checks structs.IndexedHealthChecks
	rpcOK(t, srv, structs.MethodHealthNodeChecks, &structs.NodeSpecificRequest{Node: "client1"}, &checks)
	idx := checks.Index
	for i := 0; i < 3; i++ {
		if err := sy.SyncFull(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	rpcOK(t, srv, structs.MethodHealthNodeChecks, &structs.NodeSpecificRequest{Node: "client1"}, &checks)
	if checks.Index != idx {
		t.Fatalf("in-sync full syncs moved the checks index %d -> %d", idx, checks.Index)
	}

	// Maintenance takes web out of the passing results.
	if err := s.EnableServiceMaintenance("web1", "deploy"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitLimit, "maintenance in the catalog", func() bool { return len(health("web", false, true)) == 0 })
	if err := s.DisableServiceMaintenance("web1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitLimit, "maintenance lifted", func() bool { return len(health("web", false, true)) == 1 })

	// Deregistration removes the service, its sidecar and all their checks.
	if _, err := s.RemoveService("web1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitLimit, "deregistration", func() bool {
		_, ids := nodeServices()
		rpcOK(t, srv, structs.MethodHealthNodeChecks, &structs.NodeSpecificRequest{Node: "client1"}, &checks)
		return len(ids) == 0 && len(checks.HealthChecks) == 0
	})
	sy.Stop()
}
