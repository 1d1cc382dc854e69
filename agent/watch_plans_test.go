package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestConfigWatchesRunAndReload runs a config file's watches against a
// -dev agent: a script handler gets the key's view on its standard input
// and CONSUL_INDEX, an HTTP handler gets it in a POST, and a reload
// replaces the watches (the old key's changes no longer run a handler).
func TestConfigWatchesRunAndReload(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "script.out")

	var mu sync.Mutex
	var posts []string // guarded by mu
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, r.Method+" "+r.Header.Get("X-Consul-Index")+" "+r.Header.Get("X-Test")+" "+string(b))
		mu.Unlock()
	}))
	defer sink.Close()

	watchesFor := func(key string) string {
		return fmt.Sprintf(`watches = [
  { type = "key", key = %q, args = ["/bin/sh", "-c", "cat >> %s; echo \" index=$CONSUL_INDEX\" >> %s"] },
  { type = "key", key = %q, handler_type = "http",
    http_handler_config { path = %q, method = "PUT", header = { X-Test = ["yes"] } } },
]
`, key, out, out, key, sink.URL)
	}
	a, url, file := reloadableAgent(t, watchesFor("app/one"))
	_ = a
	put := func(key, value string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, url+"/v1/kv/"+key, strings.NewReader(value))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	scriptSaw := func(s string) bool {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), s)
	}
	postsWith := func(s string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, p := range posts {
			if strings.Contains(p, s) {
				n++
			}
		}
		return n
	}

	// A missing key is handed on as null first, as Consul's key watch does.
	waitFor(t, "the first (empty) view", func() bool { return scriptSaw("null index=") && postsWith("null") > 0 })
	put("app/one", "v1")
	v1 := `"Value":"djE="` // base64 of v1
	waitFor(t, "the script handler to see v1", func() bool { return scriptSaw(v1) })
	waitFor(t, "the HTTP handler to see v1", func() bool { return postsWith(v1) > 0 })
	mu.Lock()
	for _, p := range posts {
		if strings.Contains(p, v1) {
			parts := strings.SplitN(p, " ", 4)
			if parts[0] != http.MethodPut || parts[1] == "" || parts[1] == "0" || parts[2] != "yes" {
				t.Errorf("HTTP handler request %q: want PUT, X-Consul-Index set, X-Test: yes", p)
			}
			var pair map[string]any
			if err := json.Unmarshal([]byte(parts[3]), &pair); err != nil || pair["Key"] != "app/one" {
				t.Errorf("HTTP handler body %q is not the key's pair (%v)", parts[3], err)
			}
		}
	}
	mu.Unlock()

	// A reload with a watch that does not parse is refused and keeps the
	// running watches.
	if err := os.WriteFile(file, []byte(`watches = [{ type = "key", args = ["x"] }]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), "Must specify a single key") {
		t.Fatalf("reload with a bad watch = %v", err)
	}
	put("app/one", "v2")
	waitFor(t, "the kept watch to see v2", func() bool { return scriptSaw(`"Value":"djI="`) })

	// Reload onto another key: the first key's changes run nothing more.
	if err := os.WriteFile(file, []byte(watchesFor("app/two")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	put("app/two", "w1")
	waitFor(t, "the new watch to see w1", func() bool { return scriptSaw(`"Value":"dzE="`) && postsWith(`"Value":"dzE="`) > 0 })
	put("app/one", "v3")
	put("app/two", "w2") // the new watch sees this after v3 was written
	waitFor(t, "the new watch to see w2", func() bool { return scriptSaw(`"Value":"dzI="`) && postsWith(`"Value":"dzI="`) > 0 })
	if scriptSaw(`"Value":"djM="`) || postsWith(`"Value":"djM="`) > 0 {
		t.Error("a watch removed by reload still ran its handler")
	}
}
