package watches

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec map[string]any
		err  string // "" for valid
	}{
		{"args", map[string]any{"type": "key", "key": "k", "args": []any{"/bin/true"}}, ""},
		{"deprecated handler", map[string]any{"type": "checks", "handler": "/usr/bin/h.sh"}, ""},
		{"http", map[string]any{"type": "services", "handler_type": "http",
			"http_handler_config": map[string]any{"path": "http://127.0.0.1:1/x", "timeout": "5s", "header": map[string]any{"a": []any{"b"}}}}, ""},
		{"agent_service by hash", map[string]any{"type": "agent_service", "service_id": "web", "args": []any{"x"}}, ""},
		{"no type", map[string]any{"args": []any{"x"}}, "Watch type must be specified"},
		{"unknown type", map[string]any{"type": "nope", "args": []any{"x"}}, "Unsupported watch type: nope"},
		{"connect watches refused", map[string]any{"type": "connect_roots", "args": []any{"x"}}, "Watch type connect_roots is not allowed in agent config"},
		{"unknown handler type", map[string]any{"type": "services", "handler_type": "ftp"}, "Handler type 'ftp' not recognized"},
		{"no handler", map[string]any{"type": "services"}, "Must define a watch handler"},
		{"handler and args", map[string]any{"type": "services", "handler": "a", "args": []any{"b"}}, "Cannot define both watch handler and args"},
		{"args not strings", map[string]any{"type": "services", "args": []any{1.0}}, "Failed to parse 'args': element 0 is not a string"},
		{"empty args", map[string]any{"type": "services", "args": []any{}}, "Failed to parse 'args': must not be empty"},
		{"handler not a string", map[string]any{"type": "services", "handler": []any{"a"}}, "Watch handler must be a string"},
		{"http without config", map[string]any{"type": "services", "handler_type": "http"}, "requires 'http_handler_config'"},
		{"http without path", map[string]any{"type": "services", "handler_type": "http", "http_handler_config": map[string]any{}}, "Requires 'path' to be set"},
		{"http with args", map[string]any{"type": "services", "handler_type": "http", "args": []any{"x"},
			"http_handler_config": map[string]any{"path": "http://127.0.0.1:1/"}}, `does not take "args"`},
		{"key without key", map[string]any{"type": "key", "args": []any{"x"}}, "Must specify a single key to watch"},
		{"unknown parameter", map[string]any{"type": "services", "args": []any{"x"}, "colour": "red"}, "Invalid parameters: [colour]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := clone(tc.spec)
			err := Validate([]map[string]any{{"type": "nodes", "args": []any{"ok"}}, spec})
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
			} else {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Validate = %v, want ErrInvalid containing %q", err, tc.err)
				}
				if !strings.Contains(err.Error(), "invalid watch 2:") {
					t.Errorf("error %q does not name the watch's position", err)
				}
			}
			if len(spec) != len(tc.spec) {
				t.Errorf("Validate changed the definition: %v", spec)
			}
		})
	}
}

func TestStartNeedsAnAddress(t *testing.T) {
	if _, err := Start(Config{Specs: []map[string]any{{"type": "nodes", "args": []any{"x"}}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Start without an address = %v, want ErrInvalid", err)
	}
	r, err := Start(Config{})
	if err != nil {
		t.Fatalf("Start with no watches: %v", err)
	}
	r.Stop()
	var none *Runner
	none.Stop() // a nil runner stops as nothing
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
