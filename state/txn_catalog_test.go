package state

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

const testNodeID = "67539c9d-b948-ba67-edd4-d07a676d6673"

// catalogTxnFixture is txnFixture with node n1 (given an ID at 7), the
// service web1 on it (8) and its check chk (9).
func catalogTxnFixture(t *testing.T) *Store {
	t.Helper()
	s := txnFixture(t)
	must(t, s.EnsureNode(7, &structs.Node{ID: testNodeID, Node: "n1", Address: "10.0.0.n1"}))
	registerService(t, s, 8, "n1", "web1", "web")
	registerCheck(t, s, 9, "n1", "chk", "web1", structs.HealthPassing)
	return s
}

func nodeOp(verb structs.CatalogOp, n structs.Node) *structs.TxnOp {
	return &structs.TxnOp{Node: &structs.TxnNodeOp{Verb: verb, Node: n}}
}

func serviceOp(verb structs.CatalogOp, node string, svc structs.NodeService) *structs.TxnOp {
	return &structs.TxnOp{Service: &structs.TxnServiceOp{Verb: verb, Node: node, Service: svc}}
}

func checkOp(verb structs.CatalogOp, c structs.HealthCheck) *structs.TxnOp {
	return &structs.TxnOp{Check: &structs.TxnCheckOp{Verb: verb, Check: c}}
}

func sessionOp(verb structs.TxnSessionVerb, id string) *structs.TxnOp {
	return &structs.TxnOp{Session: &structs.TxnSessionOp{Verb: verb, Session: structs.Session{ID: id}}}
}

func at(modify uint64) structs.RaftIndex { return structs.RaftIndex{ModifyIndex: modify} }

// describeResult names a result's entity with its indexes.
func describeResult(r *structs.TxnResult) string {
	switch {
	case r.Node != nil:
		return fmt.Sprintf("node %s %s %d/%d", r.Node.Node, r.Node.Address, r.Node.CreateIndex, r.Node.ModifyIndex)
	case r.Service != nil:
		return fmt.Sprintf("service %s %s %d %d/%d", r.Service.ID, r.Service.Service, r.Service.Port, r.Service.CreateIndex, r.Service.ModifyIndex)
	case r.Check != nil:
		return fmt.Sprintf("check %s %s %s %d/%d", r.Check.CheckID, r.Check.ServiceName, r.Check.Status, r.Check.CreateIndex, r.Check.ModifyIndex)
	}
	return fmt.Sprintf("other %+v", r)
}

func TestTxnCatalogVerbs(t *testing.T) {
	web := func(port int, idx structs.RaftIndex) structs.NodeService {
		return structs.NodeService{ID: "web1", Service: "web", Port: port, RaftIndex: idx}
	}
	chk := func(status string, idx structs.RaftIndex) structs.HealthCheck {
		return structs.HealthCheck{Node: "n1", CheckID: "chk", Name: "chk", ServiceID: "web1", Status: status, RaftIndex: idx}
	}
	cases := []struct {
		name    string
		op      *structs.TxnOp
		want    []string // described results
		wantErr string
		check   func(t *testing.T, s *Store) // the state afterwards
	}{
		{name: "node get", op: nodeOp(structs.CatalogGet, structs.Node{Node: "n1"}), want: []string{"node n1 10.0.0.n1 4/7"}},
		{name: "node get by ID", op: nodeOp(structs.CatalogGet, structs.Node{ID: testNodeID, Node: "other"}), want: []string{"node n1 10.0.0.n1 4/7"}},
		{name: "node get missing", op: nodeOp(structs.CatalogGet, structs.Node{Node: "nx"}), wantErr: `node "nx" doesn't exist`},
		{name: "node set new", op: nodeOp(structs.CatalogSet, structs.Node{Node: "n2", Address: "10.0.0.2"}), want: []string{"node n2 10.0.0.2 10/10"}},
		{name: "node set existing", op: nodeOp(structs.CatalogSet, structs.Node{ID: testNodeID, Node: "n1", Address: "10.1.1.1"}), want: []string{"node n1 10.1.1.1 4/10"}},
		{name: "node cas", op: nodeOp(structs.CatalogCAS, structs.Node{ID: testNodeID, Node: "n1", Address: "10.1.1.1", RaftIndex: at(7)}), want: []string{"node n1 10.1.1.1 4/10"}},
		{name: "node cas create", op: nodeOp(structs.CatalogCAS, structs.Node{Node: "n2", Address: "10.0.0.2"}), want: []string{"node n2 10.0.0.2 10/10"}},
		{name: "node cas create exists", op: nodeOp(structs.CatalogCAS, structs.Node{Node: "n1", Address: "10.1.1.1"}), wantErr: `failed to set node "n1", index is stale`},
		{name: "node cas stale", op: nodeOp(structs.CatalogCAS, structs.Node{Node: "n1", Address: "10.1.1.1", RaftIndex: at(4)}), wantErr: `failed to set node "n1", index is stale`},
		{name: "node cas missing", op: nodeOp(structs.CatalogCAS, structs.Node{Node: "nx", Address: "10.1.1.1", RaftIndex: at(4)}), wantErr: `failed to set node "nx", index is stale`},
		{name: "node set without name", op: nodeOp(structs.CatalogSet, structs.Node{Address: "10.1.1.1"}), wantErr: "Must provide node"},
		{
			name: "node delete takes services, checks and sessions", op: nodeOp(structs.CatalogDelete, structs.Node{Node: "n1"}),
			check: func(t *testing.T, s *Store) {
				_, svcs, _ := s.ServiceNodes(nil, "web", nil, false)
				_, checks, _ := s.NodeChecks(nil, "n1")
				_, sess, _ := s.SessionGet(nil, "s1")
				if len(svcs) != 0 || len(checks) != 0 || sess != nil {
					t.Fatalf("left services %v checks %v session %v", svcs, checks, sess)
				}
			},
		},
		{name: "node delete missing", op: nodeOp(structs.CatalogDelete, structs.Node{Node: "nx"})},
		{name: "node delete-cas", op: nodeOp(structs.CatalogDeleteCAS, structs.Node{Node: "n1", RaftIndex: at(7)})},
		{name: "node delete-cas stale", op: nodeOp(structs.CatalogDeleteCAS, structs.Node{Node: "n1", RaftIndex: at(4)}), wantErr: `failed to delete node "n1", index is stale`},
		{name: "node delete-cas missing", op: nodeOp(structs.CatalogDeleteCAS, structs.Node{Node: "nx", RaftIndex: at(4)}), wantErr: `failed to delete node "nx", index is stale`},
		{name: "node unknown verb", op: nodeOp("frob", structs.Node{Node: "n1"}), wantErr: `unknown Node verb "frob"`},

		{name: "service get", op: serviceOp(structs.CatalogGet, "n1", structs.NodeService{ID: "web1"}), want: []string{"service web1 web 8080 8/8"}},
		{name: "service get takes no ID from the name", op: serviceOp(structs.CatalogGet, "n1", structs.NodeService{Service: "web"}), wantErr: `service "" on node "n1" doesn't exist`},
		{name: "service get missing", op: serviceOp(structs.CatalogGet, "n1", structs.NodeService{ID: "db1"}), wantErr: `service "db1" on node "n1" doesn't exist`},
		{name: "service set", op: serviceOp(structs.CatalogSet, "n1", web(9090, at(0))), want: []string{"service web1 web 9090 8/10"}},
		{name: "service set, ID from name", op: serviceOp(structs.CatalogSet, "n1", structs.NodeService{Service: "db", Port: 5432}), want: []string{"service db db 5432 10/10"}},
		{name: "service set on missing node", op: serviceOp(structs.CatalogSet, "nx", web(9090, at(0))), wantErr: "Missing node registration"},
		{name: "service cas", op: serviceOp(structs.CatalogCAS, "n1", web(9090, at(8))), want: []string{"service web1 web 9090 8/10"}},
		{name: "service cas stale", op: serviceOp(structs.CatalogCAS, "n1", web(9090, at(7))), wantErr: `failed to set service "web1" on node "n1", index is stale`},
		{name: "service cas create exists", op: serviceOp(structs.CatalogCAS, "n1", web(9090, at(0))), wantErr: `failed to set service "web1" on node "n1", index is stale`},
		{
			name: "service delete takes its checks", op: serviceOp(structs.CatalogDelete, "n1", web(0, at(0))),
			check: func(t *testing.T, s *Store) {
				if _, checks, _ := s.NodeChecks(nil, "n1"); len(checks) != 0 {
					t.Fatalf("left checks %v", checks)
				}
			},
		},
		{name: "service delete missing", op: serviceOp(structs.CatalogDelete, "n1", structs.NodeService{ID: "db1", Service: "db"})},
		{name: "service delete-cas", op: serviceOp(structs.CatalogDeleteCAS, "n1", web(0, at(8)))},
		{name: "service delete-cas stale", op: serviceOp(structs.CatalogDeleteCAS, "n1", web(0, at(9))), wantErr: `failed to delete service "web1" on node "n1", index is stale`},
		{name: "service delete-cas missing", op: serviceOp(structs.CatalogDeleteCAS, "n2", web(0, at(8))), wantErr: `failed to delete service "web1" on node "n2", index is stale`},
		{name: "service unknown verb", op: serviceOp("frob", "n1", web(0, at(0))), wantErr: `unknown Service verb "frob"`},

		{name: "check get", op: checkOp(structs.CatalogGet, structs.HealthCheck{Node: "n1", CheckID: "chk"}), want: []string{"check chk web passing 9/9"}},
		{name: "check get missing", op: checkOp(structs.CatalogGet, structs.HealthCheck{Node: "n1", CheckID: "cx"}), wantErr: `check "cx" on node "n1" doesn't exist`},
		{name: "check set", op: checkOp(structs.CatalogSet, chk(structs.HealthWarning, at(0))), want: []string{"check chk web warning 9/10"}},
		{name: "check set for missing service", op: checkOp(structs.CatalogSet, structs.HealthCheck{Node: "n1", CheckID: "c2", ServiceID: "db1"}), wantErr: "Missing service registration"},
		{name: "check cas", op: checkOp(structs.CatalogCAS, chk(structs.HealthWarning, at(9))), want: []string{"check chk web warning 9/10"}},
		{name: "check cas stale", op: checkOp(structs.CatalogCAS, chk(structs.HealthWarning, at(8))), wantErr: `failed to set check "chk" on node "n1", index is stale`},
		{name: "check cas missing", op: checkOp(structs.CatalogCAS, structs.HealthCheck{Node: "n1", CheckID: "cx", RaftIndex: at(8)}), wantErr: `failed to set check "cx" on node "n1", index is stale`},
		{name: "check delete", op: checkOp(structs.CatalogDelete, chk("", at(0)))},
		{name: "check delete missing", op: checkOp(structs.CatalogDelete, structs.HealthCheck{Node: "n1", CheckID: "cx"})},
		{name: "check delete-cas", op: checkOp(structs.CatalogDeleteCAS, chk("", at(9)))},
		{name: "check delete-cas stale", op: checkOp(structs.CatalogDeleteCAS, chk("", at(1))), wantErr: `failed to delete check "chk" on node "n1", index is stale`},
		{name: "check unknown verb", op: checkOp("frob", chk("", at(0))), wantErr: `unknown Check verb "frob"`},

		{
			name: "session delete releases its locks", op: sessionOp(structs.TxnSessionDelete, "s1"),
			check: func(t *testing.T, s *Store) {
				_, e, _ := s.KVSGet(nil, "locked")
				if _, sess, _ := s.SessionGet(nil, "s1"); sess != nil || e.Session != "" {
					t.Fatalf("session %v, lock %+v", sess, e)
				}
			},
		},
		{name: "session delete missing", op: sessionOp(structs.TxnSessionDelete, "sx")},
		{name: "session unknown verb", op: sessionOp("frob", "s1"), wantErr: `failed to delete session: unknown Session verb "frob"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := catalogTxnFixture(t)
			before := s.LastIndex()
			results, errs := s.TxnRW(10, structs.TxnOps{tc.op})
			if tc.wantErr != "" {
				if len(errs) != 1 || errs[0].What != tc.wantErr || errs[0].OpIndex != 0 || results != nil {
					t.Fatalf("errs = %+v results = %+v, want %q", errs, results, tc.wantErr)
				}
				if s.LastIndex() != before {
					t.Fatal("a failed operation moved the index")
				}
				return
			}
			if len(errs) != 0 {
				t.Fatalf("errs = %+v", errs[0])
			}
			var got []string
			for _, r := range results {
				got = append(got, describeResult(r))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("results %q, want %q", got, tc.want)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

// TestTxnCatalogRollback: a mixed transaction whose CAS fails stores
// nothing, moves no index and wakes no watcher.
func TestTxnCatalogRollback(t *testing.T) {
	s := catalogTxnFixture(t)
	before := s.LastIndex()
	ws := memdb.NewWatchSet()
	_, _, err := s.CheckServiceNodes(ws, "web", nil, false)
	must(t, err)
	_, _, err = s.KVSGet(ws, "a")
	must(t, err)

	ops := structs.TxnOps{
		kvOp(structs.KVSet, structs.DirEntry{Key: "a", Value: []byte("changed")}),
		nodeOp(structs.CatalogSet, structs.Node{Node: "n2", Address: "10.0.0.2"}),
		serviceOp(structs.CatalogSet, "n2", structs.NodeService{ID: "web2", Service: "web"}),
		checkOp(structs.CatalogSet, structs.HealthCheck{Node: "n1", CheckID: "chk", ServiceID: "web1", Status: structs.HealthCritical}),
		serviceOp(structs.CatalogDelete, "n1", structs.NodeService{ID: "web1", Service: "web"}),
		sessionOp(structs.TxnSessionDelete, "s1"),
		nodeOp(structs.CatalogCAS, structs.Node{Node: "n1", Address: "10.9.9.9", RaftIndex: at(1)}),
	}
	results, errs := s.TxnRW(20, ops)
	if results != nil || len(errs) != 1 || errs[0].OpIndex != 6 || errs[0].What != `failed to set node "n1", index is stale` {
		t.Fatalf("results %+v errs %+v", results, errs)
	}
	if s.LastIndex() != before {
		t.Fatal("rolled-back transaction moved the index")
	}
	if !quiet(ws) {
		t.Fatal("rolled-back transaction woke a watcher")
	}
	_, nodes, _ := s.Nodes(nil, nil)
	_, csn, _ := s.CheckServiceNodes(nil, "web", nil, false)
	_, e, _ := s.KVSGet(nil, "a")
	_, sess, _ := s.SessionGet(nil, "s1")
	if len(nodes) != 1 || len(csn) != 1 || len(csn[0].Checks) != 1 || csn[0].Checks[0].Status != structs.HealthPassing ||
		string(e.Value) != "1" || sess == nil {
		t.Fatalf("rolled-back transaction changed the state: nodes %v instances %+v kv %+v session %v", nodes, csn, e, sess)
	}

	// With the CAS right, all of it applies at one index, later operations
	// seeing earlier ones.
	ops[6] = nodeOp(structs.CatalogCAS, structs.Node{ID: testNodeID, Node: "n1", Address: "10.9.9.9", RaftIndex: at(7)})
	results, errs = s.TxnRW(21, ops)
	if len(errs) != 0 {
		t.Fatalf("errs %+v", errs[0])
	}
	var got []string
	for _, r := range results[1:] {
		got = append(got, describeResult(r))
	}
	want := []string{"node n2 10.0.0.2 21/21", "service web2 web 0 21/21", "check chk web critical 9/21", "node n1 10.9.9.9 4/21"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("results %q, want %q", got, want)
	}
	if !fires(ws) {
		t.Fatal("committed transaction did not wake the watchers")
	}
	_, csn, _ = s.CheckServiceNodes(nil, "web", nil, false)
	if len(csn) != 1 || csn[0].Node.Node != "n2" {
		t.Fatalf("instances of web: %+v", csn)
	}
}

// TestTxnCatalogWatches: catalog operations wake the reads the catalog
// writes wake, and only those.
func TestTxnCatalogWatches(t *testing.T) {
	cases := []struct {
		name string
		read func(s *Store, ws memdb.WatchSet) error
		op   *structs.TxnOp
	}{
		{
			name: "health of a service whose instance is added",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.CheckServiceNodes(ws, "web", nil, false)
				return err
			},
			op: serviceOp(structs.CatalogSet, "n1", structs.NodeService{ID: "web2", Service: "web"}),
		},
		{
			name: "health of a service whose check changes",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.CheckServiceNodes(ws, "web", nil, false)
				return err
			},
			op: checkOp(structs.CatalogSet, structs.HealthCheck{Node: "n1", CheckID: "chk", ServiceID: "web1", Status: structs.HealthCritical}),
		},
		{
			name: "catalog nodes when one is added",
			read: func(s *Store, ws memdb.WatchSet) error { _, _, err := s.Nodes(ws, nil); return err },
			op:   nodeOp(structs.CatalogSet, structs.Node{Node: "n2", Address: "10.0.0.2"}),
		},
		{
			name: "instances of a service whose node is deleted",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.ServiceNodes(ws, "web", nil, false)
				return err
			},
			op: nodeOp(structs.CatalogDelete, structs.Node{Node: "n1"}),
		},
		{
			name: "checks in a state when one is deleted",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.ChecksInState(ws, structs.HealthPassing)
				return err
			},
			op: checkOp(structs.CatalogDelete, structs.HealthCheck{Node: "n1", CheckID: "chk"}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := catalogTxnFixture(t)
			ws := memdb.NewWatchSet()
			must(t, tc.read(s, ws))
			if _, errs := s.TxnRW(10, structs.TxnOps{kvOp(structs.KVSet, structs.DirEntry{Key: "unrelated"})}); len(errs) != 0 {
				t.Fatalf("errs %+v", errs[0])
			}
			if !quiet(ws) {
				t.Fatal("a KV transaction woke a catalog read")
			}
			if _, errs := s.TxnRW(11, structs.TxnOps{tc.op}); len(errs) != 0 {
				t.Fatalf("errs %+v", errs[0])
			}
			if !fires(ws) {
				t.Fatal("the transaction did not wake the read")
			}
		})
	}
}

func TestTxnROCatalog(t *testing.T) {
	s := catalogTxnFixture(t)
	ws := memdb.NewWatchSet()
	idx, results, errs := s.TxnRO(ws, structs.TxnOps{
		nodeOp(structs.CatalogGet, structs.Node{Node: "n1"}),
		serviceOp(structs.CatalogGet, "n1", structs.NodeService{ID: "web1"}),
		checkOp(structs.CatalogGet, structs.HealthCheck{Node: "n1", CheckID: "chk"}),
	})
	if len(errs) != 0 || len(results) != 3 || idx != 9 {
		t.Fatalf("idx %d results %d errs %+v", idx, len(results), errs)
	}
	// A result is the caller's own copy.
	results[0].Node.Meta = map[string]string{"x": "y"}
	if _, n, _ := s.GetNode(nil, "n1"); len(n.Meta) != 0 {
		t.Fatal("txn result shares memory with the store")
	}
	registerService(t, s, 12, "n1", "web1", "web", "v2")
	if !fires(ws) {
		t.Fatal("a change to a service read did not wake the read-only transaction")
	}

	for _, op := range []*structs.TxnOp{
		nodeOp(structs.CatalogSet, structs.Node{Node: "n1"}),
		serviceOp(structs.CatalogDelete, "n1", structs.NodeService{ID: "web1"}),
		checkOp(structs.CatalogCAS, structs.HealthCheck{Node: "n1", CheckID: "chk"}),
		sessionOp(structs.TxnSessionDelete, "s1"),
	} {
		_, results, errs := s.TxnRO(nil, structs.TxnOps{op})
		if results != nil || len(errs) != 1 || errs[0].OpIndex != 0 {
			t.Fatalf("write %s in a read-only transaction: results %+v errs %+v", op.Verb(), results, errs)
		}
	}
}

// TestTxnCatalogResultShapes: a service or check written without the
// fields the catalog fills in comes back as Consul shows it: weights
// {1, 1} when missing or invalid, the check's Type from its definition,
// and a UDP definition kept.
func TestTxnCatalogResultShapes(t *testing.T) {
	one := &structs.Weights{Passing: 1, Warning: 1}
	cases := []struct {
		name        string
		op          *structs.TxnOp
		wantWeights *structs.Weights
		wantType    string
		wantUDP     string
	}{
		{name: "service without weights", op: serviceOp(structs.CatalogSet, "n1", structs.NodeService{ID: "s1", Service: "s1"}), wantWeights: one},
		{name: "service with invalid weights", op: serviceOp(structs.CatalogSet, "n1", structs.NodeService{ID: "s1", Service: "s1", Weights: &structs.Weights{Passing: 0, Warning: 3}}), wantWeights: one},
		{name: "service with weights", op: serviceOp(structs.CatalogSet, "n1", structs.NodeService{ID: "s1", Service: "s1", Weights: &structs.Weights{Passing: 5, Warning: 0}}), wantWeights: &structs.Weights{Passing: 5}},
		{name: "tcp check", op: checkOp(structs.CatalogSet, structs.HealthCheck{Node: "n1", CheckID: "c", Definition: structs.HealthCheckDefinition{TCP: "1.1.1.1:80"}}), wantType: "tcp"},
		{name: "udp check keeps its target", op: checkOp(structs.CatalogSet, structs.HealthCheck{Node: "n1", CheckID: "c", Definition: structs.HealthCheckDefinition{UDP: "1.1.1.1:53"}}), wantType: "udp", wantUDP: "1.1.1.1:53"},
		{name: "given type wins", op: checkOp(structs.CatalogSet, structs.HealthCheck{Node: "n1", CheckID: "c", Type: "script", Definition: structs.HealthCheckDefinition{TCP: "1.1.1.1:80"}}), wantType: "script"},
		{name: "no definition, no type", op: checkOp(structs.CatalogSet, structs.HealthCheck{Node: "n1", CheckID: "c"}), wantType: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := catalogTxnFixture(t)
			res, errs := s.TxnRW(20, structs.TxnOps{tc.op})
			if len(errs) > 0 || len(res) != 1 {
				t.Fatalf("txn: %v %v", res, errs)
			}
			switch r := res[0]; {
			case r.Service != nil:
				if !reflect.DeepEqual(r.Service.Weights, tc.wantWeights) {
					t.Fatalf("weights %+v, want %+v", r.Service.Weights, tc.wantWeights)
				}
			case r.Check != nil:
				if r.Check.Type != tc.wantType || r.Check.Definition.UDP != tc.wantUDP {
					t.Fatalf("type %q udp %q, want %q %q", r.Check.Type, r.Check.Definition.UDP, tc.wantType, tc.wantUDP)
				}
			default:
				t.Fatalf("result %+v", r)
			}
		})
	}
}
