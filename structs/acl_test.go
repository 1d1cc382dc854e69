package structs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestACLTokenSecretNeverPrinted logs and prints a token every way the
// code could, and checks the SecretID appears in none of them.
func TestACLTokenSecretNeverPrinted(t *testing.T) {
	const secret = "3b1c9d0e-6f0e-4a62-9d5e-5c1d3b2f9a77"
	tok := ACLToken{AccessorID: "6a1253d2-1785-24fd-91c2-f8e78c745511", SecretID: secret, Description: "web"}
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		log := slog.New(h)
		log.Info("resolved", "token", tok)
		log.Info("resolved", "token", &tok)
		log.Info("resolved", slog.Any("token", tok))
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		fmt.Fprintf(&buf, format+"\n", tok)
		fmt.Fprintf(&buf, format+"\n", &tok)
	}
	out := buf.String()
	if strings.Contains(out, secret) {
		t.Fatalf("the SecretID was printed:\n%s", out)
	}
	if !strings.Contains(out, tok.AccessorID) || !strings.Contains(out, `"secret_id":"<hidden>"`) {
		t.Fatalf("the output does not name the token:\n%s", out)
	}
	// The API's JSON is the one place the secret belongs.
	b, err := json.Marshal(tok)
	if err != nil || !strings.Contains(string(b), `"SecretID":"`+secret+`"`) {
		t.Fatalf("JSON %s, %v", b, err)
	}
}

// TestACLTokenJSON checks Consul's field names, and that ExpirationTTL is
// read both as a duration string and as nanoseconds (consul/api's form).
func TestACLTokenJSON(t *testing.T) {
	for _, in := range []string{`{"ExpirationTTL": "1h"}`, `{"ExpirationTTL": 3600000000000}`} {
		var tok ACLToken
		if err := json.Unmarshal([]byte(in), &tok); err != nil {
			t.Fatal(err)
		}
		if tok.ExpirationTTL.Duration() != time.Hour {
			t.Errorf("%s: ExpirationTTL %v", in, tok.ExpirationTTL)
		}
	}
	tok := ACLToken{AccessorID: "a", Policies: []ACLTokenPolicyLink{{ID: ACLPolicyGlobalManagementID}},
		ServiceIdentities: []ACLServiceIdentity{{ServiceName: "web"}},
		NodeIdentities:    []ACLNodeIdentity{{NodeName: "n", Datacenter: "dc1"}}}
	b, _ := json.Marshal(tok)
	for _, want := range []string{`"AccessorID":"a"`, `"Policies":[{"ID":"00000000-0000-0000-0000-000000000001","Name":""}]`,
		`"ServiceIdentities":[{"ServiceName":"web"}]`, `"NodeIdentities":[{"NodeName":"n","Datacenter":"dc1"}]`,
		`"Local":false`, `"CreateIndex":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if strings.Contains(string(b), "ExpirationTTL") || strings.Contains(string(b), "TemplatedPolicies") {
		t.Errorf("%s has empty fields Consul leaves out", b)
	}
}

func TestACLTokenValidateNew(t *testing.T) {
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	cases := []struct {
		name string
		tok  ACLToken
		want string
	}{
		{"empty", ACLToken{}, ""},
		{"chosen IDs", ACLToken{AccessorID: "6a1253d2-1785-24fd-91c2-f8e78c745511", SecretID: "3b1c9d0e-6f0e-4a62-9d5e-5c1d3b2f9a77"}, ""},
		{"reserved accessor", ACLToken{AccessorID: ACLTokenAnonymousID}, `Invalid Token: AccessorID - UUIDs with the prefix "00000000-0000-0000-0000-0000000000" are reserved`},
		{"bad secret", ACLToken{SecretID: "root"}, "Invalid Token: SecretID - not a valid UUID"},
		{"ttl", ACLToken{ExpirationTTL: Duration(time.Hour)}, ""},
		{"negative ttl", ACLToken{ExpirationTTL: Duration(-time.Second)}, "Token Expiration TTL '-1s' should be > 0"},
		{"both", ACLToken{ExpirationTTL: Duration(time.Hour), ExpirationTime: at(time.Hour)}, "Token Expiration TTL and Expiration Time cannot both be set"},
		{"short ttl", ACLToken{ExpirationTTL: Duration(time.Second)}, "ExpirationTime cannot be less than 1m0s in the future (was 1s)"},
		{"long ttl", ACLToken{ExpirationTTL: Duration(48 * time.Hour)}, "ExpirationTime cannot be more than 24h0m0s in the future (was 48h0m0s)"},
		{"past", ACLToken{ExpirationTime: at(-time.Hour)}, "ExpirationTime cannot be before CreateTime"},
		{"expiration time", ACLToken{ExpirationTime: at(2 * time.Hour)}, ""},
		{"auth method", ACLToken{AuthMethod: "k8s"}, "AuthMethod field is disallowed outside of login"},
		{"service identity", ACLToken{ServiceIdentities: []ACLServiceIdentity{{ServiceName: "web-1"}}}, ""},
		{"service identity without name", ACLToken{ServiceIdentities: []ACLServiceIdentity{{}}}, "Service identity is missing the service name field on this token"},
		{"service identity bad name", ACLToken{ServiceIdentities: []ACLServiceIdentity{{ServiceName: "Web"}}}, `Service identity "Web" has an invalid name. Only lowercase alphanumeric characters, '-' and '_' are allowed`},
		{"service identity trailing dash", ACLToken{ServiceIdentities: []ACLServiceIdentity{{ServiceName: "web-"}}}, `Service identity "web-" has an invalid name. Only lowercase alphanumeric characters, '-' and '_' are allowed`},
		{"local with datacenters", ACLToken{Local: true, ServiceIdentities: []ACLServiceIdentity{{ServiceName: "web", Datacenters: []string{"dc1"}}}}, `Service identity "web" cannot specify a list of datacenters on a local token`},
		{"node identity without datacenter", ACLToken{NodeIdentities: []ACLNodeIdentity{{NodeName: "n"}}}, "Node identity is missing the datacenter field on this token"},
		{"node identity without name", ACLToken{NodeIdentities: []ACLNodeIdentity{{Datacenter: "dc1"}}}, "Node identity is missing the node name field on this token"},
		{"node identity bad name", ACLToken{NodeIdentities: []ACLNodeIdentity{{NodeName: "N_", Datacenter: "dc1"}}}, "Node identity has an invalid name. Only lowercase alphanumeric characters, '-' and '_' are allowed"},
		{"templated", ACLToken{TemplatedPolicies: []ACLTemplatedPolicy{{TemplateName: ACLTemplatedPolicyDNSName}}}, ""},
		{"unknown template", ACLToken{TemplatedPolicies: []ACLTemplatedPolicy{{TemplateName: "builtin/x"}}}, `no such ACL templated policy with Name "builtin/x"`},
		{"template without name", ACLToken{TemplatedPolicies: []ACLTemplatedPolicy{{TemplateName: ACLTemplatedPolicyNodeName, TemplateVariables: &ACLTemplatedPolicyVariables{}}}}, `validation error for templated policy: "builtin/node": name is required`},
		{"template bad service name", ACLToken{TemplatedPolicies: []ACLTemplatedPolicy{{TemplateName: ACLTemplatedPolicyServiceName, TemplateVariables: &ACLTemplatedPolicyVariables{Name: "A"}}}}, `service identity "A" has an invalid name. Only lowercase alphanumeric characters, '-' and '_' are allowed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.tok.ValidateNew(now, ACLTokenExpiryLimits{})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestACLTokenValidateUpdate(t *testing.T) {
	exp := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	existing := &ACLToken{AccessorID: "6a1253d2-1785-24fd-91c2-f8e78c745511", SecretID: "s", ExpirationTime: &exp}
	other := exp.Add(time.Hour)
	cases := []struct {
		name string
		tok  ACLToken
		want string
	}{
		{"description", ACLToken{AccessorID: existing.AccessorID, Description: "new"}, ""},
		{"same expiry", ACLToken{AccessorID: existing.AccessorID, ExpirationTime: &exp}, ""},
		{"bad accessor", ACLToken{AccessorID: "x"}, "AccessorID is not a valid UUID"},
		{"new secret", ACLToken{AccessorID: existing.AccessorID, SecretID: "t"}, "Changing a token's SecretID is not permitted"},
		{"local", ACLToken{AccessorID: existing.AccessorID, Local: true}, "Cannot toggle local mode of 6a1253d2-1785-24fd-91c2-f8e78c745511"},
		{"ttl", ACLToken{AccessorID: existing.AccessorID, ExpirationTTL: Duration(time.Hour)}, "Cannot change expiration time of 6a1253d2-1785-24fd-91c2-f8e78c745511"},
		{"expiry", ACLToken{AccessorID: existing.AccessorID, ExpirationTime: &other}, "Cannot change expiration time of 6a1253d2-1785-24fd-91c2-f8e78c745511"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.tok.ValidateUpdate(existing)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestACLTokenExpiry(t *testing.T) {
	now := time.Now()
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	for _, tc := range []struct {
		exp     *time.Time
		expired bool
	}{{nil, false}, {&past, true}, {&future, false}, {&now, true}} {
		tok := ACLToken{ExpirationTime: tc.exp}
		if tok.IsExpired(now) != tc.expired {
			t.Errorf("ExpirationTime %v: IsExpired %t", tc.exp, !tc.expired)
		}
	}
}

func TestACLPolicyAndRoleValidate(t *testing.T) {
	long := strings.Repeat("a", 129)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"policy", (&ACLPolicy{Name: "web-read_1"}).Validate(), ""},
		{"policy without name", (&ACLPolicy{}).Validate(), "Invalid Policy: no Name is set"},
		{"policy bad name", (&ACLPolicy{Name: "web read"}).Validate(), "Invalid Policy: invalid Name. Only alphanumeric characters, '-' and '_' are allowed"},
		{"policy long name", (&ACLPolicy{Name: long}).Validate(), "Invalid Policy: invalid Name. Only alphanumeric characters, '-' and '_' are allowed"},
		{"global-management rules", (&ACLPolicy{ID: ACLPolicyGlobalManagementID, Name: ACLPolicyGlobalManagementName, Rules: `acl = "read"`}).ValidateGlobalManagementChange(ACLGlobalManagementPolicy()),
			"Changing the Rules for the builtin global-management policy is not permitted"},
		{"global-management name", (&ACLPolicy{ID: ACLPolicyGlobalManagementID, Name: "root", Rules: ACLPolicyGlobalManagementRules}).ValidateGlobalManagementChange(ACLGlobalManagementPolicy()),
			"Changing the Name for the builtin global-management policy is not permitted"},
		{"global-management description", (&ACLPolicy{ID: ACLPolicyGlobalManagementID, Name: ACLPolicyGlobalManagementName, Rules: ACLPolicyGlobalManagementRules, Description: "x"}).ValidateGlobalManagementChange(ACLGlobalManagementPolicy()), ""},
		{"role", (&ACLRole{Name: "ops", ServiceIdentities: []ACLServiceIdentity{{ServiceName: "web"}}}).Validate(), ""},
		{"role without name", (&ACLRole{}).Validate(), "Invalid Role: no Name is set"},
		{"role bad name", (&ACLRole{Name: "a/b"}).Validate(), "Invalid Role: invalid Name. Only alphanumeric characters, '-' and '_' are allowed"},
		{"role identity", (&ACLRole{Name: "ops", NodeIdentities: []ACLNodeIdentity{{NodeName: "n"}}}).Validate(), "Node identity is missing the datacenter field on this role"},
		{"role service identity", (&ACLRole{Name: "ops", ServiceIdentities: []ACLServiceIdentity{{}}}).Validate(), "Service identity is missing the service name field on this role"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if tc.err != nil {
				got = tc.err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestACLTemplatedPolicies(t *testing.T) {
	names := map[string]bool{}
	for _, d := range ACLTemplatedPolicies() {
		names[d.TemplateName] = d.NeedsName()
	}
	want := map[string]bool{ACLTemplatedPolicyServiceName: true, ACLTemplatedPolicyNodeName: true, ACLTemplatedPolicyDNSName: false,
		ACLTemplatedPolicyNomadServerName: false, ACLTemplatedPolicyAPIGatewayName: true, ACLTemplatedPolicyNomadClientName: false}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("templates %v, want %v", names, want)
	}
	tp := ACLTemplatedPolicy{TemplateName: ACLTemplatedPolicyServiceName, TemplateVariables: &ACLTemplatedPolicyVariables{Name: "api"}}
	rules, err := tp.Rules()
	if err != nil || !strings.Contains(rules, `service "api-sidecar-proxy"`) || strings.Contains(rules, "{{") {
		t.Fatalf("rendered %q, %v", rules, err)
	}
}
