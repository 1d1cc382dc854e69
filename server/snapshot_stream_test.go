package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/snapshot"
	"github.com/trellis-mesh/trellis/structs"
)

// TestSnapshotStreamsPastTheMessageLimit saves a state larger than
// structs.SnapshotMaxSize (the old one-message limit) over the internal
// RPC's streaming path into a file, and restores it from the file into
// another cluster: the archive never travels as one message, and a
// truncated or damaged stream of it is refused with nothing changed.
func TestSnapshotStreamsPastTheMessageLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("moves two archives of 65 MiB")
	}
	const values, valueSize = 66, 1 << 20
	// On disk: the Raft log and snapshots of 66 MiB stay out of memory.
	src := startTestCluster(t, 1, true)[0]
	waitForLeader(t, []*testServer{src}, 30*time.Second)
	// Random values: gzip cannot shrink the archive below the limit.
	value := make([]byte, valueSize)
	for i := range values {
		_, _ = rand.Read(value)
		var ok bool
		rpc(t, src.srv, structs.MethodKVSApply, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: fmt.Sprintf("big/%03d", i), Value: value}}, &ok)
	}
	last := kvGet(t, src.srv, fmt.Sprintf("big/%03d", values-1), false)

	path := filepath.Join(t.TempDir(), "big.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var reply structs.SnapshotSaveResponse
	ctx := structs.WithStream(context.Background(), &structs.Stream{Download: f})
	err = src.srv.pool.Call(ctx, addrOf(src), structs.MethodSnapshotSave.Name(), &structs.SnapshotSaveRequest{}, &reply)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("streamed save: %v", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() <= structs.SnapshotMaxSize || len(reply.Archive) != 0 || reply.Index == 0 || !reply.KnownLeader {
		t.Fatalf("archive of %d bytes (limit %d), reply %d archive bytes, index %d", info.Size(), structs.SnapshotMaxSize, len(reply.Archive), reply.Index)
	}
	meta, err := snapshot.ReadStream(openFile(t, path), io.Discard, -1)
	if err != nil {
		t.Fatalf("the streamed archive does not read back: %v", err)
	}
	if meta.Index != reply.Index || !hasRecords(meta, "KV", values) {
		t.Fatalf("meta %+v, reply index %d", meta, reply.Index)
	}

	dst := startTestCluster(t, 1, true)[0]
	waitForLeader(t, []*testServer{dst}, 30*time.Second)
	// The CA's first root is a write of its own: done before the
	// target's index is compared.
	waitForCA(t, dst.srv)
	kvPut(t, dst.srv, "dst/only", "x")
	restore := func(archive io.Reader) error {
		ctx := structs.WithStream(context.Background(), &structs.Stream{Upload: archive})
		return dst.srv.pool.Call(ctx, addrOf(dst), structs.MethodSnapshotRestore.Name(), &structs.SnapshotRestoreRequest{}, &struct{}{})
	}

	for _, tc := range []struct {
		name    string
		archive func() io.Reader
	}{
		{"truncated", func() io.Reader { return io.LimitReader(openFile(t, path), info.Size()*2/3) }},
		{"a byte changed in the state", func() io.Reader { return &flipAt{r: openFile(t, path), at: info.Size() / 2} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dst.srv.fsm.State()
			beforeIndex := before.LastIndex()
			if err := restore(tc.archive()); !errors.Is(err, structs.ErrSnapshotInvalid) {
				t.Fatalf("restore: %v, want ErrSnapshotInvalid", err)
			}
			if dst.srv.fsm.State() != before || before.LastIndex() != beforeIndex || kvGet(t, dst.srv, "dst/only", true) == nil {
				t.Fatal("a refused restore changed the target")
			}
		})
	}

	if err := restore(openFile(t, path)); err != nil {
		t.Fatalf("streamed restore: %v", err)
	}
	if e := kvGet(t, dst.srv, "dst/only", true); e != nil {
		t.Fatal("the target kept a key the snapshot does not have")
	}
	got := kvGet(t, dst.srv, last.Key, false)
	if got == nil || !bytes.Equal(got.Value, last.Value) || got.ModifyIndex != last.ModifyIndex {
		t.Fatalf("restored %s = %v, want the source's", last.Key, got)
	}
	var keys structs.IndexedKeyList
	rpc(t, dst.srv, structs.MethodKVSListKeys, &structs.KeyListRequest{Prefix: "big/"}, &keys)
	if len(keys.Keys) != values {
		t.Fatalf("%d keys restored, want %d", len(keys.Keys), values)
	}
}

// addrOf is a test server's server port address.
func addrOf(ts *testServer) string { return "127.0.0.1:" + strconv.Itoa(ts.rpcPort) }

func openFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func hasRecords(meta snapshot.Meta, typ string, n int) bool {
	for _, rc := range meta.Records {
		if rc.Type == typ {
			return rc.Count == n
		}
	}
	return false
}

// flipAt reads r with the byte at offset at inverted.
type flipAt struct {
	r   io.Reader
	at  int64
	off int64
}

func (f *flipAt) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if f.at >= f.off && f.at < f.off+int64(n) {
		p[f.at-f.off] ^= 0xff
	}
	f.off += int64(n)
	return n, err
}

// TestSettleStreamError: once a stream moved bytes, no failure lets the
// call be made again; a write whose upload began and broke may have been
// applied; errors before anything moved, and final answers, stay as they
// are.
func TestSettleStreamError(t *testing.T) {
	broken := &transportError{err: errors.New("connection reset"), sent: true}
	unsent := &transportError{err: errors.New("dial refused")}
	for _, tc := range []struct {
		name                 string
		err                  error
		write                bool
		uploaded, downloaded bool
		retry, unknown       bool
	}{
		{"read, nothing moved: a transport error retries", unsent, false, false, false, true, false},
		{"write, nothing moved: no leader retries", structs.ErrNoLeader, true, false, false, true, false},
		{"read, download moved, then no leader", structs.ErrNoLeader, false, false, true, false, false},
		{"read, download moved, then the connection broke", broken, false, false, true, false, false},
		{"write, upload moved, then the connection broke", broken, true, true, false, false, true},
		{"write, upload moved, then no leader", structs.ErrNoLeader, true, true, false, false, false},
		{"write, upload moved, then a final refusal", structs.ErrSnapshotInvalid, true, true, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := settleStreamError(tc.err, tc.uploaded, tc.downloaded)
			if got := canRetry(tc.write, false, err); got != tc.retry {
				t.Errorf("canRetry(%v) = %v, want %v", err, got, tc.retry)
			}
			if got := errors.Is(err, structs.ErrOutcomeUnknown); got != tc.unknown {
				t.Errorf("%v: outcome unknown %v, want %v", err, got, tc.unknown)
			}
			if errors.Is(tc.err, structs.ErrSnapshotInvalid) && !errors.Is(err, structs.ErrSnapshotInvalid) {
				t.Errorf("a final answer lost its sentinel: %v", err)
			}
		})
	}
}
