package fsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestPreparedQueryCommandAndSnapshot(t *testing.T) {
	f := New(Config{})
	last := populate(t, f)
	q := &structs.PreparedQuery{ID: "q1", Name: "web-q", Session: "s1", Service: structs.ServiceQuery{Service: "web", Tags: []string{"v1"}}}
	tmpl := &structs.PreparedQuery{ID: "q2", Name: "geo-", Template: structs.QueryTemplateOptions{Type: structs.QueryTemplateTypeNamePrefixMatch}, Service: structs.ServiceQuery{Service: "${name.suffix}"}}
	steps := []struct {
		op   structs.PreparedQueryOp
		q    *structs.PreparedQuery
		want any
	}{
		{structs.PreparedQueryCreate, q, "q1"},
		{structs.PreparedQueryCreate, tmpl, "q2"},
		{structs.PreparedQueryCreate, &structs.PreparedQuery{ID: "q3"}, "q3"},
		{structs.PreparedQueryDelete, &structs.PreparedQuery{ID: "q3"}, nil},
	}
	for i, s := range steps {
		last++
		if got := apply(t, f, last, structs.PreparedQueryRequestType, &structs.PreparedQueryRequest{Op: s.op, Query: s.q}); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d: got %#v, want %#v", i, got, s.want)
		}
	}
	_, before, err := f.State().PreparedQueryList(nil)
	if err != nil || len(before) != 2 {
		t.Fatalf("queries = %v, %v", before, err)
	}
	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	idx, after, err := dst.State().PreparedQueryList(nil)
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("restored queries = %+v, %v; want %+v", after, err, before)
	}
	if idx != last { // the delete of q3
		t.Fatalf("restored index = %d, want %d", idx, last)
	}
	_, got, err := dst.State().PreparedQueryResolve(nil, "geo-db", "")
	if err != nil || got == nil || got.Service.Service != "db" {
		t.Fatalf("resolve after restore = %+v, %v", got, err)
	}
}

// TestRestoreVersion3Stream: a stream written before prepared queries
// existed (version 3) still restores, with none.
func TestRestoreVersion3Stream(t *testing.T) {
	src := New(Config{})
	populate(t, src)
	buf, _ := nodeOnlyStream(t, func() (structs.Nodes, error) {
		_, ns, err := src.State().Nodes(nil, nil)
		return ns, err
	}, 3, src.State().LastIndex())
	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(buf)); err != nil {
		t.Fatalf("version 3 stream: %v", err)
	}
	if _, qs, err := dst.State().PreparedQueryList(nil); err != nil || len(qs) != 0 {
		t.Fatalf("queries after a version 3 restore = %v, %v", qs, err)
	}
}
