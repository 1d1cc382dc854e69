package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/snapshot"
)

func testSnapshotArchive(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	err := snapshot.Write(&buf, snapshot.Meta{
		ID: "2-57-1700000000000", Index: 57, Term: 2, Version: 1,
		Records: []snapshot.RecordCount{{Type: "Node", Count: 3}, {Type: "KV", Count: 12}, {Type: "Index", Count: 9}},
		Created: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
	}, bytes.Repeat([]byte("s"), 667))
	if err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestSnapshotSave(t *testing.T) {
	archive := testSnapshotArchive(t)
	dir := t.TempDir()
	get := sentRequest{Method: "GET", Path: "/v1/snapshot"}
	runCases(t, []cliCase{
		{name: "save", args: []string{"snapshot", "save", filepath.Join(dir, "a.snap")},
			routes: map[string]reply{"GET /v1/snapshot": {body: archive}},
			want:   []sentRequest{get}, stdout: "Saved and verified snapshot to index 57\n"},
		{name: "stale from dc2", args: []string{"snapshot", "save", "-stale", "-datacenter", "dc2", filepath.Join(dir, "b.snap")},
			routes: map[string]reply{"GET /v1/snapshot": {body: archive}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/snapshot", Query: "dc=dc2&stale="}}, skipStdout: true},
		{name: "damaged answer is not saved", args: []string{"snapshot", "save", filepath.Join(dir, "bad.snap")},
			routes: map[string]reply{"GET /v1/snapshot": {body: archive[:len(archive)/2]}},
			want:   []sentRequest{get}, code: 1, stderrHas: []string{"Error verifying snapshot file: snapshot: corrupt archive"}},
		{name: "server error", args: []string{"snapshot", "save", filepath.Join(dir, "c.snap")},
			routes: map[string]reply{"GET /v1/snapshot": {status: 500, body: "No cluster leader"}},
			want:   []sentRequest{get}, code: 1, stderrHas: []string{"Error saving snapshot: Unexpected response code: 500 (No cluster leader)"}},
		{name: "no file", args: []string{"snapshot", "save"}, code: 1, stderrHas: []string{"Missing FILE argument"}},
		{name: "two files", args: []string{"snapshot", "save", "x", "y"}, code: 1, stderrHas: []string{"Too many arguments (expected 1, got 2)"}},
	})
	if got, err := os.ReadFile(filepath.Join(dir, "a.snap")); err != nil || string(got) != archive {
		t.Errorf("saved file: %v (%d bytes, want %d)", err, len(got), len(archive))
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.snap")); !os.IsNotExist(err) {
		t.Errorf("a damaged snapshot was saved under the requested name: %v", err)
	}
}

func TestSnapshotRestore(t *testing.T) {
	archive := testSnapshotArchive(t)
	file := filepath.Join(t.TempDir(), "a.snap")
	if err := writeTestFile(file, archive); err != nil {
		t.Fatal(err)
	}
	put := sentRequest{Method: "PUT", Path: "/v1/snapshot", Body: archive, ContentType: "application/x-gzip"}
	runCases(t, []cliCase{
		{name: "restore", args: []string{"snapshot", "restore", file},
			routes: map[string]reply{"PUT /v1/snapshot": {}},
			want:   []sentRequest{put}, stdout: "Restored snapshot\n"},
		{name: "refused", args: []string{"snapshot", "restore", file},
			routes: map[string]reply{"PUT /v1/snapshot": {status: 500, body: "invalid snapshot: snapshot: corrupt archive: gzip: invalid header"}},
			want:   []sentRequest{put}, code: 1,
			stderrHas: []string{"Error restoring snapshot: Unexpected response code: 500 (invalid snapshot: snapshot: corrupt archive: gzip: invalid header)"}},
		{name: "missing file", args: []string{"snapshot", "restore", file + ".nope"}, code: 1, stderrHas: []string{"Error opening snapshot file"}},
	})
}

func TestSnapshotInspect(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "a.snap"), filepath.Join(dir, "bad.snap")
	archive := testSnapshotArchive(t)
	if err := writeTestFile(good, archive); err != nil {
		t.Fatal(err)
	}
	if err := writeTestFile(bad, archive[:len(archive)-10]); err != nil {
		t.Fatal(err)
	}
	runCases(t, []cliCase{
		{name: "inspect", args: []string{"snapshot", "inspect", good},
			stdout: " ID       2-57-1700000000000\n Size     667\n Index    57\n Term     2\n Version  1\n\n" +
				" Type   Count\n ----   ----\n Node   3\n KV     12\n Index  9\n ----   ----\n Total  24\n"},
		{name: "damaged", args: []string{"snapshot", "inspect", bad}, code: 1, stderrHas: []string{"Error verifying snapshot file: snapshot: corrupt archive"}},
		{name: "group lists subcommands", args: []string{"snapshot", "-h"}, stdoutHas: []string{"inspect", "restore", "save"}},
	})
}
