package structs

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeConfigEntryJSON feeds arbitrary bodies to the config entry
// decoder: it must never panic, and whatever it accepts must survive
// Normalize/Validate, a JSON round trip through its own output, a copy and
// the msgpack wire encoding unchanged.
func FuzzDecodeConfigEntryJSON(f *testing.F) {
	for _, seed := range []string{
		`{"Kind":"service-defaults","Name":"web","Protocol":"http","UpstreamConfig":{"Defaults":{"ConnectTimeoutMs":5}}}`,
		`{"kind":"service-router","name":"web","routes":[{"match":{"http":{"path_prefix":"/a","header":[{"name":"x","exact":"y"}]}},"destination":{"service":"b","request_timeout":"1s"}}]}`,
		`{"Kind":"service-splitter","Name":"web","Splits":[{"Weight":"50"},{"Weight":50,"Service":"b"}]}`,
		`{"Kind":"service-resolver","Name":"db","ConnectTimeout":5,"Subsets":{"v1":{"Filter":"Service.Meta.v == 1"}},"Failover":{"*":{"Datacenters":["dc2"]}}}`,
		`{"Kind":"service-intentions","Name":"db","Sources":[{"Name":"web","Action":"allow"}]}`,
		`{"Kind":"proxy-defaults","Name":"global","Config":{"protocol":"http","a":[1,{"b":null}]}}`,
		`{"Kind":"mesh","TransparentProxy":[{"MeshDestinationsOnly":"true"}]}`,
		`{"Kind":"ingress-gateway","Name":"in","Listeners":[{"Port":"80","Services":[{"Name":"web"}]}]}`,
		`{"Kind":"terminating-gateway","Name":"t","Services":[{"Name":"x","CAFile":"a"}]}`,
		`{"Kind":1}`, `{}`, `[]`, `null`, `{"Kind":"service-defaults","CreateIndex":-1}`,
	} {
		f.Add([]byte(seed))
	}
	c := NewCodec()
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := DecodeConfigEntryJSON(body)
		if err != nil {
			return
		}
		if e.Normalize() == nil {
			_ = e.Validate()
		}
		out, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("accepted entry does not encode: %v", err)
		}
		back, err := DecodeConfigEntryJSON(out)
		if err != nil {
			t.Fatalf("own output %s does not decode: %v", out, err)
		}
		if !ConfigEntriesEqual(e, back) {
			t.Fatalf("JSON round trip changed the entry:\n%s", out)
		}
		if !ConfigEntriesEqual(e, CloneConfigEntry(e)) {
			t.Fatal("copy differs")
		}
		wire, err := c.Marshal(&ConfigEntryEnvelope{Entry: e})
		if err != nil {
			t.Fatalf("wire encode: %v", err)
		}
		var env ConfigEntryEnvelope
		if err := c.Unmarshal(wire, &env); err != nil || !ConfigEntriesEqual(e, env.Entry) {
			t.Fatalf("wire round trip: %v", err)
		}
	})
}
