package config

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenerateUUID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id, err := GenerateUUID()
		if err != nil {
			t.Fatal(err)
		}
		if !IsUUID(id) || id != strings.ToLower(id) || id[14] != '4' {
			t.Fatalf("GenerateUUID() = %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate %q", id)
		}
		seen[id] = true
	}
}

func TestIsUUID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"11111111-2222-3333-4444-555555555555", true},
		{"ABCDEF01-2222-3333-4444-555555555555", true},
		{"11111111-2222-3333-4444-55555555555", false},
		{"11111111_2222-3333-4444-555555555555", false},
		{"g1111111-2222-3333-4444-555555555555", false},
		{"", false},
	} {
		if got := IsUUID(tc.in); got != tc.want {
			t.Errorf("IsUUID(%q) = %v", tc.in, got)
		}
	}
}

func TestNodeIDPersistence(t *testing.T) {
	for _, tc := range []struct {
		name      string
		existing  string // content of <data-dir>/node-id, "" for none
		flagID    string
		wantID    string // "" = generated
		wantFile  string // expected file content after Load, "" = same as the ID
		wantErr   string
		noDataDir bool
	}{
		{name: "generated and persisted"},
		{name: "read back", existing: "AAAAAAAA-2222-3333-4444-555555555555\n", wantID: "aaaaaaaa-2222-3333-4444-555555555555",
			wantFile: "AAAAAAAA-2222-3333-4444-555555555555\n"},
		{name: "configured wins and is not written", existing: "aaaaaaaa-2222-3333-4444-555555555555",
			flagID: "BBBBBBBB-2222-3333-4444-555555555555", wantID: "bbbbbbbb-2222-3333-4444-555555555555",
			wantFile: "aaaaaaaa-2222-3333-4444-555555555555"},
		{name: "corrupt file", existing: "garbage", wantErr: "not a valid UUID"},
		{name: "dev without data dir", noDataDir: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			args := []string{"-dev"}
			if !tc.noDataDir {
				args = append(args, "-data-dir", dir)
			}
			if tc.existing != "" {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, dir, NodeIDFile, tc.existing)
			}
			if tc.flagID != "" {
				args = append(args, "-node-id", tc.flagID)
			}
			rc, _, err := Load(LoadOptions{Args: args, Logger: slog.New(slog.DiscardHandler)})
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrNodeID) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrNodeID with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantID != "" && rc.NodeID != tc.wantID {
				t.Fatalf("NodeID = %q, want %q", rc.NodeID, tc.wantID)
			}
			if !IsUUID(rc.NodeID) {
				t.Fatalf("NodeID = %q", rc.NodeID)
			}
			if tc.noDataDir {
				return
			}
			b, err := os.ReadFile(filepath.Join(dir, NodeIDFile))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.wantFile
			if want == "" {
				want = rc.NodeID
			}
			if string(b) != want {
				t.Fatalf("node-id file = %q, want %q", b, want)
			}
			if fi, _ := os.Stat(filepath.Join(dir, NodeIDFile)); tc.existing == "" && fi.Mode().Perm() != 0o600 {
				t.Fatalf("node-id mode %v", fi.Mode())
			}
			// A second start keeps the identity.
			again, _, err := Load(LoadOptions{Args: []string{"-dev", "-data-dir", dir}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.flagID == "" && again.NodeID != rc.NodeID {
				t.Fatalf("restart changed NodeID %q -> %q", rc.NodeID, again.NodeID)
			}
		})
	}
}

func TestInvalidConfigWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, _, err := Load(LoadOptions{Args: []string{"-server", "-bootstrap", "-http-port", "0", "-data-dir", dir}}); err == nil {
		t.Fatal("want an error")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data dir created by a failed Load: %v", err)
	}
}

func TestParseLogLevel(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"trace", LevelTrace, false}, {"DEBUG", slog.LevelDebug, false}, {"info", slog.LevelInfo, false},
		{"", slog.LevelInfo, false}, {"Warn", slog.LevelWarn, false}, {"warning", slog.LevelWarn, false},
		{"err", slog.LevelError, false}, {"ERROR", slog.LevelError, false}, {"verbose", 0, true},
	} {
		got, err := ParseLogLevel(tc.in)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("ParseLogLevel(%q) = %v, %v", tc.in, got, err)
		}
	}
}
