package gossip

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// Sentinel errors of the keyring.
var (
	// ErrInvalidKey: a gossip key is not base64 of 16, 24 or 32 bytes.
	ErrInvalidKey = errors.New("gossip: invalid encryption key")
	// ErrKeyringFile: the persisted keyring could not be read, parsed or
	// created.
	ErrKeyringFile = errors.New("gossip: keyring file")
	// ErrUnknownKeyOp: a keyring operation other than list, install, use
	// and remove.
	ErrUnknownKeyOp = errors.New("gossip: unknown keyring operation")
)

// Encryption is a pool's gossip encryption. The zero value gossips in
// plaintext.
type Encryption struct {
	// Key is the base64 key of Consul's encrypt setting; "" with no
	// keyring file leaves the pool unencrypted.
	Key string
	// KeyringFile is where the keyring is kept ("" keeps it in memory
	// only, as disable_keyring_file does). At the first start with a Key
	// the file is created holding it; from then on the file wins over Key,
	// so that keys rotated with the keyring command survive a restart.
	KeyringFile string
	// AcceptPlaintext and SendPlaintext are the negations of Consul's
	// encrypt_verify_incoming and encrypt_verify_outgoing, for rolling an
	// encryption key onto a plaintext cluster. They are negated so that the
	// zero value refuses plaintext.
	AcceptPlaintext bool
	SendPlaintext   bool
}

// DecodeKey checks a base64 gossip key (16, 24 or 32 bytes: AES-128, -192
// or -256) and returns its bytes.
func DecodeKey(key string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	if err := memberlist.ValidateKey(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return raw, nil
}

// keyring builds the pool's keyring from its file or key, creating the
// file when a key is given and there is none yet (Consul's
// setupBaseKeyrings). It returns nil when the pool is not encrypted,
// and whether an existing file was preferred over a Key it lacks.
func (e Encryption) keyring() (ring *memberlist.Keyring, keyIgnored bool, err error) {
	if e.KeyringFile == "" {
		if e.Key == "" {
			return nil, false, nil
		}
		raw, err := DecodeKey(e.Key)
		if err != nil {
			return nil, false, err
		}
		ring, err = memberlist.NewKeyring(nil, raw)
		return ring, false, err
	}
	keys, err := readKeyringFile(e.KeyringFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if e.Key == "" {
			return nil, false, nil
		}
		if _, err := DecodeKey(e.Key); err != nil {
			return nil, false, err
		}
		if err := writeKeyringFile(e.KeyringFile, []string{e.Key}); err != nil {
			return nil, false, err
		}
		keys = []string{e.Key}
	case err != nil:
		return nil, false, err
	}
	raws := make([][]byte, 0, len(keys))
	for _, k := range keys {
		raw, err := DecodeKey(k)
		if err != nil {
			return nil, false, fmt.Errorf("%w %s: %w", ErrKeyringFile, e.KeyringFile, err)
		}
		raws = append(raws, raw)
		if k == e.Key {
			e.Key = ""
		}
	}
	// The first key is the primary, as serf writes the file.
	ring, err = memberlist.NewKeyring(raws, raws[0])
	if err != nil {
		return nil, false, fmt.Errorf("%w %s: %w", ErrKeyringFile, e.KeyringFile, err)
	}
	return ring, e.Key != "", nil
}

// readKeyringFile reads a JSON list of base64 keys, primary first.
func readKeyringFile(path string) ([]string, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the keyring file of the agent's own data dir
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w %s: %w", ErrKeyringFile, path, err)
	}
	var keys []string
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, fmt.Errorf("%w %s: not a JSON list of keys: %w", ErrKeyringFile, path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w %s: holds no key", ErrKeyringFile, path)
	}
	return keys, nil
}

// writeKeyringFile creates the file the way serf rewrites it after each
// keyring change: owner-only, since it holds the cluster's secret.
func writeKeyringFile(path string, keys []string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("%w %s: %w", ErrKeyringFile, path, err)
	}
	b, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrKeyringFile, path, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("%w %s: %w", ErrKeyringFile, path, err)
	}
	return nil
}

// KeyOp is a keyring operation across a pool.
type KeyOp string

// The keyring operations, as Consul's structs.KeyringOp names them.
const (
	KeyList    KeyOp = "list"
	KeyInstall KeyOp = "install"
	KeyUse     KeyOp = "use"
	KeyRemove  KeyOp = "remove"
)

// KeyringOperation runs op (with key, for all but list) on every member of
// the pool through Serf's key manager, which asks each member by a Serf
// query and counts the answers; relayFactor asks that many extra members
// to relay each answer. The response is returned with any error, since it
// names the members that failed.
func (g *Gossip) KeyringOperation(op KeyOp, key string, relayFactor uint8) (*serf.KeyResponse, error) {
	km := g.serf.KeyManager()
	opts := &serf.KeyRequestOptions{RelayFactor: relayFactor}
	switch op {
	case KeyList:
		return km.ListKeysWithOptions(opts)
	case KeyInstall:
		return km.InstallKeyWithOptions(key, opts)
	case KeyUse:
		return km.UseKeyWithOptions(key, opts)
	case KeyRemove:
		return km.RemoveKeyWithOptions(key, opts)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownKeyOp, op)
}

// Encrypted reports whether the pool gossips with a keyring.
func (g *Gossip) Encrypted() bool { return g.serf.EncryptionEnabled() }
