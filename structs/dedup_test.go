package structs

import (
	"reflect"
	"testing"
)

// TestRecordResultTxnIsDeep: the record of a transaction's result shares
// nothing with the reply the endpoint goes on to hand out, for every kind
// of result.
func TestRecordResultTxnIsDeep(t *testing.T) {
	build := func() *TxnResponse {
		return &TxnResponse{
			Results: TxnResults{
				{KV: &DirEntry{Key: "k", Value: []byte("v")}},
				{Node: &Node{Node: "n1", Meta: map[string]string{"a": "1"}, TaggedAddresses: map[string]string{"lan": "10.0.0.1"}}},
				{Service: &NodeService{ID: "web1", Service: "web", Tags: []string{"t"}, Meta: map[string]string{"a": "1"}, Weights: &Weights{Passing: 1}}},
				{Check: &HealthCheck{CheckID: "c", ServiceTags: []string{"t"}, Definition: HealthCheckDefinition{Header: map[string][]string{"h": {"v"}}}}},
				nil,
			},
			Errors: TxnErrors{{OpIndex: 1, What: "x"}},
		}
	}
	resp := build()
	rec := RecordResult(resp)

	r := resp.Results
	r[0].KV.Value[0] = 'X'
	r[1].Node.Meta["a"] = "2"
	r[1].Node.TaggedAddresses["lan"] = "x"
	r[2].Service.Tags[0] = "x"
	r[2].Service.Meta["a"] = "2"
	r[2].Service.Weights.Passing = 9
	r[3].Check.ServiceTags[0] = "x"
	r[3].Check.Definition.Header["h"][0] = "x"
	resp.Errors[0].What = "changed"

	want := build()
	want.Results[4] = &TxnResult{}
	if got := rec.Response().(*TxnResponse); !reflect.DeepEqual(got, want) {
		t.Fatalf("the record changed with the reply:\n got %+v\nwant %+v", got, want)
	}
}
