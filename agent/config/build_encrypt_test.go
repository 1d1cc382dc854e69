package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestLoadEncrypt covers Consul's gossip encryption settings: good keys of
// every length, bad keys (a start-up error naming the setting, never the
// key), the flags, the verification switches of a rolling upgrade,
// disable_keyring_file, and the warning when a keyring file from an
// earlier start wins over encrypt.
func TestLoadEncrypt(t *testing.T) {
	const (
		key16 = "pUqJrVyVRj5jsiYEkM/tFQ=="
		key24 = "N1U7Yc8KSDGHfjJX1nRKhTmFz3cT0BVd"
		key32 = "pUqJrVyVRj5jsiYEkM/tFQYfWyJIv4s3XkvDwy7Cu5s="
	)
	lanWarning := "WARNING: LAN keyring exists but -encrypt given, using keyring"
	wanWarning := "WARNING: WAN keyring exists but -encrypt given, using keyring"
	client := []string{"-data-dir", "$DIR/d"}
	server := []string{"-server", "-bootstrap-expect", "3", "-data-dir", "$DIR/d"}
	keyring := `["` + key16 + `"]`
	for _, tc := range []struct {
		name  string
		args  []string
		files map[string]string
		want  Encrypt
		// warns lists the warnings about keyrings, in order.
		warns   []string
		wantErr string // a substring of the error; "" for none
	}{
		{name: "off by default", args: client, want: Encrypt{VerifyIncoming: true, VerifyOutgoing: true}},
		{name: "16-byte key in a file", args: append(client, "-config-file", "$DIR/a.json"),
			files: map[string]string{"a.json": `{"encrypt": "` + key16 + `"}`},
			want:  Encrypt{Key: key16, VerifyIncoming: true, VerifyOutgoing: true}},
		{name: "24-byte key in HCL", args: append(client, "-config-file", "$DIR/a.hcl"),
			files: map[string]string{"a.hcl": `encrypt = "` + key24 + `"`},
			want:  Encrypt{Key: key24, VerifyIncoming: true, VerifyOutgoing: true}},
		{name: "32-byte key by flag", args: append(client, "-encrypt", key32),
			want: Encrypt{Key: key32, VerifyIncoming: true, VerifyOutgoing: true}},
		{name: "rolling upgrade", args: append(client, "-encrypt", key16, "-config-file", "$DIR/a.json"),
			files: map[string]string{"a.json": `{"encrypt_verify_incoming": false, "encrypt_verify_outgoing": false}`},
			want:  Encrypt{Key: key16}},
		{name: "disable_keyring_file by key", args: append(client, "-encrypt", key16, "-config-file", "$DIR/a.json"),
			files: map[string]string{"a.json": `{"disable_keyring_file": true}`, "d/serf/local.keyring": keyring},
			want:  Encrypt{Key: key16, VerifyIncoming: true, VerifyOutgoing: true, DisableKeyringFile: true}},
		{name: "disable_keyring_file by flag", args: append(client, "-encrypt", key16, "-disable-keyring-file"),
			want: Encrypt{Key: key16, VerifyIncoming: true, VerifyOutgoing: true, DisableKeyringFile: true}},
		{name: "client: LAN keyring wins", args: append(client, "-encrypt", key32),
			files: map[string]string{"d/serf/local.keyring": keyring, "d/serf/remote.keyring": keyring},
			want:  Encrypt{Key: key32, VerifyIncoming: true, VerifyOutgoing: true}, warns: []string{lanWarning}},
		{name: "server: both keyrings win", args: append(server, "-encrypt", key32),
			files: map[string]string{"d/serf/local.keyring": keyring, "d/serf/remote.keyring": keyring},
			want:  Encrypt{Key: key32, VerifyIncoming: true, VerifyOutgoing: true}, warns: []string{lanWarning, wanWarning}},
		{name: "keyring without encrypt: no warning", args: client,
			files: map[string]string{"d/serf/local.keyring": keyring},
			want:  Encrypt{VerifyIncoming: true, VerifyOutgoing: true}},
		{name: "not base64", args: append(client, "-encrypt", "this is not a valid key"), wantErr: "encrypt has invalid key: illegal base64 data"},
		{name: "wrong length", args: append(client, "-config-file", "$DIR/a.json"),
			files: map[string]string{"a.json": `{"encrypt": "c2hvcnQ="}`}, wantErr: "encrypt has invalid key: key size must be 16, 24 or 32 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, warnings, err := load(t, tc.args, tc.files)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrInvalidConfig with %q", err, tc.wantErr)
				}
				for _, a := range tc.args {
					if len(a) > 8 && strings.Contains(err.Error(), a) && a != "$DIR/d" && a != "$DIR/a.json" {
						t.Errorf("error %q repeats the key", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rc.Encrypt != tc.want {
				t.Errorf("Encrypt = %+v, want %+v", rc.Encrypt, tc.want)
			}
			var got []string
			for _, w := range warnings {
				if strings.Contains(w, "keyring") {
					got = append(got, w)
				}
			}
			if !slices.Equal(got, tc.warns) {
				t.Errorf("keyring warnings = %q, want %q", got, tc.warns)
			}
		})
	}
}

// TestKeyringPath: the keyring is persisted under the data dir except in
// -dev and with disable_keyring_file.
func TestKeyringPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		rc   RuntimeConfig
		want string
	}{
		{"data dir", RuntimeConfig{DataDir: "/d"}, "/d/serf/local.keyring"},
		{"dev", RuntimeConfig{DataDir: "/d", DevMode: true}, ""},
		{"disabled", RuntimeConfig{DataDir: "/d", Encrypt: Encrypt{DisableKeyringFile: true}}, ""},
		{"no data dir", RuntimeConfig{}, ""},
	} {
		if got := tc.rc.KeyringPath(LANKeyringFile); got != tc.want {
			t.Errorf("%s: KeyringPath = %q, want %q", tc.name, got, tc.want)
		}
	}
}
