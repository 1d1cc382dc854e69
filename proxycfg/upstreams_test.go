package proxycfg

import (
	"slices"
	"testing"
)

// TestUpstreams: the list stays sorted by ID with each ID once, and
// With and Without never modify the list they are called on (snapshots
// share it).
func TestUpstreams(t *testing.T) {
	// a1 and a2 are two values of one upstream (compared by pointer).
	a1, a2, b, c := &UpstreamSnapshot{ID: "a"}, &UpstreamSnapshot{ID: "a"}, &UpstreamSnapshot{ID: "b"}, &UpstreamSnapshot{ID: "c?dc=dc2"}
	base := NewUpstreams(c, nil, a1, b)
	frozen := slices.Clone(base)
	for _, tc := range []struct {
		name string
		got  Upstreams
		want Upstreams
	}{
		{"new, sorted, no nils", base, Upstreams{a1, b, c}},
		{"new, last of an ID kept", NewUpstreams(a1, b, a2), Upstreams{a2, b}},
		{"new, empty", NewUpstreams(), Upstreams{}},
		{"with, replaced", base.With(a2), Upstreams{a2, b, c}},
		{"with, inserted first", Upstreams{b, c}.With(a1), Upstreams{a1, b, c}},
		{"with, inserted last", Upstreams{a1, b}.With(c), Upstreams{a1, b, c}},
		{"without", base.Without("b"), Upstreams{a1, c}},
		{"without an absent ID", base.Without("zz"), Upstreams{a1, b, c}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, ids(tc.got), ids(tc.want))
		}
	}
	if !slices.Equal(base, frozen) {
		t.Errorf("With or Without modified the list: %v", ids(base))
	}
	for _, id := range []UpstreamID{"a", "b", "c?dc=dc2"} {
		if u := base.Get(id); u == nil || u.ID != id {
			t.Errorf("Get(%q) = %v", id, u)
		}
	}
	if u := base.Get("c"); u != nil {
		t.Errorf("Get of an absent ID = %v", u)
	}
}

func ids(us Upstreams) []UpstreamID {
	out := make([]UpstreamID, len(us))
	for i, u := range us {
		out[i] = u.ID
	}
	return out
}
