// Package snapshot is the file format of Trellis' snapshots, the archive
// GET /v1/snapshot answers, PUT /v1/snapshot restores and `trellis
// snapshot inspect` reads.
//
// An archive is a gzipped tar of exactly three files, in this order:
//
//   - meta.json: Meta, the archive's format version, the Raft snapshot's
//     ID, index, term and version, the size of state.bin and its record
//     counts by type;
//   - state.bin: the FSM's snapshot stream, byte for byte what the servers
//     write to their Raft snapshot store (fsm.FSM's Persist), so that a
//     restore hands Raft exactly what it would have installed itself;
//   - SHA256SUMS: the SHA-256 of meta.json and of state.bin, in
//     sha256sum(1)'s format.
//
// A tar rather than a bespoke framing: `tar tzf` lists an archive and
// `sha256sum -c SHA256SUMS` checks an extracted one with standard tools,
// and meta.json is readable without decoding the state. The state is not
// re-encoded: the FSM's stream, versioned by its own header, is the one
// serializer of the replicated state. The SHA-256 sums catch a changed
// byte anywhere; the fixed order and the sums file, last, catch a
// truncated archive before anything is restored from it. This is Consul's
// layout in spirit (its archive holds meta.json, state.bin and SHA256SUMS
// too), but not its content: a Consul snapshot does not restore into
// Trellis, nor the reverse.
package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// FormatVersion is the archive layout this package writes. Read refuses an
// archive of another version instead of guessing at its contents.
const FormatVersion = 1

// The names of the archive's files, in their order.
const (
	metaName  = "meta.json"
	stateName = "state.bin"
	sumsName  = "SHA256SUMS"
)

// maxMetaSize bounds meta.json, which Read holds in memory before any
// checksum has been verified.
const maxMetaSize = 1 << 20

// maxTrailer bounds what may follow the tar's last entry: its end-of-archive
// blocks and record padding (archive/tar writes 1 KiB).
const maxTrailer = 64 << 10

// Sentinel errors of the package.
var (
	// ErrCorrupt: the archive does not decode (not gzip, not tar, files
	// missing, out of order or truncated) or a checksum does not match.
	ErrCorrupt = errors.New("snapshot: corrupt archive")
	// ErrFormat: the archive is intact but of a format version this
	// Trellis cannot read.
	ErrFormat = errors.New("snapshot: unsupported archive format")
	// ErrTooLarge: the state is larger than the reader's limit.
	ErrTooLarge = errors.New("snapshot: too large")
)

// Meta describes one snapshot; it is meta.json.
type Meta struct {
	// Format is the archive layout version (FormatVersion).
	Format int
	// ID, Index, Term and Version are the Raft snapshot's: its ID in the
	// snapshot store, the last log index and term it covers, and Raft's
	// snapshot format version.
	ID      string
	Index   uint64
	Term    uint64
	Version int
	// Size is the size of state.bin in bytes.
	Size int64
	// Records counts state.bin's records by type, in the FSM's order.
	Records []RecordCount
	// Created is when the server wrote the archive (UTC), for operators.
	Created time.Time
}

// RecordCount is how many records of one type a snapshot holds.
type RecordCount struct {
	Type  string
	Count int
}

// Write writes the archive of meta and state to w. It sets meta.Format
// and meta.Size.
func Write(w io.Writer, meta Meta, state []byte) error {
	meta.Size = int64(len(state))
	return WriteStream(w, meta, bytes.NewReader(state))
}

// WriteStream writes the archive of meta and the meta.Size bytes of state
// to w as it reads them, so that neither the state nor the archive is
// held in memory; the state's checksum, computed on the way, goes in the
// sums file at the end. It sets meta.Format, and fails if state does not
// hold exactly meta.Size bytes.
func WriteStream(w io.Writer, meta Meta, state io.Reader) error {
	meta.Format = FormatVersion
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("snapshot: encode meta: %w", err)
	}
	// The fastest level: the state is mostly msgpack with short strings,
	// which it still shrinks, while the default level costs the leader
	// several times the CPU on a large state for a few percent less.
	gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return fmt.Errorf("snapshot: gzip: %w", err)
	}
	tw := tar.NewWriter(gz)
	header := func(name string, size int64) error {
		hdr := &tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: meta.Created, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("snapshot: write %s: %w", name, err)
		}
		return nil
	}
	if err := header(metaName, int64(len(metaJSON))); err != nil {
		return err
	}
	if _, err := tw.Write(metaJSON); err != nil {
		return fmt.Errorf("snapshot: write %s: %w", metaName, err)
	}
	if err := header(stateName, meta.Size); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(state, meta.Size))
	if err != nil {
		return fmt.Errorf("snapshot: write %s: %w", stateName, err)
	}
	if n != meta.Size {
		return fmt.Errorf("snapshot: write %s: the state ended after %d of %d bytes", stateName, n, meta.Size)
	}
	sums := fmt.Sprintf("%s  %s\n%s  %s\n", sum(metaJSON), metaName, hex.EncodeToString(h.Sum(nil)), stateName)
	if err := header(sumsName, int64(len(sums))); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, sums); err != nil {
		return fmt.Errorf("snapshot: write %s: %w", sumsName, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("snapshot: close tar: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("snapshot: close gzip: %w", err)
	}
	return nil
}

// Read reads and verifies a whole archive held in memory; see ReadStream.
func Read(r io.Reader, maxState int64) (Meta, []byte, error) {
	var state bytes.Buffer
	meta, err := ReadStream(r, &state, maxState)
	if err != nil {
		return Meta{}, nil, err
	}
	return meta, state.Bytes(), nil
}

// ReadStream reads and verifies an archive, copying its state to state as
// it goes: every file present, in order, with its checksum, and nothing
// after the sums but the archive's end. The state has been written whole
// only when it returns no error, and a caller must not act on what state
// received before that: a damaged or truncated archive is found only at
// its end. A state.bin larger than maxState (negative: no limit) fails
// with ErrTooLarge before any of it is copied.
func ReadStream(r io.Reader, state io.Writer, maxState int64) (Meta, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return Meta{}, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
	}
	defer func() { _ = gz.Close() }()
	tr := tar.NewReader(gz)
	var metaJSON bytes.Buffer
	if _, err := readFile(tr, metaName, maxMetaSize, &metaJSON); err != nil {
		return Meta{}, err
	}
	var meta Meta
	if err := json.Unmarshal(metaJSON.Bytes(), &meta); err != nil {
		return Meta{}, fmt.Errorf("%w: %s: %w", ErrCorrupt, metaName, err)
	}
	if meta.Format != FormatVersion {
		return Meta{}, fmt.Errorf("%w: version %d (this Trellis reads version %d)", ErrFormat, meta.Format, FormatVersion)
	}
	stateSum := sha256.New()
	size, err := readFile(tr, stateName, maxState, io.MultiWriter(state, stateSum))
	if err != nil {
		return Meta{}, err
	}
	var sums bytes.Buffer
	if _, err := readFile(tr, sumsName, maxMetaSize, &sums); err != nil {
		return Meta{}, err
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		return Meta{}, fmt.Errorf("%w: unexpected content after %s", ErrCorrupt, sumsName)
	}
	// Reading to the end makes gzip check its own CRC and length. After
	// the tar's end only its padding may follow, so a long tail is damage
	// (and is not decompressed without bound).
	if n, err := io.Copy(io.Discard, io.LimitReader(gz, maxTrailer+1)); err != nil {
		return Meta{}, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
	} else if n > maxTrailer {
		return Meta{}, fmt.Errorf("%w: more than %d bytes after the archive's end", ErrCorrupt, maxTrailer)
	}
	err = verifySums(sums.String(), map[string]string{metaName: sum(metaJSON.Bytes()), stateName: hex.EncodeToString(stateSum.Sum(nil))})
	if err != nil {
		return Meta{}, err
	}
	if meta.Size != size {
		return Meta{}, fmt.Errorf("%w: %s is %d bytes, %s says %d", ErrCorrupt, stateName, size, metaName, meta.Size)
	}
	return meta, nil
}

// readFile copies the next tar entry, which must be name, of at most limit
// bytes (negative: any size), to w, and returns its size.
func readFile(tr *tar.Reader, name string, limit int64, w io.Writer) (int64, error) {
	hdr, err := tr.Next()
	if errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("%w: %s missing (truncated archive?)", ErrCorrupt, name)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: reading %s: %w", ErrCorrupt, name, err)
	}
	if hdr.Name != name || hdr.Typeflag != tar.TypeReg {
		return 0, fmt.Errorf("%w: found %q where %s belongs", ErrCorrupt, hdr.Name, name)
	}
	if hdr.Size < 0 || (limit >= 0 && hdr.Size > limit) {
		if name == stateName {
			return 0, fmt.Errorf("%w: %s is %d bytes, over the limit of %d", ErrTooLarge, name, hdr.Size, limit)
		}
		return 0, fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, name, hdr.Size)
	}
	n, err := io.Copy(w, tr)
	if err != nil {
		return n, fmt.Errorf("%w: reading %s: %w", ErrCorrupt, name, err)
	}
	return n, nil
}

// verifySums checks that the sums file lists exactly the given files, each
// with the hex SHA-256 given for it.
func verifySums(sums string, files map[string]string) error {
	seen := make(map[string]bool, len(files))
	for line := range strings.Lines(sums) {
		hexSum, name, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "  ")
		want, known := files[name]
		if !ok || !known || seen[name] {
			return fmt.Errorf("%w: %s: unexpected line %q", ErrCorrupt, sumsName, line)
		}
		seen[name] = true
		if hexSum != want {
			return fmt.Errorf("%w: SHA-256 of %s does not match %s", ErrCorrupt, name, sumsName)
		}
	}
	for name := range files {
		if !seen[name] {
			return fmt.Errorf("%w: %s has no sum for %s", ErrCorrupt, sumsName, name)
		}
	}
	return nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
