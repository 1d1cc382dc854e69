package config

import (
	"strings"
	"testing"
)

// TestLoadCSRLimits: connect.ca_config's csr_max_per_second and
// csr_max_concurrent reach the runtime configuration (they seed the first
// CA configuration); negative values are refused naming the key.
func TestLoadCSRLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hcl     string
		wantErr string
		check   func(*RuntimeConfig) bool
	}{
		{name: "unset", hcl: `node_name = "a"`,
			check: func(rc *RuntimeConfig) bool {
				return rc.Connect.CSRMaxPerSecond == nil && rc.Connect.CSRMaxConcurrent == 0
			}},
		{name: "both", hcl: `connect { ca_config { csr_max_per_second = 12.5 csr_max_concurrent = 2 } }`,
			check: func(rc *RuntimeConfig) bool {
				return rc.Connect.CSRMaxPerSecond != nil && *rc.Connect.CSRMaxPerSecond == 12.5 && rc.Connect.CSRMaxConcurrent == 2
			}},
		{name: "rate off", hcl: `connect { ca_config { csr_max_per_second = 0 } }`,
			check: func(rc *RuntimeConfig) bool {
				return rc.Connect.CSRMaxPerSecond != nil && *rc.Connect.CSRMaxPerSecond == 0
			}},
		{name: "negative rate", hcl: `connect { ca_config { csr_max_per_second = -1 } }`, wantErr: "connect.ca_config.csr_max_per_second"},
		{name: "negative concurrency", hcl: `connect { ca_config { csr_max_concurrent = -1 } }`, wantErr: "connect.ca_config.csr_max_concurrent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, err := load(t, []string{"-dev", "-hcl", tc.hcl}, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(rc) {
				t.Errorf("unexpected connect config: %+v", rc.Connect)
			}
		})
	}
}
