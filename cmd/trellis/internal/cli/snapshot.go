package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/trellis-mesh/trellis/snapshot"
)

const snapshotSaveHelp = `
Usage: trellis snapshot save [options] FILE

  Retrieves an atomic, point-in-time snapshot of the state of the Trellis
  servers (catalog, key/value entries, sessions, config entries and
  intentions, the Connect CA) and saves it to FILE, once it has been
  verified. By default the leader answers; with -stale any server may.`

// runSnapshotSave saves GET /v1/snapshot to FILE as Consul's `snapshot
// save` does: into FILE.unverified first, renamed to FILE once the archive
// reads back whole, so that FILE is never a damaged snapshot.
func runSnapshotSave(args []string, env *Env) int {
	c, file, code, ok := snapshotClient("snapshot save", snapshotSaveHelp, true, args, env)
	if !ok {
		return code
	}
	resp, err := c.open(context.Background(), request{method: http.MethodGet, path: "/v1/snapshot", withDC: true})
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error saving snapshot: %s\n", err)
		return 1
	}
	defer func() { _ = resp.Body.Close() }()
	// Streamed to the file and verified from it: a snapshot of any size
	// passes through without being held in memory.
	unverified := file + ".unverified"
	if err := writeFile(unverified, resp.Body); err != nil {
		fmt.Fprintf(env.Stderr, "Error writing unverified snapshot file: %s\n", err)
		return 1
	}
	meta, err := verifySnapshotFile(unverified)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error verifying snapshot file: %s\n", err)
		return 1
	}
	if err := os.Rename(unverified, file); err != nil {
		fmt.Fprintf(env.Stderr, "Error renaming %q to %q: %s\n", unverified, file, err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "Saved and verified snapshot to index %d\n", meta.Index)
	return 0
}

const snapshotRestoreHelp = `
Usage: trellis snapshot restore [options] FILE

  Restores the snapshot in FILE into the cluster, replacing the whole
  state of the Trellis servers; every server ends with the snapshot's
  state. A damaged snapshot is refused and changes nothing.

  This is a disaster-recovery operation: it is meant for a fresh cluster,
  and the cluster's writes in flight while it runs fail.`

// runSnapshotRestore sends FILE to PUT /v1/snapshot.
func runSnapshotRestore(args []string, env *Env) int {
	c, file, code, ok := snapshotClient("snapshot restore", snapshotRestoreHelp, false, args, env)
	if !ok {
		return code
	}
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error opening snapshot file: %s\n", err)
		return 1
	}
	defer func() { _ = f.Close() }()
	_, _, err = c.do(context.Background(), request{
		method: http.MethodPut, path: "/v1/snapshot", body: f,
		contentType: "application/x-gzip", withDC: true,
	})
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error restoring snapshot: %s\n", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, "Restored snapshot")
	return 0
}

const snapshotInspectHelp = `
Usage: trellis snapshot inspect FILE

  Verifies the snapshot in FILE and displays its metadata (ID, Size,
  Index, Term, Version) and how many records of each type it holds. It
  reads the file only; no agent is needed.`

// runSnapshotInspect prints a snapshot's metadata in the shape of
// Consul's `snapshot inspect`: the fields, then a table of record counts
// by type with a total. (Trellis records its counts when it saves a
// snapshot; Consul's table also has a size column, which is left out.)
func runSnapshotInspect(args []string, env *Env) int {
	fs := newFlagSet("snapshot inspect", snapshotInspectHelp, env.Stderr)
	file, code, ok := snapshotFileArg(fs, args, env)
	if !ok {
		return code
	}
	meta, err := verifySnapshotFile(file)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error verifying snapshot file: %s\n", err)
		return 1
	}
	rows := []string{
		"ID" + columnSep + meta.ID,
		"Size" + columnSep + fmt.Sprint(meta.Size),
		"Index" + columnSep + fmt.Sprint(meta.Index),
		"Term" + columnSep + fmt.Sprint(meta.Term),
		"Version" + columnSep + fmt.Sprint(meta.Version),
	}
	fmt.Fprintln(env.Stdout, indentColumns(rows))
	fmt.Fprintln(env.Stdout)
	table := []string{"Type" + columnSep + "Count", "----" + columnSep + "----"}
	total := 0
	for _, rc := range meta.Records {
		table = append(table, rc.Type+columnSep+fmt.Sprint(rc.Count))
		total += rc.Count
	}
	table = append(table, "----"+columnSep+"----", "Total"+columnSep+fmt.Sprint(total))
	fmt.Fprintln(env.Stdout, indentColumns(table))
	return 0
}

// writeFile writes r to a new file at path.
func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// verifySnapshotFile reads and verifies the archive in path, of any size,
// without holding its state in memory.
func verifySnapshotFile(path string) (snapshot.Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return snapshot.Meta{}, err
	}
	defer func() { _ = f.Close() }()
	return snapshot.ReadStream(f, io.Discard, -1)
}

// indentColumns aligns rows and starts each line with a space, as
// Consul's snapshot inspect prints its tables.
func indentColumns(rows []string) string {
	return " " + strings.ReplaceAll(columnize(rows), "\n", "\n ")
}

// snapshotClient parses the HTTP flags (the server ones too when server is
// set) and the FILE argument of save and restore, and builds the client.
func snapshotClient(name, help string, server bool, args []string, env *Env) (c *apiClient, file string, code int, ok bool) {
	var hf httpFlags
	fs := newFlagSet(name, help, env.Stderr)
	hf.register(fs, server)
	if file, code, ok = snapshotFileArg(fs, args, env); !ok {
		return nil, "", code, false
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error initializing client: %s\n", err)
		return nil, "", 1, false
	}
	return c, file, 0, true
}

// snapshotFileArg parses the flags and the one FILE argument the snapshot
// commands take, with Consul's messages.
func snapshotFileArg(fs *flag.FlagSet, args []string, env *Env) (file string, code int, ok bool) {
	if code, ok := parseFlags(fs, args); !ok {
		return "", code, false
	}
	switch rest := fs.Args(); len(rest) {
	case 0:
		fmt.Fprintln(env.Stderr, "Missing FILE argument")
		return "", 1, false
	case 1:
		return rest[0], 0, true
	default:
		fmt.Fprintf(env.Stderr, "Too many arguments (expected 1, got %d)\n", len(rest))
		return "", 1, false
	}
}
