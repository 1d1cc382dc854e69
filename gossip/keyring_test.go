package gossip

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
)

// Test keys: base64 of 16, 24 and 32 bytes.
const (
	key1 = "d8wu8CSUrqgtjVsvcBPmhQ=="
	key2 = "qxycTi/SsePj/TZzCBmNXw=="
	key3 = "N1U7Yc8KSDGHfjJX1nRKhTmFz3cT0BVd"
	key4 = "5K9OtfP7efFrNKe5WCQvXvnaXJ5cWP0SvXiwe0kkjM4="
)

// encrypted gives a node a key (and a keyring file when file is set).
func encrypted(key, file string) nodeOpts {
	return func(c *Config) { c.Encryption = Encryption{Key: key, KeyringFile: file} }
}

// neverSees checks, over a stretch of gossip rounds, that none of the
// nodes lists the other: an outsider must not be admitted even
// transiently.
func neverSees(t *testing.T, a, b *node) {
	t.Helper()
	for i := 0; i < 40; i++ {
		if _, ok := a.member(b.name); ok {
			t.Fatalf("%s lists %s, which gossips with another key", a.name, b.name)
		}
		if _, ok := b.member(a.name); ok {
			t.Fatalf("%s lists %s, which gossips with another key", b.name, a.name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEncryptedAdmission: only members holding a key of the pool's
// keyring are admitted; a plaintext member and one with another key are
// refused on both sides.
func TestEncryptedAdmission(t *testing.T) {
	tests := []struct {
		name     string
		a, b     Encryption
		admitted bool
	}{
		{"same 16-byte key", Encryption{Key: key1}, Encryption{Key: key1}, true},
		{"same 24-byte key", Encryption{Key: key3}, Encryption{Key: key3}, true},
		{"same 32-byte key", Encryption{Key: key4}, Encryption{Key: key4}, true},
		{"another key", Encryption{Key: key1}, Encryption{Key: key2}, false},
		{"plaintext joiner", Encryption{Key: key1}, Encryption{}, false},
		{"plaintext pool", Encryption{}, Encryption{Key: key1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ports := testPorts(t, 2)
			a := newNode(t, "a", ports[0], true, func(c *Config) { c.Encryption = tt.a })
			b := newNode(t, "b", ports[1], true, func(c *Config) { c.Encryption = tt.b })
			_, err := b.Join([]string{a.addr}, 0)
			if !tt.admitted {
				if !errors.Is(err, ErrNoneJoined) {
					t.Fatalf("Join = %v, want ErrNoneJoined", err)
				}
				neverSees(t, a, b)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "a to see b alive", func() bool { return a.hasStatus("b", serf.StatusAlive) })
			waitFor(t, "b to see a alive", func() bool { return b.hasStatus("a", serf.StatusAlive) })
		})
	}
}

// TestRollingEncryption turns encryption on across a running plaintext
// pool the way Consul's guide does: every agent restarts with the key and
// both verifications off, then with verify_outgoing, then with
// verify_incoming; the pool stays whole at each step, and at the end a
// plaintext agent is refused.
func TestRollingEncryption(t *testing.T) {
	ports := testPorts(t, 3)
	steps := []Encryption{
		{Key: key1, AcceptPlaintext: true, SendPlaintext: true},
		{Key: key1, AcceptPlaintext: true},
		{Key: key1},
	}
	a := newNode(t, "a", ports[0], true)
	b := newNode(t, "b", ports[1], true)
	if _, err := b.Join([]string{a.addr}, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to see b", func() bool { return a.hasStatus("b", serf.StatusAlive) })
	nodes := []*node{a, b}
	for i, enc := range steps {
		// One agent at a time, so that the pool mixes both settings.
		for j, n := range nodes {
			if err := n.Leave(); err != nil {
				t.Fatal(err)
			}
			if err := n.Shutdown(); err != nil {
				t.Fatal(err)
			}
			other := nodes[1-j]
			nn := newNode(t, n.name, n.port, true, func(c *Config) { c.Encryption = enc })
			if _, err := nn.Join([]string{other.addr}, 0); err != nil {
				t.Fatalf("step %d: %s rejoining: %v", i, n.name, err)
			}
			waitFor(t, "the pool to be whole again", func() bool {
				return other.hasStatus(n.name, serf.StatusAlive) && nn.hasStatus(other.name, serf.StatusAlive)
			})
			nodes[j] = nn
		}
	}
	plain := newNode(t, "plain", ports[2], true)
	if _, err := plain.Join([]string{nodes[0].addr}, 0); !errors.Is(err, ErrNoneJoined) {
		t.Fatalf("plaintext Join after the roll = %v, want ErrNoneJoined", err)
	}
	neverSees(t, nodes[0], plain)
}

// TestKeyringRotation installs, uses and removes a key across the pool,
// checks the counts list reports and the files serf rewrites, and
// restarts a member with the old key in its encrypt setting: the file
// wins (with Consul's warning) and it rejoins.
func TestKeyringRotation(t *testing.T) {
	ports := testPorts(t, 3)
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name, "serf/local.keyring") }
	var nodes []*node
	for i, name := range []string{"a", "b", "c"} {
		n := newNode(t, name, ports[i], true, encrypted(key1, file(name)))
		if i > 0 {
			if _, err := n.Join([]string{nodes[0].addr}, 0); err != nil {
				t.Fatal(err)
			}
		}
		nodes = append(nodes, n)
	}
	waitFor(t, "every member to see three alive", func() bool {
		for _, n := range nodes {
			for _, m := range nodes {
				if !n.hasStatus(m.name, serf.StatusAlive) {
					return false
				}
			}
		}
		return true
	})

	list := func(want map[string]int, primary string) {
		t.Helper()
		resp, err := nodes[1].KeyringOperation(KeyList, "", 0)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if resp.NumNodes != 3 || !mapsEqual(resp.Keys, want) || !mapsEqual(resp.PrimaryKeys, map[string]int{primary: 3}) {
			t.Fatalf("list = nodes %d keys %v primary %v; want 3, %v, %s on 3", resp.NumNodes, resp.Keys, resp.PrimaryKeys, want, primary)
		}
	}
	list(map[string]int{key1: 3}, key1)
	for _, step := range []struct {
		op  KeyOp
		key string
	}{{KeyInstall, key2}, {KeyUse, key2}, {KeyRemove, key1}} {
		if _, err := nodes[0].KeyringOperation(step.op, step.key, 0); err != nil {
			t.Fatalf("%s %s: %v", step.op, step.key, err)
		}
	}
	list(map[string]int{key2: 3}, key2)
	for _, n := range nodes {
		keys, err := readKeyringFile(file(n.name))
		if err != nil || !slices.Equal(keys, []string{key2}) {
			t.Fatalf("%s's keyring file = %v, %v; want [%s]", n.name, keys, err, key2)
		}
	}

	// Removing the primary key is refused by every member.
	if _, err := nodes[0].KeyringOperation(KeyRemove, key2, 0); err == nil {
		t.Fatal("removing the primary key succeeded")
	}
	if _, err := nodes[0].KeyringOperation("rotate", key2, 0); !errors.Is(err, ErrUnknownKeyOp) {
		t.Fatalf("unknown op = %v, want ErrUnknownKeyOp", err)
	}

	c := nodes[2]
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// The other members keep sending c's address the key queries above
	// until they time out, and serf (v0.10.4) answers a query that
	// arrives while Create is still running with a memberlist it has not
	// stored yet: a data race in the library. Restart once they are over.
	time.Sleep(nodes[0].serf.DefaultQueryTimeout())
	logs := &lockedRecords{}
	c2 := newNode(t, "c", c.port, true, encrypted(key1, file("c")), func(cfg *Config) { cfg.Logger = logs.logger() })
	if _, err := c2.Join([]string{nodes[0].addr}, 0); err != nil {
		t.Fatalf("restarted c rejoining with its keyring file: %v", err)
	}
	waitFor(t, "a to see the restarted c alive", func() bool { return nodes[0].hasStatus("c", serf.StatusAlive) })
	if !logs.has("keyring doesn't include key provided with -encrypt, using keyring") {
		t.Error("no warning that the keyring file was preferred over the encrypt key")
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestKeyringSetup covers building the keyring from the key and the file.
func TestKeyringSetup(t *testing.T) {
	tests := []struct {
		name string
		// file is the keyring file's content; nil means no file.
		file       []byte
		key        string
		noFile     bool // disable_keyring_file: no path at all
		wantErr    error
		wantKeys   []string // the file afterwards; nil means it must not exist
		wantRing   bool
		wantIgnore bool
	}{
		{name: "no key, no file: plaintext", wantRing: false},
		{name: "key creates the file", key: key1, wantKeys: []string{key1}, wantRing: true},
		{name: "file alone", file: []byte(`["` + key2 + `","` + key1 + `"]`), wantKeys: []string{key2, key1}, wantRing: true},
		{name: "file wins over a key it lacks", file: []byte(`["` + key2 + `"]`), key: key1, wantKeys: []string{key2}, wantRing: true, wantIgnore: true},
		{name: "file holding the key", file: []byte(`["` + key2 + `","` + key1 + `"]`), key: key1, wantKeys: []string{key2, key1}, wantRing: true},
		{name: "disable_keyring_file keeps the key in memory", key: key1, noFile: true, wantRing: true},
		{name: "bad base64", key: "not a key", wantErr: ErrInvalidKey},
		{name: "short key", key: "c2hvcnQ=", wantErr: ErrInvalidKey},
		{name: "corrupt file", file: []byte(`{"keys":`), key: key1, wantErr: ErrKeyringFile},
		{name: "empty list", file: []byte(`[]`), wantErr: ErrKeyringFile},
		{name: "bad key in file", file: []byte(`["c2hvcnQ="]`), wantErr: ErrKeyringFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "serf/local.keyring")
			if tt.file != nil {
				if err := writeRaw(path, tt.file); err != nil {
					t.Fatal(err)
				}
			}
			enc := Encryption{Key: tt.key, KeyringFile: path}
			if tt.noFile {
				enc.KeyringFile = ""
			}
			ring, ignored, err := enc.keyring()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (ring != nil) != tt.wantRing || ignored != tt.wantIgnore {
				t.Fatalf("ring %v ignored %v; want ring %v ignored %v", ring != nil, ignored, tt.wantRing, tt.wantIgnore)
			}
			keys, err := readKeyringFile(path)
			if tt.wantKeys == nil {
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("keyring file exists (%v, %v), want none", keys, err)
				}
				return
			}
			if err != nil || !slices.Equal(keys, tt.wantKeys) {
				t.Fatalf("file = %v, %v; want %v", keys, err, tt.wantKeys)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
				t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
			}
		})
	}
}

func writeRaw(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// TestDecodeKey: the keygen output format round-trips; others fail.
func TestDecodeKey(t *testing.T) {
	for _, k := range []string{key1, key3, key4} {
		if _, err := DecodeKey(k); err != nil {
			t.Errorf("DecodeKey(%s) = %v", k, err)
		}
	}
	var list []string
	if err := json.Unmarshal([]byte(`["`+key1+`"]`), &list); err != nil || len(list) != 1 {
		t.Fatal(err)
	}
	if _, err := DecodeKey(""); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("DecodeKey(\"\") = %v, want ErrInvalidKey", err)
	}
}
