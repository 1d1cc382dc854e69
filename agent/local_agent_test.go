package agent

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/version"
)

func put(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAgentServiceAPI(t *testing.T) {
	_, url, _ := devAgent(t)
	waitFor(t, "a leader", func() bool { _, b := get(t, url+"/v1/status/leader"); return b != `""` })

	code, body := put(t, url+"/v1/agent/service/register", `{"name":"web","port":8080,"check":{"ttl":"30s"},"connect":{"sidecar_service":{}}}`)
	if code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	var services map[string]map[string]any
	_, body = get(t, url+"/v1/agent/services")
	if err := json.Unmarshal([]byte(body), &services); err != nil {
		t.Fatal(err)
	}
	side, ok := services["web-sidecar-proxy"]
	if !ok || side["Kind"] != "connect-proxy" || side["Port"].(float64) < 21000 || side["Port"].(float64) > 21255 {
		t.Fatalf("sidecar = %v", side)
	}
	if _, hasConnect := services["web"]["Connect"]; hasConnect {
		t.Fatalf("parent shown with its Connect block: %v", services["web"])
	}

	// Bad registrations: 400 naming the problem, nothing changes.
	for _, bad := range []string{
		`{"port":1}`,
		`{"name":"x","port":70000}`,
		`{"name":"x","check":{"http":"http://127.0.0.1:1","interval":"-1s"}}`,
		`{"name":"x","check":{"notes":"no type"}}`,
		`{"name":"x","port":"not a number"}`,
		`{"name":"x","port":1,"connect":{"sidecar_service":{"port":21000}}}`,
	} {
		if code, msg := put(t, url+"/v1/agent/service/register", bad); code != 400 || msg == "" {
			t.Errorf("register %s: %d %q, want 400 with a message", bad, code, msg)
		}
	}
	_, after := get(t, url+"/v1/agent/services")
	var again map[string]any
	_ = json.Unmarshal([]byte(after), &again)
	if len(again) != 2 {
		t.Fatalf("bad registrations changed the services: %s", after)
	}

	// TTL check through the API reaches the catalog's health.
	status := func() string {
		_, b := get(t, url+"/v1/health/checks/web")
		var checks []struct{ CheckID, Status string }
		_ = json.Unmarshal([]byte(b), &checks)
		for _, c := range checks {
			if c.CheckID == "service:web" {
				return c.Status
			}
		}
		return ""
	}
	for _, step := range []struct{ verb, want string }{{"pass", "passing"}, {"warn", "warning"}, {"fail", "critical"}} {
		if code, msg := put(t, url+"/v1/agent/check/"+step.verb+"/service:web?note=x", ""); code != 200 {
			t.Fatalf("%s: %d %s", step.verb, code, msg)
		}
		waitFor(t, "status "+step.want, func() bool { return status() == step.want })
	}
	if code, _ := put(t, url+"/v1/agent/check/pass/nope", ""); code != 404 {
		t.Fatalf("unknown check: %d", code)
	}

	// Blocking by content hash: returns at once with a new hash, waits with
	// the current one until the service changes.
	resp, err := http.Get(url + "/v1/agent/service/web")
	if err != nil {
		t.Fatal(err)
	}
	hash := resp.Header.Get("X-Consul-ContentHash")
	_ = resp.Body.Close()
	if hash == "" {
		t.Fatal("no content hash")
	}
	done := make(chan string, 1)
	go func() {
		r, err := http.Get(url + "/v1/agent/service/web?hash=" + hash + "&wait=10s")
		if err != nil {
			done <- ""
			return
		}
		defer func() { _ = r.Body.Close() }()
		done <- r.Header.Get("X-Consul-ContentHash")
	}()
	select {
	case <-done:
		t.Fatal("hash query returned without a change")
	case <-time.After(300 * time.Millisecond):
	}
	put(t, url+"/v1/agent/service/register", `{"name":"web","port":8080,"tags":["v2"],"check":{"ttl":"30s"},"connect":{"sidecar_service":{}}}`)
	select {
	case h := <-done:
		if h == "" || h == hash {
			t.Fatalf("hash after change = %q (was %q)", h, hash)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hash query did not wake on the change")
	}

	// Maintenance takes the service out of passing results and back.
	put(t, url+"/v1/agent/check/pass/service:web", "")
	if code, msg := put(t, url+"/v1/agent/service/maintenance/web?enable=true&reason=deploy", ""); code != 200 {
		t.Fatalf("maintenance: %d %s", code, msg)
	}
	waitFor(t, "maintenance in the catalog", func() bool {
		_, b := get(t, url+"/v1/health/checks/web")
		return strings.Contains(b, "_service_maintenance:web") && strings.Contains(b, "deploy")
	})
	put(t, url+"/v1/agent/service/maintenance/web?enable=false", "")
	waitFor(t, "maintenance cleared", func() bool {
		_, b := get(t, url+"/v1/health/checks/web")
		return !strings.Contains(b, "_service_maintenance:web")
	})

	// Deregistering the parent removes the sidecar, locally and in the catalog.
	if code, msg := put(t, url+"/v1/agent/service/deregister/web", ""); code != 200 {
		t.Fatalf("deregister: %d %s", code, msg)
	}
	if code, _ := put(t, url+"/v1/agent/service/deregister/web", ""); code != 404 {
		t.Fatalf("second deregister: %d", code)
	}
	waitFor(t, "catalog without web and its sidecar", func() bool {
		_, b := get(t, url+"/v1/catalog/services")
		return !strings.Contains(b, `"web"`) && !strings.Contains(b, "web-sidecar-proxy")
	})
}

func TestDeregisterCriticalServiceAfter(t *testing.T) {
	_, url, _ := devAgent(t)
	waitFor(t, "a leader", func() bool { _, b := get(t, url+"/v1/status/leader"); return b != `""` })
	// TTL checks start critical; this one never gets an update.
	code, msg := put(t, url+"/v1/agent/service/register",
		`{"name":"flaky","port":1,"check":{"ttl":"30s","deregister_critical_service_after":"1s"}}`)
	if code != 200 {
		t.Fatalf("register: %d %s", code, msg)
	}
	code, msg = put(t, url+"/v1/agent/service/register", `{"name":"steady","port":2,"check":{"ttl":"30s","status":"passing","deregister_critical_service_after":"1s"}}`)
	if code != 200 {
		t.Fatalf("register: %d %s", code, msg)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, body := get(t, url+"/v1/agent/services")
		if !strings.Contains(body, `"flaky"`) {
			if !strings.Contains(body, `"steady"`) {
				t.Fatalf("the passing service was reaped too: %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("critical service not reaped: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNodeMetaCarriesConsulKeys: the node's catalog metadata holds the
// configured pairs and the two Consul's agents add, without changing the
// configuration's map.
func TestNodeMetaCarriesConsulKeys(t *testing.T) {
	for _, configured := range []map[string]string{nil, {"rack": "r1"}} {
		before := maps.Clone(configured)
		got := nodeMeta(configured)
		if got["consul-version"] != version.ConsulVersion || got["consul-network-segment"] != "" || len(got) != len(configured)+2 {
			t.Errorf("nodeMeta(%v) = %v", configured, got)
		}
		if configured != nil && got["rack"] != "r1" {
			t.Errorf("nodeMeta(%v) lost the configured pairs: %v", configured, got)
		}
		if !maps.Equal(configured, before) {
			t.Errorf("nodeMeta changed its argument: %v", configured)
		}
	}
}

// TestLocality: the node's configured locality and a service's own reach
// the catalog, and a sidecar without one takes its parent's, as in Consul.
func TestLocality(t *testing.T) {
	_, url, stop := devAgent(t, `{"locality": {"region": "us-east-1", "zone": "us-east-1a"}}`)
	defer stop()
	if code, body := put(t, url+"/v1/agent/service/register", `{"Name": "web", "Port": 8080,
		"Locality": {"Region": "us-east-1", "Zone": "us-east-1b"},
		"Connect": {"SidecarService": {}}}`); code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	var node struct {
		Node struct {
			Locality *struct{ Region, Zone string }
		}
	}
	var self struct{ Config struct{ NodeName string } }
	getJSON(t, url+"/v1/agent/self", &self)
	getJSON(t, url+"/v1/catalog/node/"+self.Config.NodeName, &node)
	if l := node.Node.Locality; l == nil || l.Region != "us-east-1" || l.Zone != "us-east-1a" {
		t.Errorf("node locality = %+v", l)
	}
	for _, svc := range []string{"web", "web-sidecar-proxy"} {
		var instances []struct {
			ServiceLocality *struct{ Region, Zone string }
		}
		getJSON(t, url+"/v1/catalog/service/"+svc, &instances)
		if len(instances) != 1 || instances[0].ServiceLocality == nil || instances[0].ServiceLocality.Zone != "us-east-1b" {
			t.Errorf("%s instances = %+v", svc, instances)
		}
	}
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	code, body := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}
