package local

import (
	"errors"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestScriptChecksAllowed: script and docker checks are admitted as
// Consul's enable_script_checks and enable_local_script_checks say: from
// the HTTP API only with the first, from config files with either; a
// refused registration stores nothing.
func TestScriptChecksAllowed(t *testing.T) {
	script := func() *structs.CheckType {
		return &structs.CheckType{ScriptArgs: []string{"sh", "-c", "true"}, Interval: structs.Duration(10 * time.Second)}
	}
	docker := func() *structs.CheckType {
		c := script()
		c.DockerContainerID, c.Shell = "f972c95ebf0e", "/bin/bash"
		return c
	}
	tests := []struct {
		name          string
		remote, local bool // the settings
		config        bool // registered from a config file
		check         func() *structs.CheckType
		sidecar       bool // the check is the sidecar's
		wantMsg       string
	}{
		{name: "remote, disabled", check: script, wantMsg: MsgScriptsDisabled},
		{name: "remote, local only", local: true, check: script, wantMsg: MsgScriptsDisabled},
		{name: "remote, enabled", remote: true, check: script},
		{name: "remote docker, disabled", check: docker, wantMsg: MsgScriptsDisabled},
		{name: "remote docker, enabled", remote: true, check: docker},
		{name: "sidecar's check, disabled", check: script, sidecar: true, wantMsg: MsgScriptsDisabled},
		{name: "config, disabled", config: true, check: script, wantMsg: MsgLocalScriptsDisabled},
		{name: "config, local only", config: true, local: true, check: script},
		{name: "config, remote", config: true, remote: true, check: script},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestState(t, func(c *Config) { c.EnableScriptChecks, c.EnableLocalScriptChecks = tc.remote, tc.local })
			svc := &structs.ServiceDefinition{Name: "web", Port: 8080, Check: tc.check()}
			if tc.sidecar {
				svc.Check = nil
				svc.Connect = &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{Check: tc.check()}}
			}
			chk := &structs.CheckDefinition{CheckType: *tc.check()}
			chk.Name = "node-script"
			var svcErr, chkErr error
			if tc.config {
				_, svcErr = s.RegisterConfigService(svc, "")
				_, chkErr = s.RegisterConfigCheck(chk, "")
			} else {
				_, svcErr = s.RegisterService(svc, "", false)
				_, chkErr = s.RegisterCheck(chk, "")
			}
			for what, err := range map[string]error{"service": svcErr, "check": chkErr} {
				if tc.wantMsg == "" {
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
					continue
				}
				var ve *ValidationError
				if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) || ve.Reason != tc.wantMsg {
					t.Errorf("%s: err %v, want %q", what, err, tc.wantMsg)
				}
			}
			if tc.wantMsg != "" && (len(s.Services()) != 0 || len(s.Checks()) != 0) {
				t.Errorf("a refused registration stored %d services, %d checks", len(s.Services()), len(s.Checks()))
			}
		})
	}
}
