package gossip

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// waitTimeout bounds every wait on the cluster; failure detection, the
// slowest, takes about five seconds with memberlist's LAN defaults.
const waitTimeout = 20 * time.Second

// node is one real Serf member on 127.0.0.1 and the events it handled.
type node struct {
	*Gossip
	name string
	port int
	addr string

	mu     sync.Mutex
	events []serf.MemberEvent
}

// nodeOpts adjusts a node's Config before New.
type nodeOpts func(*Config)

// newNode creates a member listening on port, shut down when the test
// ends; start says whether to call Start now.
func newNode(t *testing.T, name string, port int, start bool, opts ...nodeOpts) *node {
	t.Helper()
	n := &node{name: name, port: port, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	cfg := Config{
		NodeName:      name,
		BindAddr:      "127.0.0.1",
		BindPort:      port,
		AdvertiseAddr: "127.0.0.1",
		AdvertisePort: port,
		Tags:          ClientTags("dc1", name+"-id", "test"),
		OnEvent: func(ev serf.Event) {
			if me, ok := ev.(serf.MemberEvent); ok {
				n.mu.Lock()
				n.events = append(n.events, me)
				n.mu.Unlock()
			}
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New %s: %v", name, err)
	}
	n.Gossip = g
	t.Cleanup(func() { _ = g.Shutdown() })
	if start {
		g.Start()
	}
	return n
}

// sawEvent reports whether the node handled an event of type typ about
// member.
func (n *node) sawEvent(typ serf.EventType, member string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ev := range n.events {
		for _, m := range ev.Members {
			if ev.Type == typ && m.Name == member {
				return true
			}
		}
	}
	return false
}

// member is the node's view of another member, if it knows it.
func (n *node) member(name string) (serf.Member, bool) {
	for _, m := range n.Members() {
		if m.Name == name {
			return m, true
		}
	}
	return serf.Member{}, false
}

// hasStatus reports whether the node sees member with the given status.
func (n *node) hasStatus(name string, status serf.MemberStatus) bool {
	m, ok := n.member(name)
	return ok && m.Status == status
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testPorts hands out free loopback ports below Linux's ephemeral range.
func testPorts(t *testing.T, n int) []int {
	t.Helper()
	alloc, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ports, err := alloc.Ports(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

func TestJoin(t *testing.T) {
	tests := []struct {
		name string
		// addr is what b joins, given a's port; defaultPort what it passes.
		addr        func(port int) string
		defaultPort func(port int) int
		// startLate starts a's event loop only after the join, as the
		// agent does once the Gossip is published.
		startLate bool
	}{
		{name: "host and port", addr: func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }, defaultPort: func(int) int { return 1 }},
		{name: "host alone takes the default port", addr: func(int) string { return "127.0.0.1" }, defaultPort: func(p int) int { return p }},
		{name: "events before Start are delivered", addr: func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }, defaultPort: func(int) int { return 1 }, startLate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ports := testPorts(t, 2)
			a := newNode(t, "a", ports[0], !tt.startLate)
			b := newNode(t, "b", ports[1], true, func(c *Config) {
				c.Tags = ServerTags("dc1", "b-id", 8300, 3, false, "test")
			})
			n, err := b.Join([]string{tt.addr(a.port)}, tt.defaultPort(a.port))
			if err != nil || n != 1 {
				t.Fatalf("Join = %d, %v; want 1, nil", n, err)
			}
			waitFor(t, "a to see b alive", func() bool { return a.hasStatus("b", serf.StatusAlive) })
			waitFor(t, "b to see a alive", func() bool { return b.hasStatus("a", serf.StatusAlive) })
			if tt.startLate {
				a.Start()
			}
			waitFor(t, "a's join event for b", func() bool { return a.sawEvent(serf.EventMemberJoin, "b") })
			waitFor(t, "b's join event for a", func() bool { return b.sawEvent(serf.EventMemberJoin, "a") })

			// Tags travel with the member: a reads b as a server, b reads a as a
			// client.
			mb, _ := a.member("b")
			meta, ok := ParseServer(mb)
			want := ServerMeta{Name: "b", ID: "b-id", Datacenter: "dc1", Addr: "127.0.0.1:8300", Expect: 3, Status: serf.StatusAlive}
			if !ok || *meta != want {
				t.Errorf("ParseServer(a's view of b) = %+v, %v; want %+v", meta, ok, want)
			}
			ma, _ := b.member("a")
			if _, ok := ParseServer(ma); ok {
				t.Errorf("ParseServer(b's view of a) took a client for a server: %v", ma.Tags)
			}
		})
	}
}

func TestLocalMember(t *testing.T) {
	ports := testPorts(t, 1)
	a := newNode(t, "a", ports[0], true)
	m := a.LocalMember()
	if m.Name != "a" || int(m.Port) != a.port || !m.Addr.Equal(net.ParseIP("127.0.0.1")) || m.Status != serf.StatusAlive {
		t.Errorf("LocalMember = %s, want a at %s, alive", Describe(m), a.addr)
	}
	if m.Tags[TagRole] != RoleClient || m.Tags[TagID] != "a-id" {
		t.Errorf("LocalMember tags = %v", m.Tags)
	}
	if got := a.Members(); len(got) != 1 || got[0].Name != "a" {
		t.Errorf("Members of a lone node = %v, want only itself", got)
	}
}

func TestJoinNoneAnswers(t *testing.T) {
	ports := testPorts(t, 2)
	a := newNode(t, "a", ports[0], true)
	// Nothing listens on ports[1]: the allocator found it free.
	n, err := a.Join([]string{net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}, 0)
	if n != 0 || !errors.Is(err, ErrNoneJoined) {
		t.Errorf("Join to nobody = %d, %v; want 0, ErrNoneJoined", n, err)
	}
}

// TestDeparture covers the ways a member goes: a leave is seen at once as
// left; a member that stops without leaving is found failed, and a force
// leave then marks it left or, with prune, drops it from the list.
func TestDeparture(t *testing.T) {
	tests := []struct {
		name  string
		leave bool
		force bool
		prune bool
	}{
		{name: "leave", leave: true},
		{name: "shutdown without leave", leave: false},
		{name: "force leave of a failed member", force: true},
		{name: "force leave with prune", force: true, prune: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ports := testPorts(t, 2)
			a := newNode(t, "a", ports[0], true)
			b := newNode(t, "b", ports[1], true)
			if _, err := b.Join([]string{a.addr}, 0); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "a to see b alive", func() bool { return a.hasStatus("b", serf.StatusAlive) })
			if tt.leave {
				if err := b.Leave(); err != nil {
					t.Fatalf("Leave: %v", err)
				}
				waitFor(t, "a to see b left", func() bool { return a.hasStatus("b", serf.StatusLeft) })
				waitFor(t, "a's leave event", func() bool { return a.sawEvent(serf.EventMemberLeave, "b") })
			}
			if err := b.Shutdown(); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if tt.leave {
				return
			}
			waitFor(t, "a to see b failed", func() bool { return a.hasStatus("b", serf.StatusFailed) })
			waitFor(t, "a's failed event", func() bool { return a.sawEvent(serf.EventMemberFailed, "b") })
			if !tt.force {
				return
			}
			if err := a.ForceLeave("b", tt.prune); err != nil {
				t.Fatalf("ForceLeave: %v", err)
			}
			if tt.prune {
				waitFor(t, "b pruned from a's list", func() bool { _, ok := a.member("b"); return !ok })
			} else {
				waitFor(t, "a to see b left", func() bool { return a.hasStatus("b", serf.StatusLeft) })
			}
		})
	}
}

// TestShutdown checks that Shutdown may be called in any state, more than
// once, and stops the goroutines it owns (TestMain's goleak check).
func TestShutdown(t *testing.T) {
	tests := []struct {
		name  string
		start bool
		leave bool
	}{
		{name: "never started"},
		{name: "started", start: true},
		{name: "after leave", start: true, leave: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ports := testPorts(t, 1)
			a := newNode(t, "a", ports[0], tt.start)
			if tt.leave {
				if err := a.Leave(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 2 {
				if err := a.Shutdown(); err != nil {
					t.Errorf("Shutdown #%d: %v", i+1, err)
				}
			}
			// The port is free again: a restarted agent can bind it.
			ln, err := net.Listen("tcp", a.addr)
			if err != nil {
				t.Fatalf("port still held after Shutdown: %v", err)
			}
			_ = ln.Close()
		})
	}
}

// lockedRecords keeps every record logged through its logger, at any
// level; it is safe for the goroutines that log.
type lockedRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *lockedRecords) has(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.Message == msg {
			return true
		}
	}
	return false
}

func (l *lockedRecords) logger() *slog.Logger {
	return slog.New(lockedHandler{l})
}

type lockedHandler struct{ l *lockedRecords }

func (h lockedHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h lockedHandler) Handle(_ context.Context, r slog.Record) error {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	h.l.records = append(h.l.records, r)
	return nil
}
func (h lockedHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h lockedHandler) WithGroup(string) slog.Handler      { return h }

func TestRetryJoin(t *testing.T) {
	tests := []struct {
		name string
		max  int
		// peerUp starts the peer after a few failed attempts.
		peerUp bool
		// want is the log message that ends the retries, if any.
		want string
	}{
		{name: "joins once the peer comes up", peerUp: true, want: "joined the cluster"},
		{name: "gives up after max attempts", max: 3, want: "giving up joining the cluster"},
		{name: "Shutdown stops endless retries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ports := testPorts(t, 2)
			var logs lockedRecords
			b := newNode(t, "b", ports[1], true, func(c *Config) { c.Logger = logs.logger() })
			peer := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
			b.RetryJoin([]string{peer}, 0, 20*time.Millisecond, tt.max)
			waitFor(t, "a failed attempt", func() bool { return logs.has("join failed, will retry") })
			if tt.peerUp {
				a := newNode(t, "a", ports[0], true)
				waitFor(t, "a to see b alive", func() bool { return a.hasStatus("b", serf.StatusAlive) })
			}
			if tt.want != "" {
				waitFor(t, tt.want, func() bool { return logs.has(tt.want) })
			}
			done := make(chan error, 1)
			go func() { done <- b.Shutdown() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			case <-time.After(waitTimeout):
				t.Fatal("Shutdown did not return: the retry goroutine ignores it")
			}
		})
	}
}

func TestRetryJoinNoAddresses(t *testing.T) {
	ports := testPorts(t, 1)
	var logs lockedRecords
	a := newNode(t, "a", ports[0], true, func(c *Config) { c.Logger = logs.logger() })
	a.RetryJoin(nil, 0, time.Millisecond, 0)
	if err := a.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if logs.has("join failed, will retry") {
		t.Error("RetryJoin with no addresses tried to join")
	}
}

// TestSnapshotRejoin restarts a member that stopped without leaving: with
// the same snapshot directory it rejoins the members it knew, unasked.
func TestSnapshotRejoin(t *testing.T) {
	ports := testPorts(t, 2)
	dir := filepath.Join(t.TempDir(), "serf")
	withSnapshot := func(c *Config) { c.SnapshotDir = dir }
	a := newNode(t, "a", ports[0], true)
	b := newNode(t, "b", ports[1], true, withSnapshot)
	if _, err := b.Join([]string{a.addr}, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to see b alive", func() bool { return a.hasStatus("b", serf.StatusAlive) })
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "local.snapshot")); err != nil {
		t.Fatalf("no snapshot: %v", err)
	}
	b2 := newNode(t, "b", ports[1], true, withSnapshot)
	waitFor(t, "the restarted b to see a alive", func() bool { return b2.hasStatus("a", serf.StatusAlive) })
}

func TestNewSnapshotDirUnusable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ports := testPorts(t, 1)
	g, err := New(Config{NodeName: "a", BindAddr: "127.0.0.1", BindPort: ports[0], SnapshotDir: filepath.Join(file, "serf")})
	if err == nil {
		_ = g.Shutdown()
		t.Fatal("New with a snapshot dir under a file succeeded")
	}
}

func TestHolder(t *testing.T) {
	var h Holder
	if got := h.Members(); got != nil {
		t.Errorf("Members before Set = %v, want nil", got)
	}
	ports := testPorts(t, 1)
	a := newNode(t, "a", ports[0], true)
	h.Set(a.Gossip)
	if got := h.Members(); len(got) != 1 || got[0].Name != "a" {
		t.Errorf("Members after Set = %v, want a", got)
	}
}
