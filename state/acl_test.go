package state

import (
	"errors"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

const (
	testAccessor = "6a1253d2-1785-24fd-91c2-f8e78c745511"
	testSecret   = "45a3bd52-07c7-47a4-52fd-0745e0cfe967"
	testPolicyID = "e359bd81-baca-903e-7e64-1ccd9fdc78f5"
	testRoleID   = "aa770e5b-8b0b-7fcf-e5a1-8535fcc388b4"
)

func aclStore(t *testing.T) *Store {
	t.Helper()
	s := NewStore()
	if err := s.ACLPolicyBatchSet(1, []*structs.ACLPolicy{{ID: testPolicyID, Name: "Ops", Rules: `key_prefix "" { policy = "read" }`}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ACLRoleBatchSet(2, []*structs.ACLRole{{ID: testRoleID, Name: "ops-role", Policies: []structs.ACLLink{{ID: testPolicyID}}}}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestACLBootstrapOnce(t *testing.T) {
	s := NewStore()
	tok := func(a, sec string) *structs.ACLToken {
		return &structs.ACLToken{AccessorID: a, SecretID: sec}
	}
	if s.ACLBootstrapIndex() != 0 {
		t.Fatal("fresh store has a reset index")
	}
	steps := []struct {
		name       string
		idx, reset uint64
		wantErr    error
		wantIndex  uint64
	}{
		{"first bootstrap", 5, 0, nil, 5},
		{"second with reset 0", 6, 0, structs.ErrACLBootstrapInvalidResetIndex, 5},
		{"stale reset index", 7, 4, structs.ErrACLBootstrapInvalidResetIndex, 5},
		{"reset with the current index", 8, 5, nil, 8},
	}
	for i, st := range steps {
		err := s.ACLBootstrap(st.idx, st.reset, tok(testAccessor[:35]+string(rune('0'+i)), testSecret[:35]+string(rune('0'+i))))
		if !errors.Is(err, st.wantErr) || (st.wantErr == nil && err != nil) {
			t.Fatalf("%s: err %v, want %v", st.name, err, st.wantErr)
		}
		if got := s.ACLBootstrapIndex(); got != st.wantIndex {
			t.Fatalf("%s: reset index %d, want %d", st.name, got, st.wantIndex)
		}
	}
}

func TestACLTokenIndexes(t *testing.T) {
	s := aclStore(t)
	exp := time.Now().Add(-time.Minute)
	later := time.Now().Add(time.Hour)
	tokens := []*structs.ACLToken{
		{AccessorID: testAccessor, SecretID: testSecret, Policies: []structs.ACLLink{{ID: testPolicyID}}, CreateTime: time.Unix(100, 0)},
		{AccessorID: "a2", SecretID: "s2", Roles: []structs.ACLLink{{ID: testRoleID}}, ExpirationTime: &exp},
		{AccessorID: "a3", SecretID: "s3", ServiceIdentities: []structs.ACLServiceIdentity{{ServiceName: "web"}}, AuthMethod: "k8s", ExpirationTime: &later},
	}
	if err := s.ACLTokenBatchSet(10, tokens); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                              string
		policy, role, authMethod, service string
		want                              []string
	}{
		{"all", "", "", "", "", []string{testAccessor, "a2", "a3"}},
		{"by policy", testPolicyID, "", "", "", []string{testAccessor}},
		{"by role", "", testRoleID, "", "", []string{"a2"}},
		{"by auth method", "", "", "k8s", "", []string{"a3"}},
		{"by service identity", "", "", "", "web", []string{"a3"}},
		{"by unknown policy", "nope", "", "", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			idx, got, err := s.ACLTokenList(nil, c.policy, c.role, c.authMethod, c.service)
			if err != nil || idx != 10 {
				t.Fatalf("list: %d %v", idx, err)
			}
			var ids []string
			for _, tk := range got {
				ids = append(ids, tk.AccessorID)
			}
			if len(ids) != len(c.want) {
				t.Fatalf("got %v, want %v", ids, c.want)
			}
			for i := range ids {
				if ids[i] != c.want[i] {
					t.Fatalf("got %v, want %v", ids, c.want)
				}
			}
		})
	}
	_, bySecret, err := s.ACLTokenGetBySecret(nil, testSecret)
	if err != nil || bySecret == nil || bySecret.AccessorID != testAccessor || bySecret.Policies[0].Name != "Ops" {
		t.Fatalf("by secret: %+v %v", bySecret, err)
	}
	expired, err := s.ACLTokensExpired(time.Now(), 10)
	if err != nil || len(expired) != 1 || expired[0].AccessorID != "a2" {
		t.Fatalf("expired: %v %v", expired, err)
	}
	// An update keeps CreateIndex and CreateTime.
	upd := tokens[0].Clone()
	upd.Description, upd.CreateTime = "new", time.Unix(999, 0)
	if err := s.ACLTokenBatchSet(11, []*structs.ACLToken{upd}); err != nil {
		t.Fatal(err)
	}
	_, got, _ := s.ACLTokenGetByAccessor(nil, testAccessor)
	if got.CreateIndex != 10 || got.ModifyIndex != 11 || !got.CreateTime.Equal(time.Unix(100, 0)) || got.Description != "new" {
		t.Fatalf("update: %+v", got)
	}
	// A deleted policy drops out of the token's links.
	if err := s.ACLPolicyBatchDelete(12, []string{testPolicyID}); err != nil {
		t.Fatal(err)
	}
	_, got, _ = s.ACLTokenGetByAccessor(nil, testAccessor)
	if len(got.Policies) != 0 {
		t.Fatalf("links after the policy's delete: %+v", got.Policies)
	}
	if err := s.ACLTokenBatchDelete(13, []string{"a2", "missing"}); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := s.ACLTokenGetByAccessor(nil, "a2"); got != nil {
		t.Fatal("deleted token still there")
	}
}

func TestACLWritesRefused(t *testing.T) {
	s := aclStore(t)
	if err := s.ACLTokenBatchSet(10, []*structs.ACLToken{{AccessorID: testAccessor, SecretID: testSecret}}); err != nil {
		t.Fatal(err)
	}
	before := s.LastIndex()
	cases := []struct {
		name  string
		write func() error
		want  error
	}{
		{"secret of another token", func() error {
			return s.ACLTokenBatchSet(20, []*structs.ACLToken{{AccessorID: "other", SecretID: testSecret}})
		}, ErrACLSecretTaken},
		{"unknown policy link", func() error {
			return s.ACLTokenBatchSet(20, []*structs.ACLToken{{AccessorID: "x", SecretID: "y", Policies: []structs.ACLLink{{ID: "nope"}}}})
		}, ErrACLUnknownLink},
		{"unknown role link", func() error {
			return s.ACLTokenBatchSet(20, []*structs.ACLToken{{AccessorID: "x", SecretID: "y", Roles: []structs.ACLLink{{ID: "nope"}}}})
		}, ErrACLUnknownLink},
		{"token without secret", func() error {
			return s.ACLTokenBatchSet(20, []*structs.ACLToken{{AccessorID: "x"}})
		}, ErrACLMissingID},
		{"policy name taken, other case", func() error {
			return s.ACLPolicyBatchSet(20, []*structs.ACLPolicy{{ID: "p2", Name: "ops"}})
		}, ErrACLNameTaken},
		{"role name taken", func() error {
			return s.ACLRoleBatchSet(20, []*structs.ACLRole{{ID: "r2", Name: "OPS-ROLE"}})
		}, ErrACLNameTaken},
		{"role linking an unknown policy", func() error {
			return s.ACLRoleBatchSet(20, []*structs.ACLRole{{ID: "r2", Name: "r2", Policies: []structs.ACLLink{{ID: "nope"}}}})
		}, ErrACLUnknownLink},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.write(); !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if s.LastIndex() != before {
				t.Fatal("a refused write moved an index")
			}
		})
	}
	_, byName, err := s.ACLPolicyGetByName(nil, "OPS")
	if err != nil || byName == nil || byName.ID != testPolicyID {
		t.Fatalf("policy by name: %+v %v", byName, err)
	}
	_, roles, err := s.ACLRoleList(nil, testPolicyID)
	if err != nil || len(roles) != 1 || roles[0].Policies[0].Name != "Ops" {
		t.Fatalf("roles by policy: %+v %v", roles, err)
	}
}
