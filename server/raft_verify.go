package server

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// ErrCorruptRaftData: a file under <data-dir>/raft failed its integrity
// check. The server refuses to start on it rather than serve a state
// that may be wrong: a server of a cluster can be wiped and rejoin, and
// the others send it everything again.
var ErrCorruptRaftData = errors.New("corrupt raft data")

// verifyRaftLog reads every entry of the Raft log before Raft starts on
// it: the entries must run without a gap from the first index to the last
// and each must decode. bbolt survives a torn write of its file's tail by
// falling back to its last complete transaction; damage elsewhere is found
// here, with the file named, not later as a panic in the middle of
// applying the log or as a wrong entry.
func verifyRaftLog(path string, logs raft.LogStore) (err error) {
	defer func() {
		// bbolt can panic on a page it cannot parse.
		if r := recover(); r != nil {
			err = corrupt(path, fmt.Errorf("%v", r))
		}
	}()
	first, err := logs.FirstIndex()
	if err != nil {
		return corrupt(path, err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return corrupt(path, err)
	}
	if first == 0 {
		return nil
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
		return fmt.Errorf("%w: %s: %v", ErrCorruptRaftData, filepath.Join(dir, "snapshots"), err)
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
