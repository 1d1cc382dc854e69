package server

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func txnApply(t *testing.T, s *Server, args *structs.TxnRequest) structs.TxnResponse {
	t.Helper()
	var reply structs.TxnResponse
	rpc(t, s, structs.MethodTxnApply, args, &reply)
	return reply
}

// TestTxnCatalog runs catalog transactions through a follower, so that
// every operation and result kind crosses the internal RPC and the Raft
// log: they commit all or nothing, are applied once however often they
// are sent, wake the catalog's blocking queries, and read without Raft.
func TestTxnCatalog(t *testing.T) {
	servers := startTestCluster(t, 3, false)
	leader := waitForLeader(t, servers, 30*time.Second)
	var follower *Server
	for _, ts := range servers {
		if ts != leader {
			follower = ts.srv
			break
		}
	}

	// A client's blocking health query loop on web, started before the
	// instance exists. Until web has an index key of its own the query
	// watches the whole tables, so the leader registering the servers may
	// wake it first: the loop blocks again, as a client would.
	var health structs.IndexedCheckServiceNodes
	rpc(t, follower, structs.MethodHealthServiceNodes, &structs.ServiceSpecificRequest{ServiceName: "web"}, &health)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	woke := make(chan structs.IndexedCheckServiceNodes, 1)
	go func() {
		index := health.Index
		for ctx.Err() == nil {
			var out structs.IndexedCheckServiceNodes
			err := structs.MethodHealthServiceNodes.Call(ctx, follower, &structs.ServiceSpecificRequest{ServiceName: "web",
				QueryOptions: structs.QueryOptions{MinQueryIndex: index, MaxQueryTime: 30 * time.Second}}, &out)
			if err == nil && len(out.Nodes) > 0 {
				woke <- out
				return
			}
			index = max(index, out.Index)
		}
	}()

	register := &structs.TxnRequest{
		Ops: structs.TxnOps{
			{Node: &structs.TxnNodeOp{Verb: structs.CatalogSet, Node: structs.Node{Node: "n1", Address: "10.0.0.1", Meta: map[string]string{"rack": "r1"}}}},
			{Service: &structs.TxnServiceOp{Verb: structs.CatalogSet, Node: "n1", Service: structs.NodeService{Service: "web", Port: 80, Tags: []string{"v1"}}}},
			{Check: &structs.TxnCheckOp{Verb: structs.CatalogSet, Check: structs.HealthCheck{Node: "n1", Name: "web-alive", ServiceID: "web", Status: structs.HealthPassing}}},
			{KV: &structs.TxnKVOp{Verb: structs.KVSet, DirEnt: structs.DirEntry{Key: "web/config", Value: []byte("x")}}},
		},
		WriteRequest: structs.WriteRequest{RequestID: "txn-register-1"},
	}
	first := txnApply(t, follower, register)
	if len(first.Errors) != 0 || len(first.Results) != 4 {
		t.Fatalf("register: %+v", first)
	}
	n, svc, chk := first.Results[0].Node, first.Results[1].Service, first.Results[2].Check
	if n == nil || n.Meta["rack"] != "r1" || svc == nil || svc.ID != "web" || svc.Tags[0] != "v1" ||
		chk == nil || chk.CheckID != "web-alive" || chk.ServiceName != "web" || n.ModifyIndex != svc.ModifyIndex || svc.ModifyIndex != chk.ModifyIndex {
		t.Fatalf("register results: %+v %+v %+v", n, svc, chk)
	}
	select {
	case out := <-woke:
		if len(out.Nodes) != 1 || out.Nodes[0].Node.Node != "n1" || len(out.Nodes[0].Checks) != 1 {
			t.Fatalf("blocking health query woke with %+v", out.Nodes)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the transaction did not wake the blocking health query")
	}

	// A retry of the same write (same request ID) is answered from the
	// record and changes nothing.
	before := leader.srv.fsm.State().LastIndex()
	if again := txnApply(t, leader.srv, register); !reflect.DeepEqual(again.Results, first.Results) {
		t.Fatalf("retry answered %+v, first answer %+v", again.Results, first.Results)
	}
	if got := leader.srv.fsm.State().LastIndex(); got != before {
		t.Fatalf("retry moved the index from %d to %d", before, got)
	}

	// A failing CAS rolls back a mixed transaction: nothing changes.
	failed := txnApply(t, follower, &structs.TxnRequest{Ops: structs.TxnOps{
		{KV: &structs.TxnKVOp{Verb: structs.KVDelete, DirEnt: structs.DirEntry{Key: "web/config"}}},
		{Service: &structs.TxnServiceOp{Verb: structs.CatalogDelete, Node: "n1", Service: structs.NodeService{ID: "web", Service: "web"}}},
		{Node: &structs.TxnNodeOp{Verb: structs.CatalogCAS, Node: structs.Node{Node: "n1", Address: "10.0.0.2", RaftIndex: structs.RaftIndex{ModifyIndex: n.ModifyIndex + 100}}}},
	}})
	if failed.Results != nil || len(failed.Errors) != 1 || failed.Errors[0].OpIndex != 2 || failed.Errors[0].What != `failed to set node "n1", index is stale` {
		t.Fatalf("failed CAS: %+v", failed)
	}
	if got := leader.srv.fsm.State().LastIndex(); got != before {
		t.Fatalf("a rolled-back transaction moved the index from %d to %d", before, got)
	}

	// The server's pre-checks refuse bad operations before Raft, each
	// named by its index.
	refused := txnApply(t, follower, &structs.TxnRequest{Ops: structs.TxnOps{
		{Node: &structs.TxnNodeOp{Verb: structs.CatalogGet, Node: structs.Node{Node: "n1"}}},
		{Node: &structs.TxnNodeOp{Verb: structs.CatalogSet, Node: structs.Node{ID: "nope", Node: "n2"}}},
		{Service: &structs.TxnServiceOp{Verb: structs.CatalogSet, Node: "n1", Service: structs.NodeService{ID: "db1"}}},
		{Check: &structs.TxnCheckOp{Verb: structs.CatalogSet, Check: structs.HealthCheck{Node: "n1", CheckID: "c", Status: "bogus"}}},
		{Node: &structs.TxnNodeOp{Verb: structs.CatalogDelete}},
	}})
	wantErrs := structs.TxnErrors{
		{OpIndex: 1, What: "Bad node ID: uuid string is wrong length"},
		{OpIndex: 2, What: "Must provide service name with ID"},
		{OpIndex: 3, What: `Invalid check status: "bogus"`},
		{OpIndex: 4, What: "Must provide node"},
	}
	if refused.Results != nil || !reflect.DeepEqual(refused.Errors, wantErrs) {
		t.Fatalf("pre-checks: %+v", refused)
	}
	if got := leader.srv.fsm.State().LastIndex(); got != before {
		t.Fatalf("a refused transaction moved the index from %d to %d", before, got)
	}

	// Only gets: a read, served by the follower itself when stale.
	var read structs.TxnResponse
	rpc(t, follower, structs.MethodTxnRead, &structs.TxnReadRequest{Ops: structs.TxnOps{
		{Node: &structs.TxnNodeOp{Verb: structs.CatalogGet, Node: structs.Node{Node: "n1"}}},
		{Service: &structs.TxnServiceOp{Verb: structs.CatalogGet, Node: "n1", Service: structs.NodeService{ID: "web"}}},
		{Check: &structs.TxnCheckOp{Verb: structs.CatalogGet, Check: structs.HealthCheck{Node: "n1", CheckID: "web-alive"}}},
		{KV: &structs.TxnKVOp{Verb: structs.KVGet, DirEnt: structs.DirEntry{Key: "web/config"}}},
	}, QueryOptions: structs.QueryOptions{AllowStale: true}}, &read)
	if len(read.Errors) != 0 || len(read.Results) != 4 || read.Results[0].Node.Address != "10.0.0.1" ||
		read.Results[1].Service.Port != 80 || read.Results[2].Check.Status != structs.HealthPassing || string(read.Results[3].KV.Value) != "x" {
		t.Fatalf("read: %+v", read)
	}
	err := structs.MethodTxnRead.Call(context.Background(), follower, &structs.TxnReadRequest{Ops: structs.TxnOps{
		{Check: &structs.TxnCheckOp{Verb: structs.CatalogDelete, Check: structs.HealthCheck{Node: "n1", CheckID: "web-alive"}}},
	}}, &read)
	if err == nil {
		t.Fatal("Txn.Read accepted a delete")
	}

	// Deleting the node through a transaction, with a session on it.
	var sessionID string
	rpc(t, follower, structs.MethodSessionApply, &structs.SessionRequest{Op: structs.SessionCreate, Session: structs.Session{Node: "n1"}}, &sessionID)
	deleted := txnApply(t, follower, &structs.TxnRequest{Ops: structs.TxnOps{
		{Session: &structs.TxnSessionOp{Verb: structs.TxnSessionDelete, Session: structs.Session{ID: sessionID}}},
		{Node: &structs.TxnNodeOp{Verb: structs.CatalogDeleteCAS, Node: structs.Node{Node: "n1", RaftIndex: n.RaftIndex}}},
	}})
	if len(deleted.Errors) != 0 || len(deleted.Results) != 0 {
		t.Fatalf("delete: %+v", deleted)
	}
	rpc(t, follower, structs.MethodHealthServiceNodes, &structs.ServiceSpecificRequest{ServiceName: "web"}, &health)
	if len(health.Nodes) != 0 {
		t.Fatalf("web after its node was deleted: %+v", health.Nodes)
	}
}
