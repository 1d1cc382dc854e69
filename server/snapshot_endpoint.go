package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// rpcMaxMessage is the largest internal RPC message, either way: a
// snapshot archive plus its envelope.
const rpcMaxMessage = structs.SnapshotMaxSize + 1<<20

// snapshotSave serves Snapshot.Save.
func (s *Server) snapshotSave(_ context.Context, _ *structs.SnapshotSaveRequest, reply *structs.SnapshotSaveResponse) error {
	meta, state, err := s.raftSnapshot()
	if err != nil {
		return err
	}
	// Decoding what we hand out both counts its records for the archive
	// and proves it restores.
	counts, err := s.fsm.Verify(bytes.NewReader(state))
	if err != nil {
		return fmt.Errorf("snapshot: the server's own snapshot does not decode: %w", err)
	}
	var buf bytes.Buffer
	err = snapshot.Write(&buf, snapshot.Meta{
		ID: meta.ID, Index: meta.Index, Term: meta.Term, Version: int(meta.Version),
		Records: archiveCounts(counts), Created: time.Now().UTC(),
	}, state)
	if err != nil {
		return err
	}
	if buf.Len() > structs.SnapshotMaxSize {
		return fmt.Errorf("%w: the archive is %d bytes, over the limit of %d", structs.ErrSnapshotTooLarge, buf.Len(), structs.SnapshotMaxSize)
	}
	reply.Archive = buf.Bytes()
	s.setQueryMeta(&reply.QueryMeta)
	reply.Index = meta.Index
	return nil
}

// raftSnapshot takes a Raft snapshot and reads it back whole.
func (s *Server) raftSnapshot() (*raft.SnapshotMeta, []byte, error) {
	f := s.raft.Snapshot()
	if err := f.Error(); err != nil {
		return nil, nil, fmt.Errorf("snapshot: take: %w", err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: open: %w", err)
	}
	defer func() { _ = rc.Close() }()
	if meta.Size > structs.SnapshotMaxSize {
		return nil, nil, fmt.Errorf("%w: the state is %d bytes, over the limit of %d", structs.ErrSnapshotTooLarge, meta.Size, structs.SnapshotMaxSize)
	}
	state, err := io.ReadAll(io.LimitReader(rc, meta.Size+1))
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: read: %w", err)
	}
	if int64(len(state)) != meta.Size {
		return nil, nil, fmt.Errorf("snapshot: read %d bytes of a %d-byte snapshot", len(state), meta.Size)
	}
	return meta, state, nil
}

func archiveCounts(counts []fsm.RecordCount) []snapshot.RecordCount {
	out := make([]snapshot.RecordCount, len(counts))
	for i, c := range counts {
		out[i] = snapshot.RecordCount{Type: c.Type, Count: c.Count}
	}
	return out
}

// snapshotRestore serves Snapshot.Restore on the leader. Everything that
// can be wrong with the archive is found before Raft sees it: Raft's
// restore writes the snapshot and then panics if the FSM refuses it.
func (s *Server) snapshotRestore(ctx context.Context, args *structs.SnapshotRestoreRequest, _ *struct{}) error {
	meta, state, err := snapshot.Read(bytes.NewReader(args.Archive), structs.SnapshotMaxSize)
	switch {
	case errors.Is(err, snapshot.ErrTooLarge):
		return fmt.Errorf("%w: %w", structs.ErrSnapshotTooLarge, err)
	case err != nil:
		return fmt.Errorf("%w: %w", structs.ErrSnapshotInvalid, err)
	}
	version := raft.SnapshotVersion(meta.Version)
	if version < raft.SnapshotVersionMin || version > raft.SnapshotVersionMax {
		return fmt.Errorf("%w: Raft snapshot version %d is not supported", structs.ErrSnapshotInvalid, meta.Version)
	}
	if _, err := s.fsm.Verify(bytes.NewReader(state)); err != nil {
		return fmt.Errorf("%w: state.bin: %w", structs.ErrSnapshotInvalid, err)
	}
	err = s.raft.Restore(&raft.SnapshotMeta{
		Version: version, ID: meta.ID, Index: meta.Index, Term: meta.Term, Size: int64(len(state)),
	}, bytes.NewReader(state), 0)
	if err != nil {
		return restoreError(err)
	}
	s.logger.Info("restored a user snapshot", "snapshot", meta.ID, "index", meta.Index)
	return s.reassertLeadership(ctx)
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
