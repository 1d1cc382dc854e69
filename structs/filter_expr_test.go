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
