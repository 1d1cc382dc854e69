package config

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

// sourcePaths lists the dotted JSON paths of source's leaf fields.
func sourcePaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		path := prefix + name
		if f.Anonymous {
			out = append(out, sourcePaths(f.Type, prefix)...)
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			out = append(out, sourcePaths(f.Type, path+".")...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// honouredLeaves lists the schema paths Trellis says it honours.
func honouredLeaves(n *keyNode, prefix string) []string {
	var out []string
	for k, c := range n.children {
		path := prefix + k
		if c.children != nil {
			out = append(out, honouredLeaves(c, path+".")...)
			continue
		}
		if c.status == keyHonoured {
			out = append(out, path)
		}
	}
	return out
}

// TestSchemaMatchesSource: a key marked honoured must have a field to land
// in, and a field must be reachable through an honoured key; otherwise a
// setting would be silently dropped or never reported.
func TestSchemaMatchesSource(t *testing.T) {
	fields := sourcePaths(reflect.TypeOf(source{}), "")
	keys := honouredLeaves(consulKeys(), "")
	// Keys honoured without a field of their own.
	noField := map[string]bool{}
	// Fields parsed and validated for listeners Trellis does not open yet:
	// the schema reports them as not implemented.
	notServed := map[string]bool{
		// The tls blocks share one source type; verify_outgoing is read
		// from defaults and internal_rpc only, verify_server_hostname
		// from internal_rpc only (Consul rejects it elsewhere).
		"tls.https.verify_outgoing": true, "tls.grpc.verify_outgoing": true,
		"tls.defaults.verify_server_hostname": true, "tls.https.verify_server_hostname": true,
		"tls.grpc.verify_server_hostname": true,
	}
	sort.Strings(fields)
	sort.Strings(keys)
	for _, k := range keys {
		if !contains(fields, k) && !noField[k] {
			t.Errorf("schema honours %q but source has no field for it", k)
		}
	}
	for _, f := range fields {
		if notServed[f] {
			if contains(keys, f) {
				t.Errorf("%q is listed as not served but the schema honours it", f)
			}
			continue
		}
		if !contains(keys, f) {
			t.Errorf("source field %q is not an honoured key in the schema", f)
		}
	}
}

// TestSourceFieldKinds keeps merge's assumption: only pointers, slices,
// maps and structs of them.
func TestSourceFieldKinds(t *testing.T) {
	var check func(reflect.Type)
	check = func(tp reflect.Type) {
		for i := 0; i < tp.NumField(); i++ {
			f := tp.Field(i)
			switch f.Type.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Map:
			case reflect.Struct:
				check(f.Type)
			default:
				t.Errorf("%s.%s has kind %s", tp.Name(), f.Name, f.Type.Kind())
			}
		}
	}
	check(reflect.TypeOf(source{}))
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name    string
		doc     map[string]any
		ignored []string
		invalid []string
	}{
		{"honoured only", map[string]any{"node_name": "a", "ports": map[string]any{"http": 1.0}}, nil, nil},
		{"case-insensitive", map[string]any{"Node_Name": "a", "PORTS": map[string]any{"Grpc_Tls": 1.0}, "Addresses": map[string]any{"DNS": "127.0.0.1"}, "Raft_Trailing_Logs": 5.0}, []string{"raft_trailing_logs"}, nil},
		{"empty values carry nothing", map[string]any{"segments": nil, "acl": map[string]any{"tokens": map[string]any{}}, "retry_join_wan": []any{}}, nil, nil},
		{"noop", map[string]any{"version": "1.22.0", "disable_anonymous_signature": true}, nil, nil},
		{"ignored blocks named once", map[string]any{"telemetry": map[string]any{"a": 1.0, "b": 2.0}, "ui_config": map[string]any{"enabled": true}}, []string{"telemetry", "ui_config"}, nil},
		{"service definitions are honoured", map[string]any{"service": map[string]any{"name": "x"}, "checks": []any{map[string]any{"ttl": "1s"}}}, nil, nil},
		{"node_meta keys are free", map[string]any{"node_meta": map[string]any{"anything": "x"}}, nil, nil},
		{"ca_config unknown keys are ignored, not invalid", map[string]any{"connect": map[string]any{"ca_config": map[string]any{"cluster_id": "x", "csr_max_per_second": 1.0}}},
			[]string{"connect.ca_config.csr_max_per_second"}, nil},
		{"refused only when asked for", map[string]any{"acl": map[string]any{"enabled": false}, "verify_incoming": false, "encrypt": "",
			"tls": map[string]any{"defaults": map[string]any{"verify_outgoing": false}}}, nil, nil},
		{"invalid", map[string]any{"nodename": "a", "acl": map[string]any{"tokenz": map[string]any{"x": 1.0}}, "ports": map[string]any{"dnz": 1.0}},
			nil, []string{"acl.tokenz", "nodename", "ports.dnz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := classify(tc.doc)
			if !reflect.DeepEqual(r.ignored, tc.ignored) {
				t.Errorf("ignored = %q, want %q", r.ignored, tc.ignored)
			}
			if !reflect.DeepEqual(r.invalid, tc.invalid) {
				t.Errorf("invalid = %q, want %q", r.invalid, tc.invalid)
			}
		})
	}
}
