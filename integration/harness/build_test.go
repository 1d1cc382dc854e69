package harness

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeModule creates a one-package module whose main prints msg (or holds
// a syntax error when broken is set).
func writeModule(t *testing.T, broken bool) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"built by harness\") }\n"
	if broken {
		src = "package main\n\nfunc main() { undefinedThing() }\n"
	}
	files := map[string]string{
		"go.mod":              "module example.com/m\n\ngo 1.22\n",
		"cmd/trellis/main.go": src,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuildBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	mod := writeModule(t, false)
	out := t.TempDir()
	bin, err := BuildBinary(t.Context(), BuildConfig{OutDir: out, ModuleDir: mod})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(bin) != out || filepath.Base(bin) != "trellis" {
		t.Fatalf("binary at %s", bin)
	}
	got, err := exec.Command(bin).Output()
	if err != nil || string(got) != "built by harness\n" {
		t.Fatalf("running the binary: %q, %v", got, err)
	}

	_, err = BuildBinary(t.Context(), BuildConfig{OutDir: out, ModuleDir: writeModule(t, true)})
	if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "undefinedThing") {
		t.Fatalf("broken build err = %v, want ErrBuild with compiler output", err)
	}
	if _, err := BuildBinary(t.Context(), BuildConfig{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no OutDir err = %v", err)
	}
}

func TestModuleRoot(t *testing.T) {
	mod := writeModule(t, false)
	tests := []struct {
		dir  string
		want string
	}{
		{mod, mod},
		{filepath.Join(mod, "cmd", "trellis"), mod},
	}
	for _, tt := range tests {
		got, err := ModuleRoot(tt.dir)
		if err != nil || got != tt.want {
			t.Errorf("ModuleRoot(%s) = %q, %v; want %q", tt.dir, got, err, tt.want)
		}
	}
	if _, err := ModuleRoot(t.TempDir()); err == nil {
		// A temp dir has no go.mod above it unless TMPDIR sits inside a
		// module, which would be a strange setup; report it rather than fail.
		t.Log("a go.mod exists above the temp dir; skipping the negative case")
	}
}
