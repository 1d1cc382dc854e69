package httpapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// TestConsulClientACLEnforcement: the official client against a server
// with ACLs on and default deny: a write the token lacks is Consul's 403
// and stores nothing, one it has succeeds, and lists are filtered with
// X-Consul-Results-Filtered-By-ACLs, withheld from anonymous callers.
func TestConsulClientACLEnforcement(t *testing.T) {
	c, _ := startACLServer(t)
	var root *api.ACLToken
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if root, _, err = c.ACL().Bootstrap(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bootstrap: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	w := &api.WriteOptions{Token: root.SecretID}
	pol, _, err := c.ACL().PolicyCreate(&api.ACLPolicy{Name: "app", Rules: `key_prefix "app/" { policy = "write" }`}, w)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := c.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, w)
	if err != nil {
		t.Fatal(err)
	}
	kv := c.KV()
	if _, err := kv.Put(&api.KVPair{Key: "secret/a", Value: []byte("x")}, w); err != nil {
		t.Fatal(err)
	}

	want := fmt.Sprintf(`Unexpected response code: 403 (Permission denied: token with AccessorID '%s' lacks permission 'key:write' on "other")`, tok.AccessorID)
	if _, err := kv.Put(&api.KVPair{Key: "other", Value: []byte("x")}, &api.WriteOptions{Token: tok.SecretID}); err == nil || err.Error() != want {
		t.Fatalf("denied put: %v, want %s", err, want)
	}
	if p, _, err := kv.Get("other", &api.QueryOptions{Token: root.SecretID}); err != nil || p != nil {
		t.Fatalf("a denied put was stored: %+v %v", p, err)
	}
	if _, err := kv.Put(&api.KVPair{Key: "app/a", Value: []byte("x")}, &api.WriteOptions{Token: tok.SecretID}); err != nil {
		t.Fatalf("allowed put: %v", err)
	}

	for _, c := range []struct {
		name     string
		token    string
		keys     int
		filtered bool
	}{
		{"scoped token", tok.SecretID, 1, true},
		{"anonymous", "", 0, false},
		{"management", root.SecretID, 2, false},
	} {
		pairs, meta, err := kv.List("", &api.QueryOptions{Token: c.token})
		if err != nil || len(pairs) != c.keys || meta.ResultsFilteredByACLs != c.filtered {
			t.Errorf("%s: %d pairs, filtered %v, %v; want %d, %v", c.name, len(pairs), meta.ResultsFilteredByACLs, err, c.keys, c.filtered)
		}
	}
	if _, err := c.Operator().RaftGetConfiguration(&api.QueryOptions{Token: tok.SecretID}); err == nil ||
		err.Error() != fmt.Sprintf("Unexpected response code: 403 (Permission denied: token with AccessorID '%s' lacks permission 'operator:read')", tok.AccessorID) {
		t.Fatalf("operator: %v", err)
	}
}
