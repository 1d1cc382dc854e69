package cli

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

func TestKeygen(t *testing.T) {
	var out, errOut bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	if code := Run([]string{"keygen"}, env); code != 0 {
		t.Fatalf("keygen = %d: %s", code, errOut.String())
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out.String()))
	if err != nil || len(raw) != 32 {
		t.Fatalf("keygen printed %q: %d bytes, %v; want base64 of 32 bytes", out.String(), len(raw), err)
	}
}

// TestKeyringUsage: mistakes in the flags are refused before any request.
func TestKeyringUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no action", nil, "Usage: trellis keyring"},
		{"two actions", []string{"-list", "-install", "x"}, "Only a single action is allowed"},
		{"relay factor", []string{"-list", "-relay-factor", "6"}, "Relay factor must be in range: [0, 5]"},
		{"local-only on a write", []string{"-use", "x", "-local-only"}, "local-only can only be set for list requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
			// Nothing listens there: reaching the network would fail differently.
			args := append([]string{"keyring", "-http-addr", "127.0.0.1:1"}, tc.args...)
			if code := Run(args, env); code != 1 || !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("keyring %v = %d, stderr %q; want 1 and %q", tc.args, code, errOut.String(), tc.want)
			}
		})
	}
}
