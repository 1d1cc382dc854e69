package state

import (
	"errors"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestPreparedQueryWrites(t *testing.T) {
	s := sessionFixture(t)
	if err := s.SessionCreate(7, &structs.Session{ID: "s1", Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	tmpl := structs.QueryTemplateOptions{Type: structs.QueryTemplateTypeNamePrefixMatch}
	steps := []struct {
		name string
		q    structs.PreparedQuery
		want error
	}{
		{"create", structs.PreparedQuery{ID: "q1", Name: "web", Service: structs.ServiceQuery{Service: "web"}}, nil},
		{"update keeps its name", structs.PreparedQuery{ID: "q1", Name: "WEB", Service: structs.ServiceQuery{Service: "web"}}, nil},
		{"name taken, any case", structs.PreparedQuery{ID: "q2", Name: "Web"}, ErrQueryNameTaken},
		{"name is an ID", structs.PreparedQuery{ID: "q2", Name: "q1"}, ErrQueryNameIsID},
		{"missing ID", structs.PreparedQuery{Name: "x"}, ErrMissingQueryID},
		{"unknown session", structs.PreparedQuery{ID: "q2", Session: "nope"}, ErrQueryInvalidSession},
		{"with session", structs.PreparedQuery{ID: "q2", Session: "s1"}, nil},
		{"catch-all template", structs.PreparedQuery{ID: "t0", Template: tmpl}, nil},
		{"second catch-all", structs.PreparedQuery{ID: "t1", Template: tmpl}, ErrQueryNameTaken},
		{"template", structs.PreparedQuery{ID: "t2", Name: "geo-", Template: tmpl}, nil},
		{"template name taken", structs.PreparedQuery{ID: "t3", Name: "GEO-", Template: tmpl}, ErrQueryNameTaken},
	}
	idx := uint64(10)
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			idx++
			err := s.PreparedQuerySet(idx, &st.q)
			if !errors.Is(err, st.want) {
				t.Fatalf("set = %v, want %v", err, st.want)
			}
		})
	}
	_, q1, err := s.PreparedQueryGet(nil, "q1")
	if err != nil || q1 == nil || q1.Name != "WEB" || q1.CreateIndex != 11 || q1.ModifyIndex != 12 {
		t.Fatalf("q1 = %+v, %v", q1, err)
	}
	// Destroying the session deletes the query bound to it.
	if err := s.SessionDestroy(30, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, q2, _ := s.PreparedQueryGet(nil, "q2"); q2 != nil {
		t.Fatalf("q2 survived its session: %+v", q2)
	}
	if err := s.PreparedQueryDelete(31, "q1"); err != nil {
		t.Fatal(err)
	}
	if err := s.PreparedQueryDelete(32, "missing"); err != nil {
		t.Fatal(err)
	}
	idxAfter, all, err := s.PreparedQueryList(nil)
	if err != nil || len(all) != 2 || idxAfter != 31 {
		t.Fatalf("list = %d %+v, %v", idxAfter, all, err)
	}
}

func TestPreparedQueryResolve(t *testing.T) {
	s := NewStore()
	tmpl := structs.QueryTemplateOptions{Type: structs.QueryTemplateTypeNamePrefixMatch}
	for i, q := range []structs.PreparedQuery{
		{ID: "q1", Name: "web", Service: structs.ServiceQuery{Service: "web"}},
		{ID: "t0", Template: tmpl, Service: structs.ServiceQuery{Service: "${name.full}"}},
		{ID: "t1", Name: "geo-", Template: tmpl, Service: structs.ServiceQuery{Service: "${name.suffix}"}},
		{ID: "t2", Name: "geo-db-", Template: structs.QueryTemplateOptions{Type: structs.QueryTemplateTypeNamePrefixMatch, Regexp: `^geo-db-(.*?)-([^-]*)$`, RemoveEmptyTags: true},
			Service: structs.ServiceQuery{Service: "mysql-${match(1)}", Tags: []string{"${match(2)}", "${match(3)}", "${agent.segment}"}}},
	} {
		if err := s.PreparedQuerySet(uint64(i+1), &q); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		in       string
		wantID   string
		wantSvc  string
		wantTags []string
	}{
		{"q1", "q1", "web", nil},
		{"WEB", "q1", "web", nil},
		{"geo-api", "t1", "api", nil},
		{"geo-db-customer-primary", "t2", "mysql-customer", []string{"primary", "seg"}},
		{"anything", "t0", "anything", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, q, err := s.PreparedQueryResolve(nil, tt.in, "seg")
			if err != nil || q == nil {
				t.Fatalf("resolve = %+v, %v", q, err)
			}
			if q.ID != tt.wantID || q.Service.Service != tt.wantSvc || len(q.Service.Tags) != len(tt.wantTags) {
				t.Fatalf("resolve = %s %q %q, want %s %q %q", q.ID, q.Service.Service, q.Service.Tags, tt.wantID, tt.wantSvc, tt.wantTags)
			}
			for i := range tt.wantTags {
				if q.Service.Tags[i] != tt.wantTags[i] {
					t.Fatalf("tags = %q, want %q", q.Service.Tags, tt.wantTags)
				}
			}
		})
	}
	// The stored template is not changed by a render.
	if _, t2, _ := s.PreparedQueryGet(nil, "t2"); t2.Service.Service != "mysql-${match(1)}" {
		t.Fatalf("stored template changed: %+v", t2.Service)
	}
}
