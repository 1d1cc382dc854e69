package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// TestSnapshotCLIThroughClient: `trellis snapshot save`, `inspect` and
// `restore` against a client agent, which forwards both to the leader of
// three server processes over the internal RPC. After the restore every
// server holds the saved keys and none of those written after the save; a
// truncated file is refused and changes nothing.
func TestSnapshotCLIThroughClient(t *testing.T) {
	c, _ := startAgentCluster(t, agentClusterConfig{clients: 1})
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	client := c.Clients()[0]
	addr := []string{"-http-addr", client.HTTPAddr()}

	saved := map[string]string{"app/a": "1", "app/b": "2"}
	for k, v := range saved {
		if err := rc.kvPut(ctx, client.HTTPAddr(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "backup.snap")
	if r := runCLI(ctx, t, append(append([]string{"snapshot", "save"}, addr...), file)...); r.code != 0 || !strings.HasPrefix(r.stdout, "Saved and verified snapshot to index ") {
		t.Fatal(r)
	}
	r := runCLI(ctx, t, "snapshot", "inspect", file)
	if r.code != 0 || !strings.Contains(r.stdout, " Index ") || !strings.Contains(r.stdout, " KV ") {
		t.Fatal(r)
	}

	// Writes after the save, which the restore must undo.
	if err := rc.kvPut(ctx, client.HTTPAddr(), "app/a", "changed"); err != nil {
		t.Fatal(err)
	}
	if err := rc.kvPut(ctx, client.HTTPAddr(), "app/new", "3"); err != nil {
		t.Fatal(err)
	}
	after := map[string]string{"app/a": "changed", "app/b": "2", "app/new": "3"}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.snap")
	if err := os.WriteFile(truncated, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(ctx, t, append(append([]string{"snapshot", "restore"}, addr...), truncated)...)
	if r.code != 1 || !strings.Contains(r.stderr, "500") || !strings.Contains(r.stderr, "invalid snapshot") {
		t.Fatal(r)
	}
	got, _, _, err := rc.kvList(ctx, client.HTTPAddr(), "app/", modeDefault)
	if err != nil || !maps.Equal(got, after) {
		t.Fatalf("after a refused restore: %v %v, want %v", got, err, after)
	}

	if r := runCLI(ctx, t, append(append([]string{"snapshot", "restore"}, addr...), file)...); r.code != 0 || r.stdout != "Restored snapshot\n" {
		t.Fatal(r)
	}
	eventually(t, syncTimeout, "the saved keys on every server", func() error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			got, _, _, err := rc.kvList(ctx, s.HTTPAddr(), "app/", modeStale)
			if err != nil {
				return err
			}
			if !maps.Equal(got, saved) {
				return fmt.Errorf("%s: %v, want %v", s.Node(), got, saved)
			}
			return nil
		})
	})
}
