package structs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Fields hidden from JSON must still survive the msgpack codec (Raft and
// RPC), and must stay out of JSON.
func TestCATypesCodecAndJSON(t *testing.T) {
	c := NewCodec()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name     string
		in, out  any
		check    func(t *testing.T, out any)
		jsonLack string
	}{
		{
			name: "config keeps ClusterID",
			in:   &CAConfiguration{ClusterID: "cid", Provider: "consul", Config: map[string]interface{}{"LeafCertTTL": "72h"}},
			out:  &CAConfiguration{},
			check: func(t *testing.T, out any) {
				if got := out.(*CAConfiguration); got.ClusterID != "cid" || got.Config["LeafCertTTL"] != "72h" {
					t.Fatalf("decoded %+v", got)
				}
			},
			jsonLack: "cid",
		},
		{
			name: "roots keep QueryMeta and RotatedOutAt",
			in: &IndexedCARoots{ActiveRootID: "a", Roots: CARoots{{ID: "a", RotatedOutAt: now}},
				QueryMeta: QueryMeta{Index: 42, KnownLeader: true}},
			out: &IndexedCARoots{},
			check: func(t *testing.T, out any) {
				got := out.(*IndexedCARoots)
				if got.Index != 42 || !got.KnownLeader || len(got.Roots) != 1 || !got.Roots[0].RotatedOutAt.Equal(now) {
					t.Fatalf("decoded %+v", got)
				}
			},
			jsonLack: "KnownLeader",
		},
		{
			name: "signing key keeps its key",
			in:   &CASigningKey{RootID: "r", PrivateKey: "SECRET"},
			out:  &CASigningKey{},
			check: func(t *testing.T, out any) {
				if got := out.(*CASigningKey); got.PrivateKey != "SECRET" {
					t.Fatalf("decoded %+v", got)
				}
			},
			jsonLack: "SECRET",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := c.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Unmarshal(b, tc.out); err != nil {
				t.Fatal(err)
			}
			tc.check(t, tc.out)
			j, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(j), tc.jsonLack) {
				t.Fatalf("JSON %s shows %q", j, tc.jsonLack)
			}
		})
	}
}

func TestCARootsActive(t *testing.T) {
	rs := CARoots{{ID: "old"}, {ID: "new", Active: true}}
	if got := rs.Active(); got == nil || got.ID != "new" {
		t.Fatalf("Active = %+v", got)
	}
	if (CARoots{{ID: "x"}}).Active() != nil {
		t.Fatal("no active root expected")
	}
}
