package state

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestClonesAreDeepAndFaithful(t *testing.T) {
	svc := &structs.NodeService{
		Kind: structs.ServiceKindConnectProxy, ID: "p", Service: "p", Tags: []string{"a"},
		TaggedAddresses: map[string]structs.ServiceAddress{"lan": {Address: "1.1.1.1", Port: 1}},
		Meta:            map[string]string{"k": "v"}, Weights: &structs.Weights{Passing: 1, Warning: 1},
		Proxy: structs.ConnectProxyConfig{
			Config:    map[string]interface{}{"m": map[string]interface{}{"l": []interface{}{"x"}}},
			Upstreams: []structs.Upstream{{DestinationName: "db", Config: map[string]interface{}{"k": "v"}}},
			Expose:    structs.ExposeConfig{Paths: []structs.ExposePath{{Path: "/a"}}},
		},
		RaftIndex: structs.RaftIndex{CreateIndex: 1, ModifyIndex: 2},
	}
	chk := &structs.HealthCheck{Node: "n", CheckID: "c", ServiceTags: []string{"a"},
		Definition: structs.HealthCheckDefinition{Header: map[string][]string{"H": {"1"}}}}
	node := &structs.Node{Node: "n", TaggedAddresses: map[string]string{"lan": "x"}, Meta: map[string]string{"k": "v"}}
	sess := &structs.Session{ID: "s", NodeChecks: []string{"a"}, ServiceChecks: []structs.ServiceCheck{{ID: "b"}}}
	ent := &structs.DirEntry{Key: "k", Value: []byte("v")}

	cases := []struct {
		name   string
		orig   interface{}
		clone  func() interface{}
		mutate func(c interface{})
	}{
		{"service", svc, func() interface{} { return svc.Clone() }, func(c interface{}) {
			s := c.(*structs.NodeService)
			s.Tags[0] = "z"
			s.TaggedAddresses["lan"] = structs.ServiceAddress{}
			s.Meta["k"] = "z"
			s.Weights.Passing = 9
			s.Proxy.Config["m"].(map[string]interface{})["l"].([]interface{})[0] = "z"
			s.Proxy.Upstreams[0].Config["k"] = "z"
			s.Proxy.Expose.Paths[0].Path = "/z"
		}},
		{"check", chk, func() interface{} { return chk.Clone() }, func(c interface{}) {
			h := c.(*structs.HealthCheck)
			h.ServiceTags[0] = "z"
			h.Definition.Header["H"][0] = "z"
		}},
		{"node", node, func() interface{} { return node.Clone() }, func(c interface{}) {
			n := c.(*structs.Node)
			n.TaggedAddresses["lan"] = "z"
			n.Meta["k"] = "z"
		}},
		{"session", sess, func() interface{} { return sess.Clone() }, func(c interface{}) {
			s := c.(*structs.Session)
			s.NodeChecks[0] = "z"
			s.ServiceChecks[0].ID = "z"
		}},
		{"kv", ent, func() interface{} { return ent.Clone() }, func(c interface{}) {
			c.(*structs.DirEntry).Value[0] = 'z'
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.clone()
			if !reflect.DeepEqual(c, tc.orig) {
				t.Fatalf("clone differs:\n%+v\n%+v", c, tc.orig)
			}
			before, err := json.Marshal(tc.orig)
			must(t, err)
			tc.mutate(c)
			after, err := json.Marshal(tc.orig)
			must(t, err)
			if string(before) != string(after) {
				t.Fatalf("mutating the clone changed the original:\n%s\n%s", before, after)
			}
		})
	}
	// nil and empty stay apart.
	if (&structs.NodeService{Tags: []string{}}).Clone().Tags == nil || (&structs.NodeService{}).Clone().Tags != nil {
		t.Fatal("nil/empty not preserved")
	}
}
