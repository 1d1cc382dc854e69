package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/structs"
)

// memBackend is a small in-memory stand-in for the servers, just enough of
// KV, sessions, transactions, the catalog and status for the official Go
// client to run its calls end to end through the HTTP API.
type memBackend struct {
	mu       sync.Mutex
	index    uint64
	kv       map[string]*structs.DirEntry
	sessions map[string]*structs.Session
	services map[string]*structs.ServiceNode
	nodes    map[string]*structs.Node
	// lastQuery is the QueryOptions of the latest read.
	lastQuery structs.QueryOptions
}

func newMemBackend() *memBackend {
	return &memBackend{
		index:    1,
		kv:       map[string]*structs.DirEntry{},
		sessions: map[string]*structs.Session{},
		services: map[string]*structs.ServiceNode{},
		nodes:    map[string]*structs.Node{},
	}
}

func (m *memBackend) qm() structs.QueryMeta {
	return structs.QueryMeta{Index: m.index, KnownLeader: true}
}

func (m *memBackend) RPC(_ context.Context, method string, args, reply any) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q, ok := args.(interface{ QueryOpts() *structs.QueryOptions }); ok {
		m.lastQuery = *q.QueryOpts()
	}
	switch method {
	case structs.MethodKVSApply.Name():
		a := args.(*structs.KVSRequest)
		*reply.(*bool) = m.applyKV(a.Op, a.DirEnt)
	case structs.MethodKVSGet.Name():
		a := args.(*structs.KeyRequest)
		out := reply.(*structs.IndexedDirEntries)
		if e, ok := m.kv[a.Key]; ok {
			c := *e
			out.Entries = structs.DirEntries{&c}
		}
		out.QueryMeta = m.qm()
	case structs.MethodKVSList.Name(), structs.MethodKVSListKeys.Name():
		a := args.(*structs.KeyListRequest)
		var keys []string
		for k := range m.kv {
			if strings.HasPrefix(k, a.Prefix) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		if method == structs.MethodKVSListKeys.Name() {
			reply.(*structs.IndexedKeyList).Keys = keys
			reply.(*structs.IndexedKeyList).QueryMeta = m.qm()
			return nil
		}
		out := reply.(*structs.IndexedDirEntries)
		for _, k := range keys {
			c := *m.kv[k]
			out.Entries = append(out.Entries, &c)
		}
		out.QueryMeta = m.qm()
	case structs.MethodTxnApply.Name():
		a := args.(*structs.TxnRequest)
		out := reply.(*structs.TxnResponse)
		for i, op := range a.Ops {
			if !m.applyKV(op.KV.Verb, op.KV.DirEnt) {
				out.Errors = append(out.Errors, &structs.TxnError{OpIndex: i, What: "failed"})
				continue
			}
			e := *m.kv[op.KV.DirEnt.Key]
			e.Value = nil
			out.Results = append(out.Results, &structs.TxnResult{KV: &e})
		}
	case structs.MethodSessionApply.Name():
		a := args.(*structs.SessionRequest)
		m.index++
		if a.Op == structs.SessionDestroy {
			delete(m.sessions, a.Session.ID)
			return nil
		}
		s := a.Session
		s.CreateIndex, s.ModifyIndex = m.index, m.index
		m.sessions[s.ID] = &s
		*reply.(*string) = s.ID
	case structs.MethodSessionGet.Name(), structs.MethodSessionRenew.Name():
		a := args.(*structs.SessionSpecificRequest)
		out := reply.(*structs.IndexedSessions)
		if s, ok := m.sessions[a.SessionID]; ok {
			c := *s
			out.Sessions = structs.Sessions{&c}
		}
		out.QueryMeta = m.qm()
	case structs.MethodCatalogRegister.Name():
		a := args.(*structs.RegisterRequest)
		m.index++
		m.nodes[a.Node] = &structs.Node{Node: a.Node, Address: a.Address, Datacenter: a.Datacenter}
		if a.Service != nil {
			svc := *a.Service
			if svc.ID == "" {
				svc.ID = svc.Service
			}
			m.services[svc.ID] = svc.ToServiceNode(m.nodes[a.Node])
		}
	case structs.MethodCatalogListDatacenters.Name():
		*reply.(*[]string) = []string{testDC}
	case structs.MethodCatalogListServices.Name():
		out := reply.(*structs.IndexedServices)
		out.Services = map[string][]string{}
		for _, sn := range m.services {
			out.Services[sn.ServiceName] = append(out.Services[sn.ServiceName], sn.ServiceTags...)
		}
		out.QueryMeta = m.qm()
	case structs.MethodCatalogServiceNodes.Name(), structs.MethodHealthServiceNodes.Name():
		a := args.(*structs.ServiceSpecificRequest)
		var matched []*structs.ServiceNode
		for _, sn := range m.services {
			if sn.ServiceName == a.ServiceName && (!a.TagFilter || hasTags(sn.ServiceTags, a.ServiceTags)) {
				matched = append(matched, sn)
			}
		}
		if method == structs.MethodCatalogServiceNodes.Name() {
			reply.(*structs.IndexedServiceNodes).ServiceNodes = matched
			reply.(*structs.IndexedServiceNodes).QueryMeta = m.qm()
			return nil
		}
		out := reply.(*structs.IndexedCheckServiceNodes)
		for _, sn := range matched {
			out.Nodes = append(out.Nodes, structs.CheckServiceNode{
				Node: m.nodes[sn.Node], Service: sn.ToNodeService(),
				Checks: structs.HealthChecks{{Node: sn.Node, CheckID: "serfHealth", Status: structs.HealthPassing}},
			})
		}
		out.QueryMeta = m.qm()
	case structs.MethodCatalogListNodes.Name():
		out := reply.(*structs.IndexedNodes)
		for _, n := range m.nodes {
			out.Nodes = append(out.Nodes, n)
		}
		out.QueryMeta = m.qm()
	case structs.MethodCatalogNodeServices.Name():
		a := args.(*structs.NodeSpecificRequest)
		out := reply.(*structs.IndexedNodeServices)
		out.QueryMeta = m.qm()
		if n, ok := m.nodes[a.Node]; ok {
			out.NodeServices = &structs.NodeServices{Node: n, Services: map[string]*structs.NodeService{}}
			for id, sn := range m.services {
				if sn.Node == a.Node {
					out.NodeServices.Services[id] = sn.ToNodeService()
				}
			}
		}
	case structs.MethodStatusLeader.Name():
		*reply.(*string) = "127.0.0.1:8300"
	case structs.MethodStatusPeers.Name():
		*reply.(*[]string) = []string{"127.0.0.1:8300"}
	default:
		return fmt.Errorf("memBackend: %w: %s", structs.ErrUnknownMethod, method)
	}
	return nil
}

// applyKV applies one KV write verb; false means a failed CAS or lock.
func (m *memBackend) applyKV(op structs.KVOp, d structs.DirEntry) bool {
	cur, exists := m.kv[d.Key]
	switch op {
	case structs.KVCAS:
		if (d.ModifyIndex == 0 && exists) || (d.ModifyIndex != 0 && (!exists || cur.ModifyIndex != d.ModifyIndex)) {
			return false
		}
	case structs.KVLock:
		if exists && cur.Session != "" && cur.Session != d.Session {
			return false
		}
	case structs.KVDelete:
		m.index++
		delete(m.kv, d.Key)
		return true
	case structs.KVDeleteTree:
		m.index++
		for k := range m.kv {
			if strings.HasPrefix(k, d.Key) {
				delete(m.kv, k)
			}
		}
		return true
	}
	m.index++
	e := &structs.DirEntry{Key: d.Key, Flags: d.Flags, Value: d.Value, Session: d.Session,
		RaftIndex: structs.RaftIndex{CreateIndex: m.index, ModifyIndex: m.index}}
	if exists {
		e.CreateIndex, e.LockIndex = cur.CreateIndex, cur.LockIndex
	}
	if op == structs.KVLock {
		e.LockIndex++
	}
	m.kv[d.Key] = e
	return true
}

func hasTags(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// TestOfficialClient drives the handler with github.com/hashicorp/consul/api
// over a loopback listener: every call must decode, and the client must
// find the read headers it parses.
func TestOfficialClient(t *testing.T) {
	backend := newMemBackend()
	srv, err := New(Config{RPC: backend, NodeName: testNode, Datacenter: testDC})
	if err != nil {
		t.Fatal(err)
	}
	client, _ := officialClient(t, srv)
	kv := client.KV()

	t.Run("kv", func(t *testing.T) {
		if _, err := kv.Put(&api.KVPair{Key: "app/a", Value: []byte("1"), Flags: 7}, nil); err != nil {
			t.Fatalf("Put: %v", err)
		}
		pair, qm, err := kv.Get("app/a", nil)
		if err != nil || pair == nil || string(pair.Value) != "1" || pair.Flags != 7 {
			t.Fatalf("Get = %+v, %v", pair, err)
		}
		if qm.LastIndex == 0 || !qm.KnownLeader {
			t.Fatalf("query meta = %+v, want an index and a known leader", qm)
		}
		missing, qm, err := kv.Get("app/missing", nil)
		if err != nil || missing != nil || qm.LastIndex == 0 {
			t.Fatalf("Get(missing) = %+v, %+v, %v; want nil pair with an index", missing, qm, err)
		}
		ok, _, err := kv.CAS(&api.KVPair{Key: "app/a", Value: []byte("2"), ModifyIndex: 999}, nil)
		if err != nil || ok {
			t.Fatalf("stale CAS = %v, %v; want false", ok, err)
		}
		ok, _, err = kv.CAS(&api.KVPair{Key: "app/a", Value: []byte("2"), ModifyIndex: pair.ModifyIndex}, nil)
		if err != nil || !ok {
			t.Fatalf("CAS = %v, %v; want true", ok, err)
		}
		if _, err := kv.Put(&api.KVPair{Key: "app/b/c", Value: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
		pairs, _, err := kv.List("app/", nil)
		if err != nil || len(pairs) != 2 {
			t.Fatalf("List = %d pairs, %v", len(pairs), err)
		}
		keys, _, err := kv.Keys("app/", "/", nil)
		if err != nil || len(keys) != 2 {
			t.Fatalf("Keys = %v, %v", keys, err)
		}
		if _, err := kv.DeleteTree("app/b/", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Delete("app/a", nil); err != nil {
			t.Fatal(err)
		}
		pairs, _, err = kv.List("app/", nil)
		if err != nil || len(pairs) != 0 {
			t.Fatalf("List after deletes = %v, %v", pairs, err)
		}
	})

	t.Run("blocking parameters", func(t *testing.T) {
		_, _, err := kv.Get("x", &api.QueryOptions{WaitIndex: 5, WaitTime: 90 * time.Second, AllowStale: true})
		if err != nil {
			t.Fatal(err)
		}
		backend.mu.Lock()
		q := backend.lastQuery
		backend.mu.Unlock()
		if q.MinQueryIndex != 5 || q.MaxQueryTime != 90*time.Second || !q.AllowStale {
			t.Fatalf("backend saw %+v", q)
		}
	})

	t.Run("txn", func(t *testing.T) {
		ok, resp, _, err := client.Txn().Txn(api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVSet, Key: "t/1", Value: []byte("a")}},
			{KV: &api.KVTxnOp{Verb: api.KVSet, Key: "t/2", Value: []byte("b")}},
		}, nil)
		if err != nil || !ok || len(resp.Results) != 2 || resp.Results[0].KV.Key != "t/1" {
			t.Fatalf("Txn = %v, %+v, %v", ok, resp, err)
		}
		ok, resp, _, err = client.Txn().Txn(api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: "t/1", Value: []byte("c"), Index: 1}},
		}, nil)
		if err != nil || ok || len(resp.Errors) != 1 || resp.Errors[0].OpIndex != 0 {
			t.Fatalf("failed Txn = %v, %+v, %v; want a rolled-back answer", ok, resp, err)
		}
	})

	t.Run("sessions and locks", func(t *testing.T) {
		sessions := client.Session()
		id, _, err := sessions.Create(&api.SessionEntry{Name: "lock", TTL: "15s", LockDelay: time.Second}, nil)
		if err != nil || !uuidRE.MatchString(id) {
			t.Fatalf("Create = %q, %v", id, err)
		}
		info, _, err := sessions.Info(id, nil)
		if err != nil || info == nil || info.LockDelay != time.Second || info.Node != testNode || info.TTL != "15s" {
			t.Fatalf("Info = %+v, %v", info, err)
		}
		if _, _, err := sessions.Create(&api.SessionEntry{TTL: "1s"}, nil); err == nil || !strings.Contains(err.Error(), "Invalid Session TTL") {
			t.Fatalf("Create with a short TTL: %v, want Invalid Session TTL", err)
		}
		renewed, _, err := sessions.Renew(id, nil)
		if err != nil || renewed == nil || renewed.ID != id {
			t.Fatalf("Renew = %+v, %v", renewed, err)
		}
		ok, _, err := kv.Acquire(&api.KVPair{Key: "lock", Session: id}, nil)
		if err != nil || !ok {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
		if _, err := sessions.Destroy(id, nil); err != nil {
			t.Fatal(err)
		}
		gone, _, err := sessions.Renew(id, nil)
		if err != nil || gone != nil {
			t.Fatalf("Renew(destroyed) = %+v, %v; want nil, nil", gone, err)
		}
	})

	t.Run("catalog and health", func(t *testing.T) {
		_, err := client.Catalog().Register(&api.CatalogRegistration{
			Node: "n1", Address: "10.0.0.1",
			Service: &api.AgentService{Service: "web", Tags: []string{"v1"}, Port: 80},
		}, nil)
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		if dcs, err := client.Catalog().Datacenters(); err != nil || len(dcs) != 1 || dcs[0] != testDC {
			t.Fatalf("Datacenters = %v, %v", dcs, err)
		}
		services, _, err := client.Catalog().Services(nil)
		if err != nil || len(services["web"]) != 1 {
			t.Fatalf("Services = %v, %v", services, err)
		}
		byTag, _, err := client.Catalog().Service("web", "v1", nil)
		if err != nil || len(byTag) != 1 || byTag[0].ServicePort != 80 {
			t.Fatalf("Service(tag) = %+v, %v", byTag, err)
		}
		none, _, err := client.Catalog().Service("web", "v2", nil)
		if err != nil || len(none) != 0 {
			t.Fatalf("Service(other tag) = %+v, %v", none, err)
		}
		node, _, err := client.Catalog().Node("n1", nil)
		if err != nil || node == nil || node.Services["web"] == nil {
			t.Fatalf("Node = %+v, %v", node, err)
		}
		ghost, _, err := client.Catalog().Node("ghost", nil)
		if err != nil || ghost != nil {
			t.Fatalf("Node(ghost) = %+v, %v", ghost, err)
		}
		list, meta, err := client.Catalog().NodeServiceList("n1", nil)
		if err != nil || list == nil || list.Node == nil || list.Node.Node != "n1" || len(list.Services) != 1 || list.Services[0].Service != "web" || meta.LastIndex == 0 {
			t.Fatalf("NodeServiceList = %+v, %+v, %v", list, meta, err)
		}
		ghostList, _, err := client.Catalog().NodeServiceList("ghost", nil)
		if err != nil || ghostList == nil || ghostList.Node != nil || ghostList.Services == nil || len(ghostList.Services) != 0 {
			t.Fatalf("NodeServiceList(ghost) = %+v, %v", ghostList, err)
		}
		entries, _, err := client.Health().Service("web", "", true, nil)
		if err != nil || len(entries) != 1 || entries[0].Checks.AggregatedStatus() != api.HealthPassing {
			t.Fatalf("Health.Service = %+v, %v", entries, err)
		}
		if _, err := client.Catalog().Register(&api.CatalogRegistration{Address: "x"}, nil); err == nil || !strings.Contains(err.Error(), "Must provide node") {
			t.Fatalf("Register without node: %v", err)
		}
	})

	t.Run("status and agent", func(t *testing.T) {
		leader, err := client.Status().Leader()
		if err != nil || leader != "127.0.0.1:8300" {
			t.Fatalf("Leader = %q, %v", leader, err)
		}
		self, err := client.Agent().Self()
		if err != nil || self["Config"]["NodeName"] != testNode || self["Member"]["Name"] != testNode {
			t.Fatalf("Self = %v, %v", self, err)
		}
	})
}

// TestReadHeadersOnTheWire reads a KV miss as raw bytes: the 404 must carry
// all three read headers. net/http writes header fields sorted by name, as
// it does for Consul, so X-Consul-Index comes first of the three.
func TestReadHeadersOnTheWire(t *testing.T) {
	srv, _, _ := newTestServer(t, func(f *fakeRPC, _ *Config) {
		f.replies[structs.MethodKVSGet.Name()] = structs.IndexedDirEntries{QueryMeta: structs.QueryMeta{Index: 0, LastContact: 3 * time.Millisecond}}
	})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET /v1/kv/missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) == 0 || lines[0] != "HTTP/1.1 404 Not Found" {
		t.Fatalf("response: %q", lines)
	}
	pos := map[string]int{}
	for i, l := range lines {
		if name, value, ok := strings.Cut(l, ": "); ok && strings.HasPrefix(name, "X-Consul-") {
			pos[name+"="+value] = i
		}
	}
	idx, ok1 := pos["X-Consul-Index=1"]
	lc, ok2 := pos["X-Consul-Lastcontact=3"]
	kl, ok3 := pos["X-Consul-Knownleader=false"]
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("missing read headers in %q", lines)
	}
	if idx > lc || idx > kl {
		t.Fatalf("X-Consul-Index is not first: %q", lines)
	}
	for i, l := range lines {
		if l == "" && i != len(lines)-1 {
			t.Fatalf("404 has a body: %q", lines[i+1:])
		}
	}
	if !contains(lines, "Content-Length: 0") {
		t.Fatalf("404 is not empty: %q", lines)
	}
}
