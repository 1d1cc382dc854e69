package structs

import (
	"errors"
	"reflect"
	"testing"
)

func TestCompileFilter(t *testing.T) {
	if _, err := CompileFilter(`Service.Meta.version == v2`); err != nil {
		t.Fatal(err)
	}
	_, err := CompileFilter(`foo`)
	const want = `Failed to create boolean expression evaluator: 1:4 (3): no match found, expected: "!=", ".", "==", "[", [ \t\r\n] or [a-zA-Z0-9_]`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if !errors.Is(err, ErrInvalidFilter) || !errors.Is(err, ErrFilterSyntax) {
		t.Fatalf("%v is not ErrInvalidFilter and ErrFilterSyntax", err)
	}
	cases := []struct {
		err  error
		want bool
	}{
		{err, true},
		// As it arrives from another server: the sentinel's name and the text.
		{WireError(ErrInvalidFilter.Name(), err.Error()), true},
		// Text alone is not enough.
		{WireError("", err.Error()), false},
		{ErrFilterNotSupported, false},
		{WireError("", "Failed to create boolean expression evaluator"), false},
		{errors.New("boom"), false},
	}
	for _, tc := range cases {
		if got := IsInvalidFilter(tc.err); got != tc.want {
			t.Errorf("IsInvalidFilter(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestFilterResult(t *testing.T) {
	n1 := &Node{Node: "n1", Meta: map[string]string{"rack": "r1"}}
	n2 := &Node{Node: "n2", Meta: map[string]string{"rack": "r2"}}
	sn1 := &ServiceNode{Node: "n1", ServiceID: "web-1", ServiceMeta: map[string]string{"version": "v1"}}
	sn2 := &ServiceNode{Node: "n2", ServiceID: "web-2", ServiceMeta: map[string]string{"version": "v2"}}
	web := &NodeService{ID: "web", Service: "web", Tags: []string{"primary"}}
	proxy := &NodeService{ID: "web-proxy", Service: "web-proxy", Kind: ServiceKindConnectProxy}
	c1 := &HealthCheck{CheckID: "serfHealth", Status: HealthPassing}
	c2 := &HealthCheck{CheckID: "svc", ServiceName: "web", Status: HealthCritical}
	i1 := &Intention{SourceName: "web", DestinationName: "db", Action: IntentionActionAllow}
	i2 := &Intention{SourceName: "api", DestinationName: "db", Action: IntentionActionDeny}
	instances := CheckServiceNodes{
		{Node: n1, Service: web, Checks: HealthChecks{c1}},
		{Node: n2, Service: proxy, Checks: HealthChecks{c1, c2}},
	}

	// Each case builds a reply around a result as the state store would
	// share it, and returns a getter of the reply's result.
	cases := []struct {
		name  string
		build func() (Filterable, func() any)
		expr  string
		want  any
	}{
		{"nodes", func() (Filterable, func() any) {
			r := &IndexedNodes{Nodes: Nodes{n1, n2}}
			return r, func() any { return r.Nodes }
		}, `Meta.rack == r2`, Nodes{n2}},
		{"nodes, none match", func() (Filterable, func() any) {
			r := &IndexedNodes{Nodes: Nodes{n1, n2}}
			return r, func() any { return r.Nodes }
		}, `Meta.rack == r9`, Nodes{}},
		{"service nodes", func() (Filterable, func() any) {
			r := &IndexedServiceNodes{ServiceNodes: ServiceNodes{sn1, sn2}}
			return r, func() any { return r.ServiceNodes }
		}, `ServiceMeta.version == v1`, ServiceNodes{sn1}},
		{"node services", func() (Filterable, func() any) {
			r := &IndexedNodeServices{NodeServices: &NodeServices{Node: n1, Services: map[string]*NodeService{"web": web, "web-proxy": proxy}}}
			return r, func() any { return r.NodeServices }
		}, `Kind == "connect-proxy"`, &NodeServices{Node: n1, Services: map[string]*NodeService{"web-proxy": proxy}}},
		{"node services, none match", func() (Filterable, func() any) {
			r := &IndexedNodeServices{NodeServices: &NodeServices{Node: n1, Services: map[string]*NodeService{"web": web, "web-proxy": proxy}}}
			return r, func() any { return r.NodeServices }
		}, `"canary" in Tags`, &NodeServices{Node: n1, Services: map[string]*NodeService{}}},
		{"missing node", func() (Filterable, func() any) {
			r := &IndexedNodeServices{}
			return r, func() any { return r.NodeServices }
		}, `Kind == "connect-proxy"`, (*NodeServices)(nil)},
		{"checks", func() (Filterable, func() any) {
			r := &IndexedHealthChecks{HealthChecks: HealthChecks{c1, c2}}
			return r, func() any { return r.HealthChecks }
		}, `ServiceName != ""`, HealthChecks{c2}},
		{"check service nodes", func() (Filterable, func() any) {
			r := &IndexedCheckServiceNodes{Nodes: append(CheckServiceNodes(nil), instances...)}
			return r, func() any { return r.Nodes }
		}, `Checks.Status == critical`, CheckServiceNodes{instances[1]}},
		{"intentions", func() (Filterable, func() any) {
			r := &IndexedIntentions{Intentions: Intentions{i1, i2}}
			return r, func() any { return r.Intentions }
		}, `Action == deny`, Intentions{i2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reply, result := tc.build()
			shared := result()
			before := snapshot(shared)
			f, err := CompileFilter(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			reply.FilterResult(f.Evaluate)
			if got := result(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("filtered = %#v, want %#v", got, tc.want)
			}
			if after := snapshot(shared); !reflect.DeepEqual(before, after) {
				t.Errorf("the shared result changed: %v -> %v", before, after)
			}
		})
	}
}

// snapshot copies a result deeply enough to notice an in-place change:
// a slice's elements, or a *NodeServices' node and map entries.
func snapshot(v any) any {
	if ns, ok := v.(*NodeServices); ok {
		if ns == nil {
			return nil
		}
		m := map[string]any{"": ns.Node}
		for k, s := range ns.Services {
			m[k] = s
		}
		return m
	}
	rv := reflect.ValueOf(v)
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out
}
