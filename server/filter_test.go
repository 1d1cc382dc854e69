package server

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// malformedFilter is Consul's example of a broken expression (a selector
// with no operator) and malformedFilterErr the text Consul answers it
// with (go-bexpr's).
const (
	malformedFilter    = "foo"
	malformedFilterErr = `Failed to create boolean expression evaluator: 1:4 (3): no match found, expected: "!=", ".", "==", "[", [ \t\r\n] or [a-zA-Z0-9_]`
)

// seedFilterCatalog registers two nodes running "web" (v1 passing, v2
// critical), a sidecar proxy of web-v2 and two intentions.
func seedFilterCatalog(t testing.TB, s *Server) {
	t.Helper()
	regs := []*structs.RegisterRequest{
		{
			Node: "web-1", Address: "10.0.0.1", NodeMeta: map[string]string{"rack": "r1"},
			Service: &structs.NodeService{ID: "web-v1", Service: "web", Tags: []string{"primary"}, Meta: map[string]string{"version": "v1"}, Port: 8080},
			Checks: structs.HealthChecks{
				{CheckID: "web-1-node", Name: "node", Status: structs.HealthPassing},
				{CheckID: "web-v1-check", Name: "web", ServiceID: "web-v1", Status: structs.HealthPassing},
			},
		},
		{
			Node: "web-2", Address: "10.0.0.2", NodeMeta: map[string]string{"rack": "r2"},
			Service: &structs.NodeService{ID: "web-v2", Service: "web", Tags: []string{"secondary"}, Meta: map[string]string{"version": "v2"}, Port: 8081},
			Checks:  structs.HealthChecks{{CheckID: "web-v2-check", Name: "web", ServiceID: "web-v2", Status: structs.HealthCritical}},
		},
		{
			Node: "web-2", Address: "10.0.0.2", NodeMeta: map[string]string{"rack": "r2"},
			Service: &structs.NodeService{Kind: structs.ServiceKindConnectProxy, ID: "web-v2-proxy", Service: "web-sidecar-proxy", Port: 21000,
				Proxy: structs.ConnectProxyConfig{DestinationServiceName: "web", DestinationServiceID: "web-v2",
					Upstreams: []structs.Upstream{{DestinationName: "db", LocalBindPort: 9191}}}},
		},
	}
	for _, r := range regs {
		rpc(t, s, structs.MethodCatalogRegister, r, &struct{}{})
	}
	for _, ixn := range []*structs.Intention{
		{SourceName: "web", DestinationName: "db", Action: structs.IntentionActionAllow},
		{SourceName: "api", DestinationName: "db", Action: structs.IntentionActionDeny},
	} {
		var out string
		rpc(t, s, structs.MethodIntentionApply, &structs.IntentionRequest{Op: structs.IntentionOpUpsert, Intention: ixn}, &out)
	}
}

// filterMethod is one filterable read: how to ask it with a filter and
// how to name the elements of its reply.
type filterMethod struct {
	name   string
	method string
	args   func(q structs.QueryOptions) any
	reply  func() any
	ids    func(reply any) []string
	cases  []filterWant
}

type filterWant struct {
	filter string
	want   []string
}

func sortedIDs[E any](list []E, id func(E) string) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		out = append(out, id(e))
	}
	slices.Sort(out)
	return out
}

func filterMethods() []filterMethod {
	nodes := func(r any) []string {
		return sortedIDs(r.(*structs.IndexedNodes).Nodes, func(n *structs.Node) string { return n.Node })
	}
	serviceNodes := func(r any) []string {
		return sortedIDs(r.(*structs.IndexedServiceNodes).ServiceNodes, func(n *structs.ServiceNode) string { return n.ServiceID })
	}
	instances := func(r any) []string {
		return sortedIDs(r.(*structs.IndexedCheckServiceNodes).Nodes, func(n structs.CheckServiceNode) string { return n.Service.ID })
	}
	checks := func(r any) []string {
		return sortedIDs(r.(*structs.IndexedHealthChecks).HealthChecks, func(c *structs.HealthCheck) string { return c.CheckID })
	}
	service := func(name string, connect bool) func(q structs.QueryOptions) any {
		return func(q structs.QueryOptions) any {
			return &structs.ServiceSpecificRequest{ServiceName: name, Connect: connect, QueryOptions: q}
		}
	}
	node := func(name string) func(q structs.QueryOptions) any {
		return func(q structs.QueryOptions) any { return &structs.NodeSpecificRequest{Node: name, QueryOptions: q} }
	}
	none := []string{}
	return []filterMethod{
		{
			name: "catalog nodes", method: structs.MethodCatalogListNodes.Name(),
			args:  func(q structs.QueryOptions) any { return &structs.DCSpecificRequest{QueryOptions: q} },
			reply: func() any { return new(structs.IndexedNodes) }, ids: nodes,
			cases: []filterWant{
				{`Meta.rack == r1`, []string{"web-1"}},
				{`Node matches "^web-" and Address != "10.0.0.1"`, []string{"web-2"}},
				{`TaggedAddresses is empty and "r" in Meta.rack`, []string{"web-1", "web-2"}},
				{`Meta.rack == r9`, none},
			},
		},
		{
			name: "catalog service", method: structs.MethodCatalogServiceNodes.Name(), args: service("web", false),
			reply: func() any { return new(structs.IndexedServiceNodes) }, ids: serviceNodes,
			cases: []filterWant{
				{`ServiceMeta.version == v2`, []string{"web-v2"}},
				{`"primary" in ServiceTags`, []string{"web-v1"}},
				{`NodeMeta.rack == r2 or ServicePort == 8080`, []string{"web-v1", "web-v2"}},
				{`ServiceMeta.version == v3`, none},
			},
		},
		{
			name: "catalog connect", method: structs.MethodCatalogServiceNodes.Name(), args: service("web", true),
			reply: func() any { return new(structs.IndexedServiceNodes) }, ids: serviceNodes,
			cases: []filterWant{
				{`ServiceProxy.Upstreams.DestinationName == db`, []string{"web-v2-proxy"}},
				{`ServiceKind == "connect-proxy" and ServiceProxy.DestinationServiceID == "web-v2"`, []string{"web-v2-proxy"}},
				{`ServiceProxy.Upstreams.DestinationName == cache`, none},
			},
		},
		{
			// Consul filters the node's services, not the node.
			name: "catalog node", method: structs.MethodCatalogNodeServices.Name(), args: node("web-2"),
			reply: func() any { return new(structs.IndexedNodeServices) },
			ids: func(r any) []string {
				ns := r.(*structs.IndexedNodeServices).NodeServices
				if ns == nil || ns.Node == nil || ns.Node.Node != "web-2" {
					return nil
				}
				ids := make([]string, 0, len(ns.Services))
				for id := range ns.Services {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				return ids
			},
			cases: []filterWant{
				{`Kind == "connect-proxy"`, []string{"web-v2-proxy"}},
				{`Meta.version == v2 and Port == 8081`, []string{"web-v2"}},
				{`Proxy.Upstreams.LocalBindPort == 9191 or "secondary" in Tags`, []string{"web-v2", "web-v2-proxy"}},
				{`Service == nothing`, none},
			},
		},
		{
			name: "health service", method: structs.MethodHealthServiceNodes.Name(), args: service("web", false),
			reply: func() any { return new(structs.IndexedCheckServiceNodes) }, ids: instances,
			cases: []filterWant{
				{`Service.Meta.version == v2`, []string{"web-v2"}},
				{`Checks.Status == critical`, []string{"web-v2"}},
				// Any check not critical: web-v1 has two, web-v2 none.
				{`Checks.Status != critical`, []string{"web-v1"}},
				{`Node.Meta.rack == r1 and Service.Port == 8080`, []string{"web-v1"}},
				{`Service.Meta.version == v3`, none},
			},
		},
		{
			name: "health connect", method: structs.MethodHealthServiceNodes.Name(), args: service("web", true),
			reply: func() any { return new(structs.IndexedCheckServiceNodes) }, ids: instances,
			cases: []filterWant{
				{`Service.Proxy.DestinationServiceName == web`, []string{"web-v2-proxy"}},
				{`Service.Proxy.Upstreams is empty`, none},
			},
		},
		{
			name: "health checks", method: structs.MethodHealthServiceChecks.Name(), args: service("web", false),
			reply: func() any { return new(structs.IndexedHealthChecks) }, ids: checks,
			cases: []filterWant{
				{`Status == critical`, []string{"web-v2-check"}},
				{`Node == "web-1" and ServiceID == "web-v1"`, []string{"web-v1-check"}},
				{`Status == warning`, none},
			},
		},
		{
			// Consul's documented example: the node's service checks.
			name: "health node", method: structs.MethodHealthNodeChecks.Name(), args: node("web-1"),
			reply: func() any { return new(structs.IndexedHealthChecks) }, ids: checks,
			cases: []filterWant{
				{`ServiceName != ""`, []string{"web-v1-check"}},
				{`ServiceName == ""`, []string{"web-1-node"}},
				{`Status != passing`, none},
			},
		},
		{
			name: "health state", method: structs.MethodHealthChecksInState.Name(),
			args: func(q structs.QueryOptions) any {
				return &structs.ChecksInStateRequest{State: structs.HealthAny, QueryOptions: q}
			},
			reply: func() any { return new(structs.IndexedHealthChecks) }, ids: checks,
			cases: []filterWant{
				{`Node == "web-2"`, []string{"web-v2-check"}},
				{`Node matches "^web-" and Status == passing`, []string{"web-1-node", "web-v1-check"}},
				{`Node == "web-9"`, none},
			},
		},
		{
			// The services with an instance the filter selects, each with
			// the tags of the selected instances.
			name: "catalog services", method: structs.MethodCatalogListServices.Name(),
			args:  func(q structs.QueryOptions) any { return &structs.DCSpecificRequest{QueryOptions: q} },
			reply: func() any { return new(structs.IndexedServices) },
			// Each service, and each of its tags as service#tag.
			ids: func(r any) []string {
				ids := []string{}
				for name, tags := range r.(*structs.IndexedServices).Services {
					ids = append(ids, name)
					for _, tag := range tags {
						ids = append(ids, name+"#"+tag)
					}
				}
				slices.Sort(ids)
				return ids
			},
			cases: []filterWant{
				{`ServiceMeta.version == v2`, []string{"web", "web#secondary"}},
				{`ServiceName == web`, []string{"web", "web#primary", "web#secondary"}},
				{`NodeMeta.rack == r2 and ServiceKind == "connect-proxy"`, []string{"web-sidecar-proxy"}},
				{`ServiceName == nothing`, none},
			},
		},
		{
			name: "intentions", method: structs.MethodIntentionList.Name(),
			args:  func(q structs.QueryOptions) any { return &structs.DCSpecificRequest{QueryOptions: q} },
			reply: func() any { return new(structs.IndexedIntentions) },
			ids: func(r any) []string {
				return sortedIDs(r.(*structs.IndexedIntentions).Intentions, func(x *structs.Intention) string { return x.SourceName + ">" + x.DestinationName })
			},
			cases: []filterWant{
				// Consul's documented example, without spaces.
				{`SourceName==web`, []string{"web>db"}},
				{`Action == deny and Precedence == 9`, []string{"api>db"}},
				{`DestinationName != db`, none},
			},
		},
	}
}

func TestFilterEveryEndpoint(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	seedFilterCatalog(t, s)
	for _, m := range filterMethods() {
		t.Run(m.name, func(t *testing.T) {
			for _, c := range m.cases {
				reply := m.reply()
				args := m.args(structs.QueryOptions{Filter: c.filter})
				rpcByName(t, s, m.method, args, reply)
				if got := m.ids(reply); !slices.Equal(got, c.want) || got == nil {
					t.Errorf("%q: got %q, want %q", c.filter, got, c.want)
				}
				// The caller's request keeps its expression.
				if q := args.(interface{ QueryOpts() *structs.QueryOptions }).QueryOpts(); q.Filter != c.filter {
					t.Errorf("%q: the request's filter became %q", c.filter, q.Filter)
				}
			}
			// Without a filter, everything the cases saw is still there:
			// filtering never touched the store's data.
			all := m.reply()
			rpcByName(t, s, m.method, m.args(structs.QueryOptions{}), all)
			for _, c := range m.cases {
				for _, id := range c.want {
					if !slices.Contains(m.ids(all), id) {
						t.Errorf("unfiltered read lacks %s: %q", id, m.ids(all))
					}
				}
			}
			err := s.RPC(context.Background(), m.method, m.args(structs.QueryOptions{Filter: malformedFilter}), m.reply())
			if err == nil || err.Error() != malformedFilterErr || !structs.IsInvalidFilter(err) {
				t.Errorf("malformed filter: %v, want %q", err, malformedFilterErr)
			}
		})
	}
}

func TestFilterRefusedWithoutFilterableResult(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	cases := []struct {
		method      string
		args, reply any
	}{
		{structs.MethodKVSGet.Name(), &structs.KeyRequest{Key: "k", QueryOptions: structs.QueryOptions{Filter: "Key == k"}}, new(structs.IndexedDirEntries)},
		{structs.MethodStatusLeader.Name(), &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{Filter: "x == y"}}, new(string)},
	}
	for _, tc := range cases {
		err := s.RPC(context.Background(), tc.method, tc.args, tc.reply)
		if !errors.Is(err, structs.ErrFilterNotSupported) || !strings.Contains(err.Error(), tc.method) {
			t.Errorf("%s: err = %v, want ErrFilterNotSupported naming the method", tc.method, err)
		}
	}
}

func TestFilteredBlockingQuery(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	seedFilterCatalog(t, s)
	var first structs.IndexedNodes
	rpc(t, s, structs.MethodCatalogListNodes, &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{Filter: "Meta.rack == r1"}}, &first)

	// A malformed expression fails before the query blocks.
	start := time.Now()
	err := structs.MethodCatalogListNodes.Call(context.Background(), s, &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{
		Filter: malformedFilter, MinQueryIndex: first.Index, MaxQueryTime: 10 * time.Second}}, new(structs.IndexedNodes))
	if err == nil || err.Error() != malformedFilterErr || time.Since(start) > 2*time.Second {
		t.Fatalf("malformed filter on a blocking query: %v after %s", err, time.Since(start))
	}

	done := make(chan structs.IndexedNodes, 1)
	go func() {
		var out structs.IndexedNodes
		if err := structs.MethodCatalogListNodes.Call(context.Background(), s, &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{
			Filter: "Meta.rack == r1", MinQueryIndex: first.Index, MaxQueryTime: 10 * time.Second}}, &out); err != nil {
			t.Error(err)
		}
		done <- out
	}()
	select {
	case out := <-done:
		t.Fatalf("returned before any write: %+v", out)
	case <-time.After(300 * time.Millisecond):
	}
	// A node the filter drops still moves the index, which wakes the
	// query (Consul's semantics): the answer is the same list at a new
	// index.
	rpc(t, s, structs.MethodCatalogRegister, &structs.RegisterRequest{Node: "web-3", Address: "10.0.0.3", NodeMeta: map[string]string{"rack": "r3"}}, &struct{}{})
	select {
	case out := <-done:
		if out.Index <= first.Index || len(out.Nodes) != 1 || out.Nodes[0].Node != "web-1" {
			t.Fatalf("woke with index %d (was %d) and %d nodes", out.Index, first.Index, len(out.Nodes))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the filtered blocking query did not wake")
	}
}

// TestFilterOnEveryServer checks that a leader read, a follower's
// forwarded read, a follower's stale read and a client agent's call all
// filter alike, and that a malformed expression fails with Consul's text
// across the RPC boundary too.
func TestFilterOnEveryServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	servers := startTestCluster(t, 3, false)
	leader := waitForLeader(t, servers, 10*time.Second)
	seedFilterCatalog(t, leader.srv)
	var written structs.IndexedCheckServiceNodes
	rpc(t, leader.srv, structs.MethodHealthServiceNodes, &structs.ServiceSpecificRequest{ServiceName: "web"}, &written)

	read := func(s *Server, stale bool) (structs.IndexedCheckServiceNodes, error) {
		var out structs.IndexedCheckServiceNodes
		err := rpcErr(s, structs.MethodHealthServiceNodes.Name(), &structs.ServiceSpecificRequest{ServiceName: "web",
			QueryOptions: structs.QueryOptions{Filter: `Service.Meta.version == v2`, AllowStale: stale}}, &out)
		return out, err
	}
	want := []string{"web-v2"}
	ids := func(out structs.IndexedCheckServiceNodes) []string {
		return sortedIDs(out.Nodes, func(n structs.CheckServiceNode) string { return n.Service.ID })
	}
	for _, ts := range servers {
		out, err := read(ts.srv, false)
		if err != nil || !slices.Equal(ids(out), want) {
			t.Fatalf("%s default read: %q %v", ts.name, ids(out), err)
		}
		// A stale read answers from this server's store once it caught up.
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err = read(ts.srv, true)
			if err == nil && out.Index >= written.Index {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never caught up: index %d < %d (%v)", ts.name, out.Index, written.Index, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !slices.Equal(ids(out), want) {
			t.Fatalf("%s stale read: %q", ts.name, ids(out))
		}
	}

	// A client agent's call reaches a server over the RPC connection.
	pool := NewConnPool(ConnPoolConfig{})
	defer pool.Close()
	for _, ts := range servers {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ts.rpcPort))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out structs.IndexedCheckServiceNodes
		err := pool.Call(ctx, addr, structs.MethodHealthServiceNodes.Name(), &structs.ServiceSpecificRequest{ServiceName: "web",
			QueryOptions: structs.QueryOptions{Filter: `Checks.Status == critical`}}, &out)
		if err != nil || !slices.Equal(ids(out), want) {
			t.Fatalf("%s client call: %q %v", ts.name, ids(out), err)
		}
		err = pool.Call(ctx, addr, structs.MethodHealthServiceNodes.Name(), &structs.ServiceSpecificRequest{ServiceName: "web",
			QueryOptions: structs.QueryOptions{Filter: malformedFilter}}, &out)
		cancel()
		if err == nil || err.Error() != malformedFilterErr || !structs.IsInvalidFilter(err) {
			t.Fatalf("%s malformed filter from a client: %v", ts.name, err)
		}
	}
}

// TestFilterSelectorCheckedBeforeRead checks that an expression naming a
// field the reply's elements lack fails at once with bexpr's reason, as
// Consul's servers check it against the result type before they read.
func TestFilterSelectorCheckedBeforeRead(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	cases := []struct {
		method, filter, want string
		args, reply          any
	}{
		{structs.MethodCatalogListNodes.Name(), `Nope == x`, `Selector "Nope" is not valid`,
			&structs.DCSpecificRequest{}, new(structs.IndexedNodes)},
		{structs.MethodCatalogListServices.Name(), `ServicePort == abc`,
			`Failed to coerce value "abc" for selector "ServicePort": strconv.ParseInt: parsing "abc": invalid syntax`,
			&structs.DCSpecificRequest{}, new(structs.IndexedServices)},
		{structs.MethodHealthServiceNodes.Name(), `Service.Meta.version is empty`, `Invalid match operator "Is Empty" for selector "Service.Meta.version"`,
			&structs.ServiceSpecificRequest{ServiceName: "web"}, new(structs.IndexedCheckServiceNodes)},
	}
	for _, tc := range cases {
		tc.args.(interface{ QueryOpts() *structs.QueryOptions }).QueryOpts().Filter = tc.filter
		err := s.RPC(context.Background(), tc.method, tc.args, tc.reply)
		want := structs.ErrInvalidFilter.Error() + ": " + tc.want
		if err == nil || err.Error() != want || !structs.IsInvalidFilter(err) {
			t.Errorf("%s with %q: %v, want %q", tc.method, tc.filter, err, want)
		}
	}
}
