package config

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// NodeIDFile is the file under the data dir that keeps a generated node ID
// across restarts (Consul's name and format: the UUID as text).
const NodeIDFile = "node-id"

// GenerateUUID returns a random (version 4) UUID in lower case.
func GenerateUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating UUID: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// IsUUID reports whether s is a UUID in the 8-4-4-4-12 hex form Consul
// accepts for node IDs (either case).
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// resolveNodeID picks the node ID as Consul does: the configured one if
// any; else the one kept in <dataDir>/node-id; else a new random one, which
// is written there when there is a data dir so the node keeps its identity
// across restarts.
func resolveNodeID(configured, dataDir string) (string, error) {
	if configured != "" {
		id := strings.ToLower(strings.TrimSpace(configured))
		if !IsUUID(id) {
			return "", fmt.Errorf("%w: node_id %q is not a valid UUID", ErrNodeID, configured)
		}
		return id, nil
	}
	if dataDir == "" {
		return GenerateUUID()
	}
	path := filepath.Join(dataDir, NodeIDFile)
	raw, err := os.ReadFile(path) //nolint:gosec // the node-id file in the operator's data dir
	switch {
	case err == nil:
		id := strings.ToLower(strings.TrimSpace(string(raw)))
		if !IsUUID(id) {
			return "", fmt.Errorf("%w: %s holds %q, which is not a valid UUID", ErrNodeID, path, strings.TrimSpace(string(raw)))
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: %w", ErrNodeID, err)
	}
	id, err := GenerateUUID()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNodeID, err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("%w: creating data dir: %w", ErrNodeID, err)
	}
	if err := writeFileAtomic(path, []byte(id), 0o600); err != nil {
		return "", fmt.Errorf("%w: persisting: %w", ErrNodeID, err)
	}
	return id, nil
}

// writeFileAtomic writes through a temporary file and a rename, so a crash
// never leaves a half-written node ID behind.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), perm); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
