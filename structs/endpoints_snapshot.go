package structs

// The internal RPC methods of snapshots (GET and PUT /v1/snapshot; see
// endpoints.go for the conventions). The archive travels whole inside one
// message of the unary internal RPC, so both are bounded by
// SnapshotMaxSize.
var (
	// MethodSnapshotSave takes a Raft snapshot and answers it as an
	// archive (package snapshot). Like any read it is served by the
	// leader once it confirmed its leadership, or under ?stale by the
	// server the call reaches, from its own state.
	MethodSnapshotSave = readMethod[SnapshotSaveRequest, SnapshotSaveResponse]("Snapshot.Save")
	// MethodSnapshotRestore replaces the whole replicated state with an
	// archive's, through Raft's user restore on the leader, which sends
	// it to every follower. An archive that is damaged or does not decode
	// is refused with ErrSnapshotInvalid before anything changes.
	MethodSnapshotRestore = writeMethod[SnapshotRestoreRequest, struct{}]("Snapshot.Restore")
)

// SnapshotMaxSize bounds a snapshot archive, and the state inside it, in
// bytes: the archive is one internal RPC message, held in memory on the
// way. A larger state cannot be saved or restored.
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

// SnapshotSaveResponse is one snapshot archive; Index in QueryMeta is the
// last Raft index it covers.
type SnapshotSaveResponse struct {
	Archive []byte
	QueryMeta
}

// SnapshotRestoreRequest carries the archive to restore.
type SnapshotRestoreRequest struct {
	Archive []byte
	WriteRequest
}
