package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// TestTxnWithConsulClient drives /v1/txn of a -dev agent with Consul's own
// client, mixing KV and catalog operations: a committed transaction, one
// rolled back by a failing CAS, a read-only one, and the errors Consul
// gives for an unknown verb and too many operations.
func TestTxnWithConsulClient(t *testing.T) {
	_, url, stop := devAgent(t)
	defer stop()
	client, err := api.NewClient(&api.Config{Address: strings.TrimPrefix(url, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	txn, health := client.Txn(), client.Health()

	ok, resp, _, err := txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: "ext/web", Value: []byte("v1")}},
		{Node: &api.NodeTxnOp{Verb: api.NodeSet, Node: api.Node{Node: "ext1", Address: "10.0.0.1", Meta: map[string]string{"rack": "r1"}}}},
		{Service: &api.ServiceTxnOp{Verb: api.ServiceSet, Node: "ext1", Service: api.AgentService{ID: "web1", Service: "web", Port: 80}}},
		{Check: &api.CheckTxnOp{Verb: api.CheckSet, Check: api.HealthCheck{Node: "ext1", CheckID: "web1-http", Name: "web", ServiceID: "web1", Status: api.HealthPassing,
			Definition: api.HealthCheckDefinition{HTTP: "http://10.0.0.1/health", IntervalDuration: 10 * time.Second}}}},
	}, nil)
	if err != nil || !ok {
		t.Fatalf("Txn = %v, %+v, %v", ok, resp, err)
	}
	if len(resp.Results) != 4 || resp.Results[0].KV == nil || resp.Results[1].Node == nil || resp.Results[2].Service == nil || resp.Results[3].Check == nil {
		t.Fatalf("results %+v", resp.Results)
	}
	node, svc, chk := resp.Results[1].Node, resp.Results[2].Service, resp.Results[3].Check
	if node.Datacenter != "dc1" || node.Meta["rack"] != "r1" || svc.Port != 80 || chk.ServiceName != "web" ||
		chk.Definition.HTTP != "http://10.0.0.1/health" || chk.Definition.IntervalDuration != 10*time.Second ||
		node.ModifyIndex != svc.ModifyIndex || svc.ModifyIndex != chk.ModifyIndex || resp.Results[0].KV.ModifyIndex != node.ModifyIndex {
		t.Fatalf("results node %+v service %+v check %+v", node, svc, chk)
	}
	entries, meta, err := health.Service("web", "", true, nil)
	if err != nil || len(entries) != 1 || entries[0].Node.Node != "ext1" {
		t.Fatalf("passing web = %+v, %v", entries, err)
	}

	// A blocking health query wakes when a transaction changes the check.
	woke := make(chan []*api.ServiceEntry, 1)
	go func() {
		e, _, _ := health.Service("web", "", false, &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 30 * time.Second})
		woke <- e
	}()
	critical := *chk
	critical.Status = api.HealthCritical
	critical.Definition = api.HealthCheckDefinition{}
	if ok, resp, _, err := txn.Txn(api.TxnOps{{Check: &api.CheckTxnOp{Verb: api.CheckCAS, Check: critical}}}, nil); err != nil || !ok {
		t.Fatalf("check cas = %v, %+v, %v", ok, resp, err)
	}
	select {
	case e := <-woke:
		if len(e) != 1 || e[0].Checks.AggregatedStatus() != api.HealthCritical {
			t.Fatalf("blocking query woke with %+v", e)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the transaction did not wake the blocking health query")
	}

	// A failing CAS rolls everything back.
	ok, resp, _, err = txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: "ext/web", Value: []byte("v2")}},
		{Service: &api.ServiceTxnOp{Verb: api.ServiceDelete, Node: "ext1", Service: api.AgentService{ID: "web1", Service: "web"}}},
		{Node: &api.NodeTxnOp{Verb: api.NodeCAS, Node: api.Node{Node: "ext1", Address: "10.0.0.2", ModifyIndex: node.ModifyIndex + 1000}}},
	}, nil)
	if err != nil || ok || len(resp.Errors) != 1 || resp.Errors[0].OpIndex != 2 || resp.Errors[0].What != `failed to set node "ext1", index is stale` {
		t.Fatalf("failing CAS = %v, %+v, %v", ok, resp, err)
	}
	kv, _, err := client.KV().Get("ext/web", nil)
	if err != nil || kv == nil || string(kv.Value) != "v1" {
		t.Fatalf("ext/web after the rollback = %+v, %v", kv, err)
	}
	if entries, _, err := health.Service("web", "", false, nil); err != nil || len(entries) != 1 || entries[0].Node.Address != "10.0.0.1" {
		t.Fatalf("web after the rollback = %+v, %v", entries, err)
	}

	// Only gets: a read, with the read headers; a missing entity fails it.
	ok, resp, qm, err := txn.Txn(api.TxnOps{
		{Node: &api.NodeTxnOp{Verb: api.NodeGet, Node: api.Node{Node: "ext1"}}},
		{Service: &api.ServiceTxnOp{Verb: api.ServiceGet, Node: "ext1", Service: api.AgentService{ID: "web1"}}},
		{Check: &api.CheckTxnOp{Verb: api.CheckGet, Check: api.HealthCheck{Node: "ext1", CheckID: "web1-http"}}},
		{KV: &api.KVTxnOp{Verb: api.KVGet, Key: "ext/web"}},
	}, &api.QueryOptions{RequireConsistent: true})
	if err != nil || !ok || len(resp.Results) != 4 || resp.Results[2].Check.Status != api.HealthCritical || string(resp.Results[3].KV.Value) != "v1" || !qm.KnownLeader {
		t.Fatalf("read-only Txn = %v, %+v, %+v, %v", ok, resp, qm, err)
	}
	ok, resp, _, err = txn.Txn(api.TxnOps{
		{Node: &api.NodeTxnOp{Verb: api.NodeGet, Node: api.Node{Node: "ext1"}}},
		{Service: &api.ServiceTxnOp{Verb: api.ServiceGet, Node: "ext1", Service: api.AgentService{ID: "nope"}}},
	}, nil)
	if err != nil || ok || len(resp.Errors) != 1 || resp.Errors[0].OpIndex != 1 || resp.Errors[0].What != `service "nope" on node "ext1" doesn't exist` {
		t.Fatalf("missing service = %v, %+v, %v", ok, resp, err)
	}

	// An unknown verb fails its operation; too many operations fail the
	// request.
	ok, resp, _, err = txn.Txn(api.TxnOps{{Node: &api.NodeTxnOp{Verb: "frob", Node: api.Node{Node: "ext1"}}}}, nil)
	if err != nil || ok || len(resp.Errors) != 1 || resp.Errors[0].OpIndex != 0 || resp.Errors[0].What != `unknown Node verb "frob"` {
		t.Fatalf("unknown verb = %v, %+v, %v", ok, resp, err)
	}
	many := make(api.TxnOps, 129)
	for i := range many {
		many[i] = &api.TxnOp{Node: &api.NodeTxnOp{Verb: api.NodeGet, Node: api.Node{Node: fmt.Sprint("n", i)}}}
	}
	if _, _, _, err := txn.Txn(many, nil); err == nil || !strings.Contains(err.Error(), "Transaction contains too many operations (129 > 128)") {
		t.Fatalf("129 operations: %v", err)
	}

	// Deleting the node through a transaction removes its instances.
	ok, resp, _, err = txn.Txn(api.TxnOps{{Node: &api.NodeTxnOp{Verb: api.NodeDelete, Node: api.Node{Node: "ext1"}}}}, nil)
	if err != nil || !ok || len(resp.Results) != 0 {
		t.Fatalf("node delete = %v, %+v, %v", ok, resp, err)
	}
	if entries, _, err := health.Service("web", "", false, nil); err != nil || len(entries) != 0 {
		t.Fatalf("web after its node was deleted = %+v, %v", entries, err)
	}
}
