package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/integration/harness"
	"github.com/trellis-mesh/trellis/structs"
)

// testServer is one in-process server with its own gossip, as an agent
// would wire them.
type testServer struct {
	name     string
	id       string
	srv      *Server
	gossip   *gossip.Gossip
	serfPort int
	rpcPort  int
	dataDir  string
	// dial, when set, opens the server's forwarding connections.
	dial func(ctx context.Context, addr string) (net.Conn, error)
	// raftDial, when set, opens the server's Raft connections.
	raftDial func(ctx context.Context, addr string) (net.Conn, error)
	// wrapLog, when set, wraps the server's Raft log store.
	wrapLog func(raft.LogStore) raft.LogStore
	// autopilot, when set, is the server's configured autopilot defaults.
	autopilot *structs.AutopilotConfig
	// connect is the server's connect block (zero: enabled, defaults).
	connect ConnectConfig
	// acls is the server's ACL configuration (zero: off).
	acls ACLConfig
	// autoEncrypt is the server's auto_encrypt block.
	autoEncrypt AutoEncryptConfig
}

func (ts *testServer) stop(t testing.TB) {
	t.Helper()
	if ts.srv != nil {
		if err := ts.srv.Shutdown(); err != nil {
			t.Logf("shutdown %s: %v", ts.name, err)
		}
		ts.srv = nil
	}
	if ts.gossip != nil {
		_ = ts.gossip.Shutdown()
		ts.gossip = nil
	}
}

func testLogger(t testing.TB, name string) *slog.Logger {
	if os.Getenv("TRELLIS_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name)
}

// startTestServer starts (or restarts, when ts already has ports and a data
// dir) a server and its gossip, joining join.
func startTestServer(t testing.TB, ts *testServer, expect int, bootstrap bool, join []string) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ts.rpcPort)))
	if err != nil {
		t.Fatal(err)
	}
	var holder gossip.Holder
	srv, err := New(Config{
		Logger:                 testLogger(t, ts.name),
		NodeName:               ts.name,
		NodeID:                 ts.id,
		Datacenter:             "dc1",
		DataDir:                ts.dataDir,
		InMemory:               ts.dataDir == "",
		Listener:               ln,
		Advertise:              ln.Addr().(*net.TCPAddr),
		Bootstrap:              bootstrap,
		BootstrapExpect:        expect,
		RaftMultiplier:         1,
		SessionTTLMin:          time.Second,
		Membership:             &holder,
		Coordinates:            &holder,
		CoordinateUpdatePeriod: 50 * time.Millisecond,
		Dial:                   ts.dial,
		RaftDial:               ts.raftDial,
		WrapLogStore:           ts.wrapLog,
		Autopilot:              ts.autopilot,
		Connect:                ts.connect,
		ACLs:                   ts.acls,
		AutoEncrypt:            ts.autoEncrypt,
	})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gossip.New(gossip.Config{
		Logger:        testLogger(t, ts.name),
		NodeName:      ts.name,
		BindAddr:      "127.0.0.1",
		BindPort:      ts.serfPort,
		AdvertiseAddr: "127.0.0.1",
		AdvertisePort: ts.serfPort,
		Tags:          gossip.ServerTags("dc1", ts.id, ts.rpcPort, expect, bootstrap, "test"),
		OnEvent: func(ev serf.Event) {
			if me, ok := ev.(serf.MemberEvent); ok {
				srv.MemberEvent(me)
			}
		},
	})
	if err != nil {
		_ = srv.Shutdown()
		t.Fatal(err)
	}
	holder.Set(g)
	g.Start()
	ts.srv, ts.gossip = srv, g
	if len(join) > 0 {
		if _, err := g.Join(join, 0); err != nil {
			t.Fatalf("%s join: %v", ts.name, err)
		}
	}
}

// startTestCluster starts n servers with bootstrap-expect n (or one
// -bootstrap server when n == 1) and waits for a leader. Each configure
// function may set up a server before it starts.
func startTestCluster(t testing.TB, n int, onDisk bool, configure ...func(*testServer)) []*testServer {
	t.Helper()
	ports, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var servers []*testServer
	var firstSerf string
	for i := range n {
		ts := &testServer{name: fmt.Sprintf("s%d", i+1), id: fmt.Sprintf("00000000-0000-0000-0000-%012d", i+1)}
		if ts.rpcPort, err = ports.Port(); err != nil {
			t.Fatal(err)
		}
		if ts.serfPort, err = ports.Port(); err != nil {
			t.Fatal(err)
		}
		if onDisk {
			ts.dataDir = t.TempDir()
		}
		for _, c := range configure {
			c(ts)
		}
		var join []string
		if i > 0 {
			join = []string{firstSerf}
		} else {
			firstSerf = net.JoinHostPort("127.0.0.1", strconv.Itoa(ts.serfPort))
		}
		expect := n
		if n == 1 {
			expect = 0
		}
		startTestServer(t, ts, expect, n == 1, join)
		servers = append(servers, ts)
		t.Cleanup(func() { ts.stop(t) })
	}
	waitForLeader(t, servers, 30*time.Second)
	return servers
}

func waitForLeader(t testing.TB, servers []*testServer, timeout time.Duration) *testServer {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var leader *testServer
		agreed := true
		for _, ts := range servers {
			if ts.srv == nil {
				continue
			}
			if ts.srv.IsLeader() {
				leader = ts
			}
		}
		if leader != nil {
			want := leader.srv.LeaderAddr()
			for _, ts := range servers {
				if ts.srv != nil && ts.srv.LeaderAddr() != want {
					agreed = false
				}
			}
			if agreed {
				return leader
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no leader within %s", timeout)
	return nil
}

func rpc[A, R any](t testing.TB, s *Server, m structs.Method[A, R], args *A, reply *R) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Call(ctx, s, args, reply); err != nil {
		t.Fatalf("%s: %v", m.Name(), err)
	}
}

// waitForSerfHealth waits until the leader has registered node from Serf
// with a passing serfHealth check (sessions need it).
func waitForSerfHealth(t testing.TB, s *Server, node string) {
	t.Helper()
	waitFor(t, 10*time.Second, node+"'s passing serfHealth", func() bool {
		var chk structs.IndexedHealthChecks
		rpc(t, s, structs.MethodHealthNodeChecks, &structs.NodeSpecificRequest{Node: node}, &chk)
		return len(chk.HealthChecks) > 0 && chk.HealthChecks[0].Status == structs.HealthPassing
	})
}

// rpcByName makes a call by method name, for tables over several methods
// whose types differ.
func rpcByName(t testing.TB, s *Server, method string, args, reply any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.RPC(ctx, method, args, reply); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

func kvPut(t testing.TB, s *Server, key, value string) {
	t.Helper()
	var ok bool
	rpc(t, s, structs.MethodKVSApply, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: key, Value: []byte(value)}}, &ok)
	if !ok {
		t.Fatalf("put %s: false", key)
	}
}

func kvGet(t testing.TB, s *Server, key string, stale bool) *structs.DirEntry {
	t.Helper()
	var out structs.IndexedDirEntries
	rpc(t, s, structs.MethodKVSGet, &structs.KeyRequest{Key: key, QueryOptions: structs.QueryOptions{AllowStale: stale}}, &out)
	if len(out.Entries) == 0 {
		return nil
	}
	return out.Entries[0]
}
