package state

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// richStore fills every table, with values in every nested field, and
// exercises updates and deletes so that indexes, tombstones and pruned
// keys all differ from the trivial case.
func richStore(t *testing.T) *Store {
	t.Helper()
	s := watchFixture(t)
	must(t, s.EnsureRegistration(20, &structs.RegisterRequest{
		ID: "2f4a1c0e-0000-4000-8000-000000000001", Node: "c", Address: "10.1.0.3",
		TaggedAddresses: map[string]string{"lan": "10.1.0.3", "wan": "1.2.3.4"},
		NodeMeta:        map[string]string{"env": "prod"},
		WriteRequest:    structs.WriteRequest{Datacenter: "dc1"},
		Service: &structs.NodeService{
			Kind: structs.ServiceKindConnectProxy, ID: "api-proxy", Service: "api-sidecar-proxy",
			Tags: []string{"t1", "t2"}, Address: "10.1.0.3", Port: 21000,
			TaggedAddresses: map[string]structs.ServiceAddress{"lan_ipv4": {Address: "10.1.0.3", Port: 21000}},
			Meta:            map[string]string{"version": "2"},
			Weights:         &structs.Weights{Passing: 3, Warning: 1},
			Proxy: structs.ConnectProxyConfig{
				DestinationServiceName: "api", DestinationServiceID: "api1", LocalServicePort: 8080,
				Config: map[string]interface{}{"protocol": "http", "nested": map[string]interface{}{"list": []interface{}{"a", 1.0}}},
				Upstreams: []structs.Upstream{{DestinationName: "db", LocalBindPort: 9191,
					Config: map[string]interface{}{"connect_timeout_ms": 500.0}}},
				Expose: structs.ExposeConfig{Checks: true, Paths: []structs.ExposePath{{Path: "/health", ListenerPort: 21500}}},
			},
		},
		Checks: structs.HealthChecks{
			{CheckID: "api-http", Name: "HTTP", ServiceID: "api-proxy", Status: structs.HealthPassing, Output: "ok",
				Definition: structs.HealthCheckDefinition{HTTP: "http://x/health", Header: map[string][]string{"X": {"1", "2"}},
					Interval: structs.Duration(10 * time.Second)}},
		},
	}))
	must(t, s.EnsureService(21, "c", &structs.NodeService{ID: "api1", Service: "api", Connect: structs.ServiceConnect{Native: true}}))
	// Churn: renames, deletes, tombstones, a deleted node and a reaped
	// tombstone.
	must(t, s.EnsureService(22, "b", &structs.NodeService{ID: "db1", Service: "database", Tags: []string{"primary"}}))
	registerNode(t, s, 23, "gone")
	registerService(t, s, 24, "gone", "tmp", "tmp")
	must(t, s.DeleteNode(25, "gone"))
	must(t, s.KVSDelete(26, "app/x"))
	must(t, s.KVSSet(27, &structs.DirEntry{Key: "flags", Flags: 99, Value: []byte{0, 1, 2}}))
	must(t, s.KVSSet(28, &structs.DirEntry{Key: "empty"}))
	must(t, s.KVSDelete(29, "other"))
	must(t, s.ReapTombstones(30, 26))
	must(t, s.SessionCreate(31, &structs.Session{ID: "del", Name: "n", Node: "c", Behavior: structs.SessionKeysDelete,
		LockDelay: 15 * time.Second, TTL: "30s", NodeChecks: []string{}, ServiceChecks: []structs.ServiceCheck{{ID: "api-http"}}}))
	mustOK(t)(s.KVSLock(32, &structs.DirEntry{Key: "ephemeral", Value: []byte("x"), Session: "del"}))
	caFixture(t, s, 33)          // connect_ca_test.go
	configEntryFixture(t, s, 40) // config_entry_test.go
	coordinateFixture(t, s, 45)  // coordinates_test.go
	gatewayFixture(t, s, 46)     // gateway_services_test.go
	must(t, s.PreparedQuerySet(48, &structs.PreparedQuery{ID: "pq1", Name: "web", Session: "del",
		Service: structs.ServiceQuery{Service: "web", Tags: []string{"v1", "!v2"}, NodeMeta: map[string]string{"k": "v"}, Failover: structs.QueryFailoverOptions{NearestN: 2, Datacenters: []string{"dc2"}}},
		DNS:     structs.QueryDNSOptions{TTL: "10s"}}))
	must(t, s.PreparedQuerySet(49, &structs.PreparedQuery{ID: "pq2", Name: "geo-",
		Template: structs.QueryTemplateOptions{Type: structs.QueryTemplateTypeNamePrefixMatch, Regexp: "^geo-(.*)$"}, Service: structs.ServiceQuery{Service: "${match(1)}"}}))
	ap := structs.DefaultAutopilotConfig()
	ap.RedundancyZoneTag = "zone"
	must(t, s.AutopilotSetConfig(50, &ap))
	exp := time.Unix(2_000_000_000, 0).UTC()
	must(t, s.ACLPolicyBatchSet(51, []*structs.ACLPolicy{{ID: "p1", Name: "ops", Rules: `key "" { policy = "read" }`, Datacenters: []string{"dc1"}}}))
	must(t, s.ACLRoleBatchSet(52, []*structs.ACLRole{{ID: "r1", Name: "ops-role", Policies: []structs.ACLLink{{ID: "p1"}}}}))
	must(t, s.ACLBootstrap(53, 0, &structs.ACLToken{AccessorID: "a1", SecretID: "s1", Policies: []structs.ACLLink{{ID: "p1"}},
		Roles: []structs.ACLLink{{ID: "r1"}}, ExpirationTime: &exp}))
	must(t, s.RecordAppliedRequest(AppliedRequest{ID: "req-1", ProposedAt: 1_000, Result: structs.RecordResult(true)}))
	must(t, s.RecordAppliedRequest(AppliedRequest{ID: "req-2", ProposedAt: 2_000, Result: structs.RecordResult(&structs.TxnResponse{
		Results: structs.TxnResults{{KV: &structs.DirEntry{Key: "k", Value: []byte("v")}}}})}))
	return s
}

// dumpTables reads every row of every table in the schema.
func dumpTables(t *testing.T, s *Store) map[string][]interface{} {
	t.Helper()
	tx := s.db.Txn(false)
	defer tx.Abort()
	out := make(map[string][]interface{})
	for name := range schema().Tables {
		it, err := tx.Get(name, indexID)
		must(t, err)
		rows := []interface{}{}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			rows = append(rows, raw)
		}
		out[name] = rows
	}
	return out
}

// restoreFrom streams a snapshot of src into a fresh store the way the FSM
// does; indexesFirst puts the Index records before everything else.
func restoreFrom(t *testing.T, src *Store, indexesFirst bool) *Store {
	t.Helper()
	sn := src.Snapshot()
	defer sn.Close()
	dst := NewStore()
	r := dst.Restore()
	defer r.Abort()

	indexes, err := sn.Indexes()
	must(t, err)
	restoreIndexes := func() {
		for _, e := range indexes {
			must(t, r.Index(e))
		}
	}
	if indexesFirst {
		restoreIndexes()
	}
	nodes, err := sn.Nodes()
	must(t, err)
	for _, n := range nodes {
		must(t, r.Node(n))
		svcs, err := sn.Services(n.Node)
		must(t, err)
		for _, svc := range svcs {
			must(t, r.Service(n.Node, svc))
		}
		checks, err := sn.Checks(n.Node)
		must(t, err)
		for _, c := range checks {
			must(t, r.Check(c))
		}
	}
	kvs, err := sn.KVs()
	must(t, err)
	for _, e := range kvs {
		must(t, r.KV(e))
	}
	stones, err := sn.Tombstones()
	must(t, err)
	for _, st := range stones {
		must(t, r.Tombstone(st))
	}
	sessions, err := sn.Sessions()
	must(t, err)
	for _, sess := range sessions {
		must(t, r.Session(sess))
	}
	restoreCA(t, sn, r)            // connect_ca_test.go
	restoreConfigEntries(t, sn, r) // config_entry_test.go
	coords, err := sn.Coordinates()
	must(t, err)
	must(t, r.Coordinates(coords))
	queries, err := sn.PreparedQueries()
	must(t, err)
	for _, q := range queries {
		must(t, r.PreparedQuery(q))
	}
	vips, err := sn.VirtualIPs()
	must(t, err)
	for _, v := range vips {
		must(t, r.VirtualIP(v))
	}
	ap, err := sn.AutopilotConfig()
	must(t, err)
	must(t, r.AutopilotConfig(ap))
	pols, err := sn.ACLPolicies()
	must(t, err)
	for _, p := range pols {
		must(t, r.ACLPolicy(p))
	}
	roles, err := sn.ACLRoles()
	must(t, err)
	for _, ro := range roles {
		must(t, r.ACLRole(ro))
	}
	toks, err := sn.ACLTokens()
	must(t, err)
	for _, tk := range toks {
		must(t, r.ACLToken(tk))
	}
	reqs, err := sn.AppliedRequests()
	must(t, err)
	for _, a := range reqs {
		must(t, r.AppliedRequest(a))
	}
	if !indexesFirst {
		restoreIndexes()
	}
	must(t, r.Commit())
	return dst
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := richStore(t)
	want := dumpTables(t, src)
	for name, rows := range want {
		if len(rows) == 0 {
			t.Fatalf("fixture leaves table %q empty: the round trip would prove nothing for it", name)
		}
	}
	if len(want[tableTombstones]) != 1 {
		t.Fatalf("tombstones = %v, want only the unreaped one", want[tableTombstones])
	}
	for _, indexesFirst := range []bool{false, true} {
		dst := restoreFrom(t, src, indexesFirst)
		got := dumpTables(t, dst)
		for name := range want {
			if !reflect.DeepEqual(got[name], want[name]) {
				t.Errorf("indexesFirst=%v: table %q differs after restore:\n got %s\nwant %s",
					indexesFirst, name, dump(got[name]), dump(want[name]))
			}
		}
		if dst.LastIndex() != src.LastIndex() {
			t.Errorf("LastIndex %d, want %d", dst.LastIndex(), src.LastIndex())
		}
		// Reads answer the same on both, indexes included.
		for _, svc := range []string{"web", "api", "database", "legacy", "missing"} {
			for _, connect := range []bool{false, true} {
				i1, r1, err1 := src.CheckServiceNodes(nil, svc, nil, connect)
				i2, r2, err2 := dst.CheckServiceNodes(nil, svc, nil, connect)
				must(t, err1)
				must(t, err2)
				if i1 != i2 || !reflect.DeepEqual(r1, r2) {
					t.Errorf("CheckServiceNodes(%s, connect=%v) differs: %d vs %d", svc, connect, i1, i2)
				}
			}
		}
	}
}

func dump(v interface{}) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSnapshotIsConsistent(t *testing.T) {
	s := richStore(t)
	sn := s.Snapshot()
	defer sn.Close()
	before := sn.LastIndex()
	must(t, s.KVSSet(100, kv("after", "snapshot")))
	must(t, s.DeleteNode(101, "c"))
	kvs, _ := sn.KVs()
	for _, e := range kvs {
		if e.Key == "after" {
			t.Fatal("snapshot sees a later write")
		}
	}
	if nodes, _ := sn.Nodes(); len(nodes) != 3 || sn.LastIndex() != before {
		t.Fatalf("snapshot nodes = %d, LastIndex %d (was %d)", len(nodes), sn.LastIndex(), before)
	}
	if svcs, _ := sn.Services("c"); len(svcs) != 2 {
		t.Fatalf("snapshot services of c = %d", len(svcs))
	}
}

func TestRestoreSwapWakesBlockingQueries(t *testing.T) {
	old := richStore(t)
	ws := memdb.NewWatchSet()
	ws.Add(old.AbandonCh())
	_, _, err := old.KVSGet(ws, "flags")
	must(t, err)

	fresh := restoreFrom(t, old, false)
	old.Abandon() // what the FSM does after swapping the new store in
	if !fires(ws) {
		t.Fatal("blocking query on the old store did not wake on restore")
	}
	idx, e, err := fresh.KVSGet(nil, "flags")
	must(t, err)
	if e == nil || e.Flags != 99 || idx == 0 {
		t.Fatalf("restored entry = %+v idx %d", e, idx)
	}
}

func TestRestoreAbort(t *testing.T) {
	s := NewStore()
	r := s.Restore()
	must(t, r.Node(testNode("n", "1.1.1.1")))
	must(t, r.Index(IndexEntry{Key: tableNodes, Value: 9}))
	r.Abort()
	if _, nodes, _ := s.Nodes(nil, nil); len(nodes) != 0 || s.LastIndex() != 0 {
		t.Fatal("aborted restore left data behind")
	}
	// The store is usable afterwards (the write lock was released).
	registerNode(t, s, 1, "n")
}

func TestRecordTypesEncode(t *testing.T) {
	for _, v := range []interface{}{Tombstone{Key: "k", Index: 3}, IndexEntry{Key: "kvs", Value: 4}} {
		b, err := json.Marshal(v)
		must(t, err)
		p := reflect.New(reflect.TypeOf(v))
		must(t, json.Unmarshal(b, p.Interface()))
		if !reflect.DeepEqual(p.Elem().Interface(), v) {
			t.Fatalf("round trip of %T: %s", v, b)
		}
	}
}
