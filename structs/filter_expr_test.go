package structs

import (
	"errors"
	"testing"
)

func TestFilterParseErrors(t *testing.T) {
	for _, expr := range []string{
		``, `Service.Meta.x ==`, `Service.Meta.x = "a"`, `(Service.Tags is empty`, `Service.Tags is full`,
		`"a" in`, `Service.Meta.x == "unterminated`, `and`, `Service..x == a`, `Service.Meta.x matches "("`,
		`Service.Meta.x == a b`, `Service.Meta["k" == a`, `1abc == x`,
	} {
		if _, err := ParseFilter(expr); !errors.Is(err, ErrFilterSyntax) {
			t.Errorf("ParseFilter(%q) err = %v, want syntax error", expr, err)
		}
	}
}

func TestFilterEvaluate(t *testing.T) {
	inst := CheckServiceNode{
		Node: &Node{Node: "web-1", Meta: map[string]string{"rack": "r1"}},
		Service: &NodeService{
			Service: "web", Tags: []string{"canary", "blue"}, Port: 8080,
			Meta: map[string]string{"version": "v1", "env": "prod"},
		},
	}
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
		{`Service.Meta.none is empty`, true},
		{`Node.Node matches "^web-[0-9]+$"`, true},
		{`Node.Meta.rack not matches "r2"`, true},
		{"Service.Meta.version == `v1`", true},
		{`service.meta.version == v1`, true},
	}
	for _, tc := range cases {
		f, err := ParseFilter(tc.expr)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tc.expr, err)
			continue
		}
		if got := f.Evaluate(&inst); got != tc.want {
			t.Errorf("%q = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestFilterSyntaxErrorPosition(t *testing.T) {
	// go-bexpr's "line:column (offset): " shape, which Consul prints (for
	// `foo`, Consul answers "1:4 (3): no match found, ...").
	cases := []struct{ expr, want string }{
		{`foo`, `1:4 (3): unexpected end of expression, expected an operator`},
		{`Node == a and`, `1:14 (13): unexpected end of expression`},
		{"Node == a and\n  Meta.x = b", `2:10 (23): expected '=='`},
		{`Status == "pass`, `1:11 (10): unterminated string`},
		{`Service.Meta.x matches "("`, "1:16 (15): invalid regular expression \"(\": error parsing regexp: missing closing ): `(`"},
		// Columns count characters, offsets bytes.
		{`Meta.x == "ü" and`, `1:18 (18): unexpected end of expression`},
		{`"a" == x`, `1:1 (0): expected a selector, found "a"`},
	}
	for _, tc := range cases {
		_, err := ParseFilter(tc.expr)
		if err == nil || err.Error() != tc.want || !errors.Is(err, ErrFilterSyntax) {
			t.Errorf("ParseFilter(%q) = %v, want %q", tc.expr, err, tc.want)
		}
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
