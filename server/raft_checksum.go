package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// checksumsFromKey is the stable-store key holding the first log index
// written with a checksum. Entries below it were written before checksums
// existed and are read as they are; every entry from it on must carry one.
const checksumsFromKey = "trellis_log_checksums_from"

// checksumMagic marks a checksum trailer, so that an entry that lost its
// trailer reads as damaged rather than as one written without a checksum.
const checksumMagic = 0x7e11c5a1

const checksumTrailerLen = 8 // magic, CRC-32C, both big-endian

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errChecksum: a log entry read back is not the entry that was written.
var errChecksum = errors.New("log entry checksum mismatch")

// checksumLog keeps a CRC-32C of every Raft log entry next to it on disk
// and checks it on every read. bbolt guards its page structure but not the
// bytes inside a value: a flipped bit in an entry's data decodes as a
// different command and would be applied as one, so the server would serve
// a wrong state with nothing said. The sum rides in the stored copy of
// the entry's Extensions and is stripped before Raft sees the entry, so
// Raft, the FSM and the followers see exactly what was proposed.
type checksumLog struct {
	raft.LogStore
	// from is the first index written with a checksum (checksumsFromKey).
	from uint64
}

// newChecksumLog wraps logs, whose stable store is stable, recording on
// first use the index from which entries carry checksums.
func newChecksumLog(logs raft.LogStore, stable raft.StableStore) (*checksumLog, error) {
	from, err := stable.GetUint64([]byte(checksumsFromKey))
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return nil, err
	}
	if from == 0 {
		last, err := logs.LastIndex()
		if err != nil {
			return nil, err
		}
		from = last + 1
		if err := stable.SetUint64([]byte(checksumsFromKey), from); err != nil {
			return nil, err
		}
	}
	return &checksumLog{LogStore: logs, from: from}, nil
}

func entrySum(l *raft.Log, ext []byte) uint32 {
	var hdr [17]byte
	binary.BigEndian.PutUint64(hdr[0:], l.Index)
	binary.BigEndian.PutUint64(hdr[8:], l.Term)
	hdr[16] = byte(l.Type)
	h := crc32.New(castagnoli)
	_, _ = h.Write(hdr[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(l.Data)))
	_, _ = h.Write(n[:])
	_, _ = h.Write(l.Data)
	_, _ = h.Write(ext)
	return h.Sum32()
}

// StoreLog implements raft.LogStore.
func (c *checksumLog) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore. The entries Raft passes stay as
// they are (Raft keeps them in memory); copies carry the trailer.
func (c *checksumLog) StoreLogs(logs []*raft.Log) error {
	summed := make([]*raft.Log, len(logs))
	for i, l := range logs {
		cp := *l
		ext := make([]byte, len(l.Extensions), len(l.Extensions)+checksumTrailerLen)
		copy(ext, l.Extensions)
		ext = binary.BigEndian.AppendUint32(ext, checksumMagic)
		cp.Extensions = binary.BigEndian.AppendUint32(ext, entrySum(l, l.Extensions))
		summed[i] = &cp
	}
	return c.LogStore.StoreLogs(summed)
}

// GetLog implements raft.LogStore; an entry whose checksum does not match
// is an error wrapping errChecksum.
func (c *checksumLog) GetLog(index uint64, l *raft.Log) error {
	if err := c.LogStore.GetLog(index, l); err != nil {
		return err
	}
	if l.Index != index {
		return fmt.Errorf("%w: entry %d says it is %d", errChecksum, index, l.Index)
	}
	n := len(l.Extensions)
	if n < checksumTrailerLen || binary.BigEndian.Uint32(l.Extensions[n-8:]) != checksumMagic {
		if index < c.from {
			return nil // written before checksums
		}
		return fmt.Errorf("%w: entry %d has no checksum", errChecksum, index)
	}
	ext := l.Extensions[:n-checksumTrailerLen]
	if want := binary.BigEndian.Uint32(l.Extensions[n-4:]); entrySum(l, ext) != want {
		return fmt.Errorf("%w: entry %d", errChecksum, index)
	}
	if len(ext) == 0 {
		ext = nil
	}
	l.Extensions = ext
	return nil
}
