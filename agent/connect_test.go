package agent

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestConnectAuthorizeFollowsIntentions(t *testing.T) {
	_, url, _ := devAgent(t)
	waitFor(t, "the CA", func() bool {
		_, b := get(t, url+"/v1/connect/ca/roots")
		return strings.Contains(b, `"Active":true`)
	})
	var roots struct{ TrustDomain string }
	_, b := get(t, url+"/v1/connect/ca/roots")
	if err := json.Unmarshal([]byte(b), &roots); err != nil || roots.TrustDomain == "" {
		t.Fatalf("roots: %s %v", b, err)
	}
	authorize := func(src, dst string) (bool, string) {
		t.Helper()
		body := `{"Target":"` + dst + `","ClientCertURI":"spiffe://` + roots.TrustDomain + `/ns/default/dc/dc1/svc/` + src + `","ClientCertSerial":"01"}`
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/agent/connect/authorize", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var out struct {
			Authorized bool
			Reason     string
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("authorize: %d %v", resp.StatusCode, err)
		}
		return out.Authorized, out.Reason
	}
	if ok, reason := authorize("web", "db"); !ok || !strings.Contains(reason, "Default") {
		t.Fatalf("no intentions: %v %q", ok, reason)
	}
	if code, msg := put(t, url+"/v1/connect/intentions/exact?source=web&destination=db", `{"Action":"deny"}`); code != 200 {
		t.Fatalf("intention: %d %s", code, msg)
	}
	if code, msg := put(t, url+"/v1/connect/intentions/exact?source=*&destination=db", `{"Action":"allow"}`); code != 200 {
		t.Fatalf("intention: %d %s", code, msg)
	}
	// The exact intention beats the wildcard one.
	if ok, reason := authorize("web", "db"); ok || !strings.Contains(reason, "Matched L4 intention: web => db (deny)") {
		t.Fatalf("web->db: %v %q", ok, reason)
	}
	if ok, reason := authorize("api", "db"); !ok || !strings.Contains(reason, "* => db (allow)") {
		t.Fatalf("api->db: %v %q", ok, reason)
	}
}

func TestIntentionDefaultDenyFromACLPolicy(t *testing.T) {
	_, url, _ := devAgent(t, `{"acl": {"default_policy": "deny"}}`)
	waitFor(t, "a leader", func() bool { _, b := get(t, url+"/v1/status/leader"); return b != `""` })
	_, body := get(t, url+"/v1/connect/intentions/check?source=web&destination=db")
	if !strings.Contains(body, `"Allowed":false`) {
		t.Fatalf("check with default deny: %s", body)
	}
}
