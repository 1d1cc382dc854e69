package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// snapshotMagic and snapshotVersion open every snapshot stream. A restore
// refuses a stream with another magic or a newer version instead of
// guessing at its records.
const (
	snapshotMagic = "trellis-fsm-snapshot"
	// Version 2 added the applied-request records (dedup.go), version 3
	// the coordinate records (coordinates.go), version 4 the prepared
	// query records (prepared_query.go), version 5 the virtual IP records
	// (virtual_ip.go) and the autopilot configuration record
	// (autopilot.go), version 6 the ACL token, policy and role records
	// (acl.go); older streams, which have none, still restore.
	snapshotVersion = 6
)

// ErrSnapshotFormat is returned when a snapshot stream is not one this
// version can read.
var ErrSnapshotFormat = errors.New("fsm: unsupported snapshot format")

// recordType tags each record of the snapshot stream. Like command numbers,
// record numbers are never reused.
type recordType uint8

const (
	recordNode      recordType = 1
	recordService   recordType = 2
	recordCheck     recordType = 3
	recordKV        recordType = 4
	recordTombstone recordType = 5
	recordSession   recordType = 6
	recordIndex     recordType = 7
)

type snapshotHeader struct {
	Magic     string
	Version   int
	LastIndex uint64
}

// serviceRecord carries the node name a service belongs to.
type serviceRecord struct {
	Node    string
	Service *structs.NodeService
}

type snapshot struct {
	codec *structs.Codec
	snap  *state.Snapshot
}

// Snapshot captures a consistent view of the store; Persist streams it later
// without blocking Apply.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &snapshot{codec: f.codec, snap: f.State().Snapshot()}, nil
}

// Persist writes the header and then every record to the sink.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriter(sink)
	if err := s.write(s.codec.NewStreamEncoder(w)); err != nil {
		_ = sink.Cancel()
		return err
	}
	if err := w.Flush(); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) write(enc *codec.Encoder) error {
	put := func(t recordType, v any) error {
		if err := enc.Encode(uint8(t)); err != nil {
			return err
		}
		return enc.Encode(v)
	}
	if err := enc.Encode(snapshotHeader{Magic: snapshotMagic, Version: snapshotVersion, LastIndex: s.snap.LastIndex()}); err != nil {
		return err
	}
	nodes, err := s.snap.Nodes()
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := put(recordNode, n); err != nil {
			return err
		}
		svcs, err := s.snap.Services(n.Node)
		if err != nil {
			return err
		}
		for _, svc := range svcs {
			if err := put(recordService, serviceRecord{Node: n.Node, Service: svc}); err != nil {
				return err
			}
		}
		checks, err := s.snap.Checks(n.Node)
		if err != nil {
			return err
		}
		for _, c := range checks {
			if err := put(recordCheck, c); err != nil {
				return err
			}
		}
	}
	// Sessions before KV entries: a restored lock must find its session.
	sessions, err := s.snap.Sessions()
	if err != nil {
		return err
	}
	for _, sess := range sessions {
		if err := put(recordSession, sess); err != nil {
			return err
		}
	}
	kvs, err := s.snap.KVs()
	if err != nil {
		return err
	}
	for _, e := range kvs {
		if err := put(recordKV, e); err != nil {
			return err
		}
	}
	tombs, err := s.snap.Tombstones()
	if err != nil {
		return err
	}
	for _, t := range tombs {
		if err := put(recordTombstone, t); err != nil {
			return err
		}
	}
	if err := writeCoordinates(s.snap, put); err != nil { // coordinates.go
		return err
	}
	if err := writePreparedQueries(s.snap, put); err != nil { // prepared_query.go
		return err
	}
	if err := writeVirtualIPs(s.snap, put); err != nil { // virtual_ip.go
		return err
	}
	if err := writeAutopilotConfig(s.snap, put); err != nil { // autopilot.go
		return err
	}
	if err := writeACLs(s.snap, put); err != nil { // acl.go
		return err
	}
	if err := writeConnectCA(s.snap, put); err != nil { // connect_ca.go
		return err
	}
	if err := writeConfigEntries(s.snap, put); err != nil { // config_entry.go
		return err
	}
	if err := writeAppliedRequests(s.snap, put); err != nil { // dedup.go
		return err
	}
	idxs, err := s.snap.Indexes()
	if err != nil {
		return err
	}
	for _, i := range idxs {
		if err := put(recordIndex, i); err != nil {
			return err
		}
	}
	return nil
}

// Release frees the store's read view.
func (s *snapshot) Release() { s.snap.Close() }

// Restore reads a snapshot stream into a brand-new store, then swaps it in
// and abandons the old one, which wakes every blocking query so it re-runs
// against the restored data.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	fresh := state.NewStore()
	if err := f.restoreInto(fresh, bufio.NewReader(rc), nil); err != nil {
		return err
	}
	f.mu.Lock()
	old := f.state
	f.state = fresh
	f.mu.Unlock()
	old.Abandon()
	return nil
}

// restoreInto reads a whole stream into store, calling seen (when not nil)
// for each record restored.
func (f *FSM) restoreInto(store *state.Store, r io.Reader, seen func(recordType)) error {
	dec := f.codec.NewStreamDecoder(r)
	var hdr snapshotHeader
	if err := decodeSafe(dec, &hdr); err != nil {
		return fmt.Errorf("%w: header: %v", ErrSnapshotFormat, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
	}
	if hdr.Magic != snapshotMagic || hdr.Version > snapshotVersion || hdr.Version < 1 {
		return fmt.Errorf("%w: magic %q version %d", ErrSnapshotFormat, hdr.Magic, hdr.Version)
	}
	restore := store.Restore()
	for {
		var t uint8
		err := decodeSafe(dec, &t)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			restore.Abort()
			return fmt.Errorf("fsm: restore: record type: %w", err)
		}
		if err := f.restoreRecord(restore, recordType(t), dec); err != nil {
			restore.Abort()
			return fmt.Errorf("fsm: restore: record %d: %w", t, err)
		}
		if seen != nil {
			seen(recordType(t))
		}
	}
	if err := restore.Commit(); err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	return nil
}

func (f *FSM) restoreRecord(r *state.Restore, t recordType, dec *codec.Decoder) error {
	switch t {
	case recordNode:
		var n structs.Node
		if err := decodeSafe(dec, &n); err != nil {
			return err
		}
		return r.Node(&n)
	case recordService:
		var s serviceRecord
		if err := decodeSafe(dec, &s); err != nil {
			return err
		}
		if s.Service == nil {
			return fmt.Errorf("%w: service record without service", ErrSnapshotFormat)
		}
		return r.Service(s.Node, s.Service)
	case recordCheck:
		var c structs.HealthCheck
		if err := decodeSafe(dec, &c); err != nil {
			return err
		}
		return r.Check(&c)
	case recordKV:
		var e structs.DirEntry
		if err := decodeSafe(dec, &e); err != nil {
			return err
		}
		return r.KV(&e)
	case recordTombstone:
		var ts state.Tombstone
		if err := decodeSafe(dec, &ts); err != nil {
			return err
		}
		return r.Tombstone(ts)
	case recordSession:
		var s structs.Session
		if err := decodeSafe(dec, &s); err != nil {
			return err
		}
		return r.Session(&s)
	case recordCAConfig, recordCARoot, recordCASerial: // connect_ca.go
		return restoreConnectCA(r, t, dec)
	case recordConfigEntry: // config_entry.go
		return restoreConfigEntry(r, dec)
	case recordAppliedRequest: // dedup.go
		return restoreAppliedRequest(r, dec)
	case recordCoordinates: // coordinates.go
		return restoreCoordinates(r, dec)
	case recordPreparedQuery: // prepared_query.go
		return restorePreparedQuery(r, dec)
	case recordVirtualIP: // virtual_ip.go
		return restoreVirtualIP(r, dec)
	case recordAutopilotConfig: // autopilot.go
		return restoreAutopilotConfig(r, dec)
	case recordACLToken, recordACLPolicy, recordACLRole: // acl.go
		return restoreACL(r, t, dec)
	case recordIndex:
		var i state.IndexEntry
		if err := decodeSafe(dec, &i); err != nil {
			return err
		}
		return r.Index(i)
	default:
		return fmt.Errorf("%w: unknown record type %d", ErrSnapshotFormat, t)
	}
}

// decodeSafe turns a decoder panic on corrupt input into an error.
func decodeSafe(dec *codec.Decoder, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt record: %v", r)
		}
	}()
	return dec.Decode(v)
}
