package server

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// ErrCorruptRaftData: a file under <data-dir>/raft failed its integrity
// check. The server refuses to start on it rather than serve a state
// that may be wrong: a server of a cluster can be wiped and rejoin, and
// the others send it everything again.
var ErrCorruptRaftData = errors.New("corrupt raft data")

// openRaftLog opens the Raft log store at path, with checksums on its
// entries (raft_checksum.go), and verifies it (verifyRaftLog). bbolt reads
// its pages through a memory map, so a damaged page can make it read
// outside the file: the process would die of SIGSEGV or SIGBUS with no
// word of which file is at fault. Faults are turned into panics for the
// check (runtime/debug.SetPanicOnFault, meant for memory-mapped files) and
// the panic into ErrCorruptRaftData.
func openRaftLog(path string) (bolt *raftboltdb.BoltStore, logs *checksumLog, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if bolt != nil {
				_ = bolt.Close()
			}
			bolt, logs, err = nil, nil, corrupt(path, fmt.Errorf("%v", r))
		}
	}()
	bolt, err = raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		return nil, nil, fmt.Errorf("server: open %s: %w", path, err)
	}
	logs, err = newChecksumLog(bolt, bolt)
	if err == nil {
		err = verifyRaftLog(path, logs, bolt)
	}
	if err != nil {
		_ = bolt.Close()
		return nil, nil, err
	}
	return bolt, logs, nil
}

// verifyRaftLog reads every entry of the Raft log before Raft starts on
// it: the entries must run without a gap from the first index to the last
// and each must decode. bbolt survives a torn write of its file's tail by
// falling back to its last complete transaction; damage elsewhere is found
// here, with the file named, not later as a panic in the middle of
// applying the log or as a wrong entry.
func verifyRaftLog(path string, logs raft.LogStore, stable raft.StableStore) error {
	// The keys Raft reads from its stable store at start.
	for _, k := range []string{"CurrentTerm", "LastVoteTerm"} {
		if _, err := stable.GetUint64([]byte(k)); err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
			return corrupt(path, fmt.Errorf("%s: %w", k, err))
		}
	}
	if _, err := stable.Get([]byte("LastVoteCand")); err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return corrupt(path, fmt.Errorf("LastVoteCand: %w", err))
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return corrupt(path, err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return corrupt(path, err)
	}
	if first == 0 && last == 0 {
		return nil
	}
	if first == 0 || first > last {
		return corrupt(path, fmt.Errorf("log runs from %d to %d", first, last))
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := logs.GetLog(i, &l); err != nil {
			return corrupt(path, fmt.Errorf("entry %d of %d..%d: %w", i, first, last, err))
		}
		if l.Index != i {
			return corrupt(path, fmt.Errorf("entry %d says it is %d", i, l.Index))
		}
	}
	return nil
}

// verifyNewestSnapshot reads the newest snapshot through its checksum, as
// Raft would when it restores it. Raft skips a snapshot that fails and
// restores an older one, which the log may no longer continue; refusing
// here names the file instead.
func verifyNewestSnapshot(dir string, snaps *raft.FileSnapshotStore) error {
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptRaftData, filepath.Join(dir, "snapshots"), err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
	}
	if len(list) == 0 {
		return nil
	}
	_, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return corrupt(filepath.Join(dir, "snapshots", list[0].ID, "state.bin"), err)
	}
	return rc.Close()
}

func corrupt(path string, err error) error {
	return fmt.Errorf("%w: %s: %v: refusing to start rather than serve a state that may be wrong "+
		"(a server of a cluster can start again with an empty data dir and catch up from the others)",
		ErrCorruptRaftData, path, err)
}
