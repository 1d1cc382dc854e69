package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/fsm"
	"github.com/trellis-mesh/trellis/snapshot"
	"github.com/trellis-mesh/trellis/structs"
)

// Snapshots of the whole replicated state (GET and PUT /v1/snapshot).
//
// A save asks Raft for a snapshot (as Consul does), so that what the
// archive carries is the FSM stream Raft itself keeps, with Raft's index
// and term. A restore hands the verified stream to Raft's user restore on
// the leader: the leader installs it at an index past its log, and the gap
// makes every follower take it by InstallSnapshot; the FSM's Restore swaps
// the store and abandons the old one, which wakes every blocking query.
// Both stream the archive when the call carries a structs.Stream.

// rpcMaxMessage is the largest internal RPC message, either way: a
// snapshot archive sent without a stream, plus its envelope.
const rpcMaxMessage = structs.SnapshotMaxSize + 1<<20

// snapshotSave serves Snapshot.Save: the archive goes to the call's
// Stream as it is written, or, without one, into reply.Archive up to
// SnapshotMaxSize.
func (s *Server) snapshotSave(ctx context.Context, _ *structs.SnapshotSaveRequest, reply *structs.SnapshotSaveResponse) error {
	if st := structs.StreamOf(ctx); st != nil && st.Download != nil {
		return s.writeSnapshot(st.Download, reply)
	}
	buf := &cappedBuffer{limit: structs.SnapshotMaxSize}
	if err := s.writeSnapshot(buf, reply); err != nil {
		return err
	}
	reply.Archive = buf.Bytes()
	return nil
}

// writeSnapshot takes a Raft snapshot and writes its archive to w. Raft's
// stream can be opened once, and the archive's meta (its record counts)
// comes before the state, so the stream is spooled to a temporary file
// first: it is decoded from there (which counts the records and proves
// that it restores), then archived from there, never whole in memory.
// reply is complete before the first byte reaches w.
func (s *Server) writeSnapshot(w io.Writer, reply *structs.SnapshotSaveResponse) error {
	f := s.raft.Snapshot()
	if err := f.Error(); err != nil {
		return fmt.Errorf("snapshot: take: %w", err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("snapshot: open: %w", err)
	}
	defer func() { _ = rc.Close() }()
	spool, err := s.snapshotSpool()
	if err != nil {
		return err
	}
	defer spool.discard()
	n, err := io.Copy(spool.f, rc)
	if err != nil {
		return fmt.Errorf("snapshot: read: %w", err)
	}
	if n != meta.Size {
		return fmt.Errorf("snapshot: read %d bytes of a %d-byte snapshot", n, meta.Size)
	}
	// Decoding what we hand out both counts its records for the archive
	// and proves it restores.
	counts, err := s.fsm.Verify(spool.reader())
	if err != nil {
		return fmt.Errorf("snapshot: the server's own snapshot does not decode: %w", err)
	}
	s.setQueryMeta(&reply.QueryMeta)
	reply.Index = meta.Index
	return snapshot.WriteStream(w, snapshot.Meta{
		ID: meta.ID, Index: meta.Index, Term: meta.Term, Version: int(meta.Version), Size: meta.Size,
		Records: archiveCounts(counts), Created: time.Now().UTC(),
	}, spool.reader())
}

func archiveCounts(counts []fsm.RecordCount) []snapshot.RecordCount {
	out := make([]snapshot.RecordCount, len(counts))
	for i, c := range counts {
		out[i] = snapshot.RecordCount{Type: c.Type, Count: c.Count}
	}
	return out
}

// snapshotRestore serves Snapshot.Restore on the leader, reading the
// archive from the call's Stream (or, without one, from args.Archive, up
// to SnapshotMaxSize). Everything that can be wrong with the archive is
// found before Raft sees it: its state is spooled to a temporary file
// while the checksums are computed, and only an archive whose every sum
// matched and whose state decodes goes to Raft's restore (which writes
// the snapshot and then panics if the FSM refuses it).
func (s *Server) snapshotRestore(ctx context.Context, args *structs.SnapshotRestoreRequest, _ *struct{}) error {
	var archive io.Reader = bytes.NewReader(args.Archive)
	limit := int64(structs.SnapshotMaxSize)
	if st := structs.StreamOf(ctx); st != nil && st.Upload != nil {
		archive, limit = st.Upload, -1
	}
	spool, err := s.snapshotSpool()
	if err != nil {
		return err
	}
	defer spool.discard()
	out := bufio.NewWriter(spool.f)
	meta, err := snapshot.ReadStream(archive, out, limit)
	switch {
	case errors.Is(err, snapshot.ErrTooLarge):
		return fmt.Errorf("%w: %w", structs.ErrSnapshotTooLarge, err)
	case err != nil:
		return fmt.Errorf("%w: %w", structs.ErrSnapshotInvalid, err)
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("snapshot: spool: %w", err)
	}
	version := raft.SnapshotVersion(meta.Version)
	if version < raft.SnapshotVersionMin || version > raft.SnapshotVersionMax {
		return fmt.Errorf("%w: Raft snapshot version %d is not supported", structs.ErrSnapshotInvalid, meta.Version)
	}
	if _, err := s.fsm.Verify(spool.reader()); err != nil {
		return fmt.Errorf("%w: state.bin: %w", structs.ErrSnapshotInvalid, err)
	}
	err = s.raft.Restore(&raft.SnapshotMeta{
		Version: version, ID: meta.ID, Index: meta.Index, Term: meta.Term, Size: meta.Size,
	}, spool.reader(), 0)
	if err != nil {
		return restoreError(err)
	}
	s.logger.Info("restored a user snapshot", "snapshot", meta.ID, "index", meta.Index)
	return s.reassertLeadership(ctx)
}

// snapshotSpool is a temporary file for a snapshot's state: in the data
// directory (where the Raft snapshots are, so with room for one), or the
// system's temporary directory for an in-memory server.
func (s *Server) snapshotSpool() (*spoolFile, error) {
	dir := ""
	if !s.cfg.InMemory && s.cfg.DataDir != "" {
		dir = s.cfg.DataDir
	}
	f, err := os.CreateTemp(dir, "snapshot-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("snapshot: spool: %w", err)
	}
	return &spoolFile{f: f}, nil
}

// spoolFile is a temporary file read from its start any number of times.
type spoolFile struct{ f *os.File }

// reader reads the file from its start.
func (s *spoolFile) reader() io.Reader {
	return bufio.NewReaderSize(io.NewSectionReader(s.f, 0, 1<<62), 1<<20)
}

// discard closes and removes the file.
func (s *spoolFile) discard() {
	_ = s.f.Close()
	_ = os.Remove(s.f.Name())
}

// cappedBuffer collects an archive up to limit bytes and fails with
// ErrSnapshotTooLarge past it.
type cappedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		return 0, fmt.Errorf("%w: the archive is over the limit of %d bytes without a stream", structs.ErrSnapshotTooLarge, b.limit)
	}
	return b.Buffer.Write(p)
}

// restoreError tells the client what a failed raft.Restore means. The
// errors Raft's leadership and shutdown give may come after the snapshot
// was installed (while Raft commits the entry after it); any other error
// comes from a check before it installed anything.
func restoreError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: restore: %v", structs.ErrOutcomeUnknown, err) //nolint:errorlint // Raft's "not leader" must not make this read as "not applied"
	}
	return fmt.Errorf("snapshot: restore refused: %w", err)
}

// reassertLeadership restarts the leader loop, as a new term would, so
// that the leader's working state (session TTL timers, the CA's serial
// block, the catalog's view of Serf members) is rebuilt from the restored
// store rather than the one it replaced.
func (s *Server) reassertLeadership(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case s.reassertCh <- done:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ctx.Done():
		return ErrShutdown
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ctx.Done():
		return ErrShutdown
	}
}
