package config

import (
	"strings"
	"testing"
)

// TestLoadAutoEncrypt: Consul's rules for the auto_encrypt block (tls on
// clients only, allow_tls on servers only, a warning for allow_tls without
// verify_incoming) and Trellis's refusal of a client without a CA to
// verify the servers with.
func TestLoadAutoEncrypt(t *testing.T) {
	server := []string{"-server", "-bootstrap-expect", "3", "-data-dir", "$DIR/d"}
	client := []string{"-data-dir", "$DIR/d"}
	for _, tc := range []struct {
		name    string
		args    []string
		hcl     string
		wantErr string
		warn    string
		check   func(*RuntimeConfig) bool
	}{
		{name: "client", args: client, hcl: `auto_encrypt { tls = true dns_san = ["a.example"] ip_san = ["10.0.0.1"] } tls { defaults { ca_file = "ca.pem" } }`,
			check: func(rc *RuntimeConfig) bool {
				return rc.AutoEncrypt.TLS && rc.AutoEncrypt.DNSSAN[0] == "a.example" && rc.AutoEncrypt.IPSAN[0].String() == "10.0.0.1" && rc.HTTPSHasCert() && !rc.GRPCTLSHasCert()
			}},
		{name: "client gRPC use_auto_cert", args: client, hcl: `auto_encrypt { tls = true } tls { defaults { ca_file = "ca.pem" } grpc { use_auto_cert = true } }`,
			check: func(rc *RuntimeConfig) bool { return rc.GRPCTLSHasCert() }},
		{name: "client without a CA", args: client, hcl: `auto_encrypt { tls = true }`, wantErr: "auto_encrypt.tls needs tls.defaults.ca_file"},
		{name: "tls on a server", args: server, hcl: `auto_encrypt { tls = true } tls { defaults { ca_file = "ca.pem" } }`, wantErr: "auto_encrypt.tls can only be used on a client."},
		{name: "allow_tls on a client", args: client, hcl: `auto_encrypt { allow_tls = true }`, wantErr: "auto_encrypt.allow_tls can only be used on a server."},
		{name: "allow_tls without verify_incoming", args: server, hcl: `auto_encrypt { allow_tls = true }`, warn: "tls.internal_rpc.verify_incoming should be enabled"},
		{name: "allow_tls without connect", args: server, hcl: `auto_encrypt { allow_tls = true } connect { enabled = false }`, wantErr: "auto_encrypt.allow_tls needs connect.enabled"},
		{name: "bad ip_san", args: client, hcl: `auto_encrypt { tls = true ip_san = ["nope"] } tls { defaults { ca_file = "ca.pem" } }`, wantErr: "auto_encrypt.ip_san"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, warnings, err := load(t, append(append([]string(nil), tc.args...), "-hcl", tc.hcl), nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.warn != "" && !strings.Contains(strings.Join(warnings, "\n"), tc.warn) {
				t.Errorf("warnings %q, want %q", warnings, tc.warn)
			}
			if tc.check != nil && !tc.check(rc) {
				t.Errorf("unexpected runtime config: %+v", rc.AutoEncrypt)
			}
		})
	}
}
