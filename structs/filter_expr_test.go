package structs

import (
	"errors"
	"sync"
	"testing"
)

// instance is what the evaluation cases below select from.
var instance = CheckServiceNode{
	Node: &Node{Node: "web-1", Meta: map[string]string{"rack": "r1"}},
	Service: &NodeService{
		Service: "web", Tags: []string{"canary", "blue"}, Port: 8080,
		Meta: map[string]string{"version": "v1", "env": "prod"},
	},
}

func TestFilterInvalid(t *testing.T) {
	// Each fails to parse, or (the regular expression, which bexpr only
	// compiles against a field) to fit a CheckServiceNode.
	for _, expr := range []string{
		``, `Service.Meta.x ==`, `Service.Meta.x = "a"`, `(Service.Tags is empty`, `Service.Tags is full`,
		`"a" in`, `Service.Meta.x == "unterminated`, `and`, `Service..x == a`, `Service.Meta.x matches "("`,
		`Service.Meta.x == a b`, `Service.Meta["k" == a`, `1abc == x`,
	} {
		f, err := ParseFilter(expr)
		if err == nil {
			err = f.Check((*CheckServiceNode)(nil))
		}
		if !errors.Is(err, ErrFilterSyntax) {
			t.Errorf("%q: err = %v, want an invalid expression", expr, err)
		}
	}
}

func TestFilterEvaluate(t *testing.T) {
	cases := []struct {
		expr string
		want bool
	}{
		{`Service.Meta.version == "v1"`, true},
		{`Service.Meta.version == v1`, true},
		{`Service.Meta.version != "v1"`, false},
		{`Service.Meta["version"] == "v1"`, true},
		{`Service.Meta.missing == "v1"`, false},
		{`Service.Meta.missing != "v1"`, true},
		{`"canary" in Service.Tags`, true},
		{`"green" in Service.Tags`, false},
		{`"green" not in Service.Tags`, true},
		{`Service.Tags contains blue`, true},
		{`Service.Tags not contains blue`, false},
		{`Service.Port == 8080`, true},
		{`Service.Meta.env == prod and "canary" in Service.Tags`, true},
		{`Service.Meta.env == dev or Service.Meta.version == v1`, true},
		{`not Service.Meta.env == dev`, true},
		{`not (Service.Meta.env == prod or Service.Port == 1)`, false},
		{`Service.Meta.env == dev or Service.Meta.env == prod and Service.Port == 1`, false},
		{`Service.Tags is not empty`, true},
		{`Node.Node matches "^web-[0-9]+$"`, true},
		{`Node.Meta.rack not matches "r2"`, true},
		{"Service.Meta.version == `v1`", true},
	}
	for _, tc := range cases {
		f, err := ParseFilter(tc.expr)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tc.expr, err)
			continue
		}
		if err := f.Check(&instance); err != nil {
			t.Errorf("%q does not fit a CheckServiceNode: %v", tc.expr, err)
		}
		if got := f.Evaluate(&instance); got != tc.want {
			t.Errorf("%q = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestFilterSyntaxErrorPosition(t *testing.T) {
	// bexpr's "line:column (offset): " and reason, which Consul prints
	// after its prefix.
	cases := []struct{ expr, want string }{
		{`foo`, `1:4 (3): no match found, expected: "!=", ".", "==", "[", [ \t\r\n] or [a-zA-Z0-9_]`},
		{`Node == a and`, `1:14 (13): no match found, expected: [ \t\r\n]`},
		{"Node == a and\n  Meta.x = b", `2:10 (23): no match found, expected: "!=", "==", "contains", "in", "is", "matches", "not" or [ \t\r\n]`},
		{`Status == "pass`, `1:16 (15): rule "string": Unterminated string literal`},
		// Columns count characters, offsets bytes.
		{`Meta.x == "ü" and`, `1:18 (18): no match found, expected: [ \t\r\n]`},
		{`"a" == x`, `1:5 (4): no match found, expected: "in", "not" or [ \t\r\n]`},
		// A bare value is a selector's words: one with "-" must be quoted.
		{`Node == web-2`, `1:12 (11): no match found, expected: ".", "[", [ \t\r\n], [a-zA-Z0-9_] or EOF`},
	}
	for _, tc := range cases {
		_, err := ParseFilter(tc.expr)
		if err == nil || err.Error() != tc.want || !errors.Is(err, ErrFilterSyntax) {
			t.Errorf("ParseFilter(%q) = %v, want %q", tc.expr, err, tc.want)
		}
	}
}

func TestFilterCheck(t *testing.T) {
	// What parses but does not fit the elements' type fails as bexpr
	// (and so Consul) words it; such a Filter matches nothing.
	cases := []struct{ expr, want string }{
		// Selectors are the field names, case and all.
		{`service.meta.version == v1`, `Selector "service" is not valid`},
		{`Service.Nope == x`, `Selector "Service.Nope" is not valid`},
		// "is empty" applies to lists and maps, not to a string.
		{`Service.Meta.none is empty`, `Invalid match operator "Is Empty" for selector "Service.Meta.none"`},
		{`Service.Port == abc`, `Failed to coerce value "abc" for selector "Service.Port": strconv.ParseInt: parsing "abc": invalid syntax`},
		{`Service.Meta.x matches "("`, "Failed to compile regular expression \"(\": error parsing regexp: missing closing ): `(`"},
		// Hidden as on Consul's structs.
		{`Node.RaftIndex.CreateIndex == 1`, `Selector "Node.RaftIndex" is not valid`},
	}
	for _, tc := range cases {
		f, err := ParseFilter(tc.expr)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tc.expr, err)
			continue
		}
		err = f.Check((*CheckServiceNode)(nil))
		if err == nil || err.Error() != tc.want || !errors.Is(err, ErrFilterSyntax) {
			t.Errorf("%q: Check = %v, want %q", tc.expr, err, tc.want)
		}
		if f.Evaluate(&instance) {
			t.Errorf("%q matched", tc.expr)
		}
	}
}

func TestFilterConcurrentTypes(t *testing.T) {
	// One Filter binds to each type it meets; under -race this shows the
	// binding is synchronised.
	f, err := ParseFilter(`Node == "web-1"`)
	if err != nil {
		t.Fatal(err)
	}
	check := &HealthCheck{Node: "web-1"}
	sn := &ServiceNode{Node: "web-1"}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if !f.Evaluate(check) || !f.Evaluate(sn) {
				t.Error("a node named web-1 did not match")
			}
		})
	}
	wg.Wait()
	// A CheckServiceNode's Node is a struct, which == cannot compare.
	if f.Evaluate(&instance) {
		t.Error("Node == \"web-1\" matched a CheckServiceNode")
	}
}

func TestFilterThroughLists(t *testing.T) {
	web := CheckServiceNode{
		Node: &Node{Node: "n1"},
		Service: &NodeService{
			Kind: ServiceKindConnectProxy, Service: "web-proxy", Weights: &Weights{Passing: 3, Warning: 1},
			TaggedAddresses: map[string]ServiceAddress{"lan": {Address: "10.0.0.1", Port: 8080}},
			Proxy: ConnectProxyConfig{DestinationServiceName: "web", Upstreams: []Upstream{
				{DestinationName: "db", LocalBindPort: 9191}, {DestinationName: "cache"},
			}},
			Connect: ServiceConnect{Native: false},
		},
		Checks: HealthChecks{
			{CheckID: "serfHealth", Status: HealthPassing},
			{CheckID: "svc", Status: HealthCritical, ServiceTags: []string{"primary"}},
		},
	}
	noChecks := CheckServiceNode{Node: &Node{Node: "n2"}, Service: &NodeService{Service: "web"}}
	cases := []struct {
		expr         string
		web, noCheck bool
	}{
		// Any element of Checks decides, the operator applying to each.
		{`Checks.Status == critical`, true, false},
		{`Checks.Status == warning`, false, false},
		{`Checks.Status != passing`, true, false},
		{`not Checks.Status == critical`, false, true},
		{`"primary" in Checks.ServiceTags`, true, false},
		{`Checks.CheckID matches "^serf"`, true, false},
		{`Checks is empty`, false, true},
		{`Checks is not empty`, true, false},
		{`Service.Proxy.Upstreams.DestinationName == cache`, true, false},
		{`Service.Proxy.Upstreams.LocalBindPort == 9191`, true, false},
		{`Service.Proxy.Upstreams is empty`, false, true},
		{`Service.Proxy.DestinationServiceName == web`, true, false},
		{`Service.Kind == "connect-proxy"`, true, false},
		{`Service.Weights.Passing == 3`, true, false},
		{`Service.TaggedAddresses.lan.Address == "10.0.0.1"`, true, false},
		{`Service.TaggedAddresses.lan.Port == 8080`, true, false},
		{`Service.Connect.Native == false`, true, true},
		{`"1" in Node.Node`, true, false},
	}
	for _, tc := range cases {
		f, err := ParseFilter(tc.expr)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tc.expr, err)
			continue
		}
		if got := f.Evaluate(&web); got != tc.web {
			t.Errorf("%q on web = %v, want %v", tc.expr, got, tc.web)
		}
		if got := f.Evaluate(&noChecks); got != tc.noCheck {
			t.Errorf("%q on an instance without checks = %v, want %v", tc.expr, got, tc.noCheck)
		}
	}
}
