package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// TestACLCommandsAndSnapshot: each ACL command through Apply, bootstrap
// refused the second time, and tokens, policies, roles and the reset index
// surviving a snapshot.
func TestACLCommandsAndSnapshot(t *testing.T) {
	f := New(Config{})
	last := populate(t, f)
	tok := &structs.ACLToken{AccessorID: "a1", SecretID: "s1", Policies: []structs.ACLLink{{ID: "p1"}}, Roles: []structs.ACLLink{{ID: "r1"}}}
	steps := []struct {
		name string
		t    structs.MessageType
		req  any
		want any
	}{
		{"policy set", structs.ACLPolicySetRequestType, &structs.ACLPolicyBatchSetRequest{Policies: []*structs.ACLPolicy{{ID: "p1", Name: "ops"}, {ID: "p2", Name: "gone"}}}, nil},
		{"policy delete", structs.ACLPolicyDeleteRequestType, &structs.ACLPolicyBatchDeleteRequest{PolicyIDs: []string{"p2"}}, nil},
		{"role set", structs.ACLRoleSetRequestType, &structs.ACLRoleBatchSetRequest{Roles: []*structs.ACLRole{{ID: "r1", Name: "ops-role"}, {ID: "r2", Name: "gone"}}}, nil},
		{"role delete", structs.ACLRoleDeleteRequestType, &structs.ACLRoleBatchDeleteRequest{RoleIDs: []string{"r2"}}, nil},
		{"bootstrap", structs.ACLBootstrapRequestType, &structs.ACLBootstrapCommand{Token: tok}, "a1"},
		{"token set", structs.ACLTokenSetRequestType, &structs.ACLTokenBatchSetRequest{Tokens: []*structs.ACLToken{{AccessorID: "a2", SecretID: "s2"}, {AccessorID: "a3", SecretID: "s3"}}}, "a2"},
		{"token delete", structs.ACLTokenDeleteRequestType, &structs.ACLTokenBatchDeleteRequest{TokenIDs: []string{"a3"}}, nil},
	}
	for _, s := range steps {
		last++
		if got := apply(t, f, last, s.t, s.req); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: got %#v, want %#v", s.name, got, s.want)
		}
	}
	bootIdx := last - 2
	last++
	got := apply(t, f, last, structs.ACLBootstrapRequestType, &structs.ACLBootstrapCommand{Token: &structs.ACLToken{AccessorID: "a9", SecretID: "s9"}})
	if err, ok := got.(error); !ok || !errors.Is(err, structs.ErrACLBootstrapInvalidResetIndex) {
		t.Fatalf("second bootstrap: %#v", got)
	}
	st := f.State()
	_, before, _ := st.ACLTokenList(nil, "", "", "", "")
	_, pols, _ := st.ACLPolicyList(nil)
	_, roles, _ := st.ACLRoleList(nil, "")
	if len(before) != 2 || len(pols) != 1 || len(roles) != 1 || st.ACLBootstrapIndex() != bootIdx {
		t.Fatalf("state: tokens %v policies %v roles %v reset %d", before, pols, roles, st.ACLBootstrapIndex())
	}
	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	ds := dst.State()
	_, after, _ := ds.ACLTokenList(nil, "", "", "", "")
	_, pols2, _ := ds.ACLPolicyList(nil)
	_, roles2, _ := ds.ACLRoleList(nil, "")
	if !reflect.DeepEqual(after, before) || !reflect.DeepEqual(pols2, pols) || !reflect.DeepEqual(roles2, roles) {
		t.Fatalf("restored tokens %v policies %v roles %v", after, pols2, roles2)
	}
	if ds.ACLBootstrapIndex() != bootIdx || ds.ACLIndex() != st.ACLIndex() {
		t.Fatalf("restored reset index %d (want %d), ACL index %d (want %d)", ds.ACLBootstrapIndex(), bootIdx, ds.ACLIndex(), st.ACLIndex())
	}
}

// TestRestoreVersion5Stream: a stream written before ACLs were stored
// (version 5) still restores, with no ACL data and bootstrap allowed.
func TestRestoreVersion5Stream(t *testing.T) {
	src := New(Config{})
	populate(t, src)
	buf, _ := nodeOnlyStream(t, func() (structs.Nodes, error) {
		_, ns, err := src.State().Nodes(nil, nil)
		return ns, err
	}, 5, src.State().LastIndex())
	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(buf)); err != nil {
		t.Fatalf("version 5 stream: %v", err)
	}
	_, toks, err := dst.State().ACLTokenList(nil, "", "", "", "")
	if err != nil || len(toks) != 0 || dst.State().ACLBootstrapIndex() != 0 {
		t.Fatalf("ACLs after a version 5 restore = %v, %v, reset %d", toks, err, dst.State().ACLBootstrapIndex())
	}
}
