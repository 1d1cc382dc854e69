package structs

import "testing"

// TestTokenCrossesRPCNotRaft: the caller's token survives the RPC codec
// and is left out by the Raft codec, for reads and writes alike.
func TestTokenCrossesRPCNotRaft(t *testing.T) {
	cases := []struct {
		name  string
		codec *Codec
		want  string
	}{
		{"rpc", NewRPCCodec(), "secret"},
		{"raft", NewCodec(), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := KVSRequest{Op: KVSet, WriteRequest: WriteRequest{Token: "secret"}}
			buf, err := c.codec.Marshal(&w)
			if err != nil {
				t.Fatal(err)
			}
			var gotW KVSRequest
			if err := c.codec.Unmarshal(buf, &gotW); err != nil || gotW.Token != c.want {
				t.Fatalf("write token %q, %v; want %q", gotW.Token, err, c.want)
			}
			q := ACLTokenGetRequest{TokenID: "x", QueryOptions: QueryOptions{Token: "secret"}}
			buf, err = c.codec.Marshal(&q)
			if err != nil {
				t.Fatal(err)
			}
			var gotQ ACLTokenGetRequest
			if err := c.codec.Unmarshal(buf, &gotQ); err != nil || gotQ.Token != c.want || gotQ.TokenID != "x" {
				t.Fatalf("read %+v, %v; want token %q", gotQ, err, c.want)
			}
		})
	}
}

// TestACLCloneIsDeep: a token's clone shares nothing with it.
func TestACLCloneIsDeep(t *testing.T) {
	tok := &ACLToken{AccessorID: "a", SecretID: "s", Policies: []ACLLink{{ID: "p"}},
		ServiceIdentities: []ACLServiceIdentity{{ServiceName: "web", Datacenters: []string{"dc1"}}},
		TemplatedPolicies: []ACLTemplatedPolicy{{TemplateName: "builtin/dns", TemplateVariables: &ACLTemplatedPolicyVariables{Name: "n"}}}}
	c := tok.Clone()
	c.Policies[0].ID, c.ServiceIdentities[0].Datacenters[0], c.TemplatedPolicies[0].TemplateVariables.Name = "x", "x", "x"
	if tok.Policies[0].ID != "p" || tok.ServiceIdentities[0].Datacenters[0] != "dc1" || tok.TemplatedPolicies[0].TemplateVariables.Name != "n" {
		t.Fatalf("clone shares memory: %+v", tok)
	}
	if r := tok.Redacted(); r.SecretID != "<hidden>" || tok.SecretID != "s" {
		t.Fatalf("redacted %q, original %q", r.SecretID, tok.SecretID)
	}
}

// TestConfigEntryWriteCarriesToken: a config-entry write, which encodes
// itself, carries its caller's token across the RPC codec too, and an
// encoding without one (older Raft entries) still decodes.
func TestConfigEntryWriteCarriesToken(t *testing.T) {
	c := NewRPCCodec()
	for _, tok := range []string{"secret", ""} {
		in := ConfigEntryRequest{Op: ConfigEntryUpsert, Entry: &ServiceConfigEntry{Kind: ServiceDefaults, Name: "web", Protocol: "http"},
			WriteRequest: WriteRequest{Datacenter: "dc1", Token: tok, RequestID: "r"}}
		buf, err := c.Marshal(&in)
		if err != nil {
			t.Fatal(err)
		}
		var out ConfigEntryRequest
		if err := c.Unmarshal(buf, &out); err != nil {
			t.Fatalf("token %q: %v", tok, err)
		}
		if out.Token != tok || out.Datacenter != "dc1" || out.RequestID != "r" || out.Entry.GetName() != "web" || out.Op != ConfigEntryUpsert {
			t.Fatalf("token %q: decoded %+v", tok, out)
		}
	}
}
