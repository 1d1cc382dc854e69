package structs

// The internal RPC methods of snapshots (GET and PUT /v1/snapshot; see
// endpoints.go for the conventions). Both stream the archive (see
// Stream): called with a Stream in the context, Save writes the archive
// to its Download and Restore reads it from its Upload, in chunks, with no
// size limit and without the archive ever whole in memory. Called without
// one, the archive travels in the Archive fields, inside one message
// bounded by SnapshotMaxSize, as before streaming existed.
var (
	// MethodSnapshotSave takes a Raft snapshot and answers it as an
	// archive (package snapshot). Like any read it is served by the
	// leader once it confirmed its leadership, or under ?stale by the
	// server the call reaches, from its own state.
	MethodSnapshotSave = readMethod[SnapshotSaveRequest, SnapshotSaveResponse]("Snapshot.Save")
	// MethodSnapshotRestore replaces the whole replicated state with an
	// archive's, through Raft's user restore on the leader, which sends
	// it to every follower. An archive that is damaged, truncated or does
	// not decode is refused with ErrSnapshotInvalid before anything
	// changes.
	MethodSnapshotRestore = writeMethod[SnapshotRestoreRequest, struct{}]("Snapshot.Restore")
)

// SnapshotMaxSize bounds a snapshot archive, and the state inside it, in
// bytes, when it travels in an Archive field (a call without a Stream):
// the archive is then one internal RPC message, held in memory on the
// way. Streamed calls have no limit.
const SnapshotMaxSize = 64 << 20

// ErrSnapshotInvalid refuses a restore whose archive is damaged
// (truncated, a checksum that does not match), of a format this version
// cannot read, or whose state does not decode. Nothing was changed.
var ErrSnapshotInvalid = newError("SnapshotInvalid", CodeInvalidArgument, "invalid snapshot")

// ErrSnapshotTooLarge refuses a snapshot over SnapshotMaxSize.
var ErrSnapshotTooLarge = newError("SnapshotTooLarge", CodeInvalidArgument, "snapshot too large")

// SnapshotSaveRequest asks for a snapshot.
type SnapshotSaveRequest struct {
	QueryOptions
}

// SnapshotSaveResponse describes one snapshot archive; Index in QueryMeta
// is the last Raft index it covers. Archive holds the archive only when
// the call had no Stream.
type SnapshotSaveResponse struct {
	Archive []byte
	QueryMeta
}

// SnapshotRestoreRequest asks for a restore; Archive holds the archive
// only when the call has no Stream.
type SnapshotRestoreRequest struct {
	Archive []byte
	WriteRequest
}
