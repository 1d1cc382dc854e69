package structs

import (
	"reflect"
	"testing"
	"time"
)

func TestCodecRoundTrip(t *testing.T) {
	c := NewCodec()
	cases := []any{
		&RegisterRequest{Node: "n1", Address: "127.0.0.1", TaggedAddresses: map[string]string{"lan": "127.0.0.1"},
			Service: &NodeService{ID: "web1", Service: "web", Tags: []string{"a"}, Port: 80, Weights: &Weights{Passing: 1, Warning: 1},
				Proxy: ConnectProxyConfig{Config: map[string]interface{}{"protocol": "http", "nested": map[string]interface{}{"k": "v"}}}},
			Checks: HealthChecks{{Node: "n1", CheckID: "c", Status: HealthPassing, Definition: HealthCheckDefinition{Interval: Duration(time.Second)}}}},
		&KVSRequest{Op: KVSet, DirEnt: DirEntry{Key: "k", Value: []byte{0, 1, 2}, Flags: 42}},
		&SessionRequest{Op: SessionCreate, Session: Session{ID: "x", LockDelay: 15 * time.Second, NodeChecks: []string{"serfHealth"}}},
		&TxnRequest{Ops: TxnOps{{KV: &TxnKVOp{Verb: KVCAS, DirEnt: DirEntry{Key: "a", RaftIndex: RaftIndex{ModifyIndex: 3}}}}}},
	}
	for _, in := range cases {
		b, err := c.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		out := reflect.New(reflect.TypeOf(in).Elem()).Interface()
		if err := c.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("round trip of %T:\n in: %#v\nout: %#v", in, in, out)
		}
	}
}

func TestCodecRejectsGarbage(t *testing.T) {
	c := NewCodec()
	for _, b := range [][]byte{{0xc1}, {0xdf, 0xff, 0xff, 0xff, 0xff}, {0x92}} {
		var r RegisterRequest
		if err := c.Unmarshal(b, &r); err == nil {
			t.Errorf("decoding %x: want error", b)
		}
	}
}
