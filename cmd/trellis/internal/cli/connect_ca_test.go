package cli

import (
	"path/filepath"
	"testing"
)

func TestConnectCAGetConfig(t *testing.T) {
	cfg := `{"Provider":"consul","Config":{"LeafCertTTL":"72h0m0s","PrivateKeyBits":256,"PrivateKeyType":"ec"},"State":null,"ForceWithoutCrossSigning":false,"CreateIndex":5,"ModifyIndex":7}`
	runCases(t, []cliCase{
		{name: "tab-indented JSON", args: []string{"connect", "ca", "get-config"},
			routes: map[string]reply{"GET /v1/connect/ca/configuration": {body: cfg}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/ca/configuration"}},
			stdout: "{\n\t\"Provider\": \"consul\",\n\t\"Config\": {\n\t\t\"LeafCertTTL\": \"72h0m0s\",\n\t\t\"PrivateKeyBits\": 256,\n\t\t\"PrivateKeyType\": \"ec\"\n\t},\n" +
				"\t\"State\": null,\n\t\"ForceWithoutCrossSigning\": false,\n\t\"CreateIndex\": 5,\n\t\"ModifyIndex\": 7\n}\n"},
		{name: "stale and datacenter", args: []string{"connect", "ca", "get-config", "-stale", "-datacenter", "dc2"},
			routes: map[string]reply{"GET /v1/connect/ca/configuration": {body: cfg}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/ca/configuration", Query: "dc=dc2&stale="}}, skipStdout: true},
		{name: "server error", args: []string{"connect", "ca", "get-config"},
			routes: map[string]reply{"GET /v1/connect/ca/configuration": {status: 500, body: "boom"}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/ca/configuration"}}, code: 1,
			stderrHas: []string{"Error querying CA configuration: Unexpected response code: 500 (boom)"}},
		{name: "group lists subcommands", args: []string{"connect", "ca", "-h"}, code: 0, stdoutHas: []string{"get-config", "set-config"}},
	})
}

func TestConnectCASetConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.json")
	if err := writeTestFile(good, `{"Provider":"consul","Config":{"PrivateKeyType":"rsa","PrivateKeyBits":2048},"ForceWithoutCrossSigning":true}`); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := writeTestFile(bad, `{"Provider":`); err != nil {
		t.Fatal(err)
	}
	body := `{"Provider":"consul","Config":{"PrivateKeyBits":2048,"PrivateKeyType":"rsa"},"State":null,"ForceWithoutCrossSigning":false,"CreateIndex":0,"ModifyIndex":0}`
	runCases(t, []cliCase{
		{name: "set", args: []string{"connect", "ca", "set-config", "-config-file", good},
			routes: map[string]reply{"PUT /v1/connect/ca/configuration": {}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/connect/ca/configuration", Body: body, ContentType: "application/json"}},
			stdout: "Configuration updated!\n"},
		{name: "force flag", args: []string{"connect", "ca", "set-config", "-config-file", good, "-force-without-cross-signing"},
			routes: map[string]reply{"PUT /v1/connect/ca/configuration": {}},
			want: []sentRequest{{Method: "PUT", Path: "/v1/connect/ca/configuration",
				Body: `{"Provider":"consul","Config":{"PrivateKeyBits":2048,"PrivateKeyType":"rsa"},"State":null,"ForceWithoutCrossSigning":true,"CreateIndex":0,"ModifyIndex":0}`}},
			stdout: "Configuration updated!\n"},
		{name: "refused", args: []string{"connect", "ca", "set-config", "-config-file", good},
			routes: map[string]reply{"PUT /v1/connect/ca/configuration": {status: 500, body: "error configuring provider: leaf cert TTL must be greater or equal than 1h0m0s"}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/connect/ca/configuration", Body: body}}, code: 1,
			stderrHas: []string{"Error setting CA configuration: Unexpected response code: 500 (error configuring provider: leaf cert TTL"}},
		{name: "no file flag", args: []string{"connect", "ca", "set-config"}, code: 1, stderrHas: []string{"The -config-file flag is required"}},
		{name: "missing file", args: []string{"connect", "ca", "set-config", "-config-file", filepath.Join(dir, "nope")}, code: 1,
			stderrHas: []string{"Error reading config file:"}},
		{name: "bad JSON", args: []string{"connect", "ca", "set-config", "-config-file", bad}, code: 1,
			stderrHas: []string{"Error parsing config file:"}},
	})
}
