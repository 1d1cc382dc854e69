package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPackageMap checks the module's real imports against imports.txt.
func TestPackageMap(t *testing.T) {
	f, err := os.Open("imports.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	rules, err := parseMap(f)
	if err != nil {
		t.Fatalf("imports.txt: %v", err)
	}
	pkgs := modulePackages(t)
	for _, p := range check(rules, pkgs) {
		t.Error(p)
	}
}

// modulePackages lists the module's packages with their non-test imports
// of the module, from one `go list` at the module root.
func modulePackages(t *testing.T) []pkg {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// -deps makes go list load the whole graph, so a package it cannot
	// resolve fails here rather than being skipped; only the module's
	// own packages are kept.
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-json=ImportPath,Imports,Module", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs, err := decodePackages(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("go list output: %v", err)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package of the main module")
	}
	return pkgs
}

// decodePackages turns go list's stream of JSON objects into the main
// module's packages, paths made relative to the module ("." for its root).
func decodePackages(r io.Reader) ([]pkg, error) {
	type listed struct {
		ImportPath string
		Imports    []string
		Module     *struct {
			Path string
			Main bool
		}
	}
	var pkgs []pkg
	dec := json.NewDecoder(r)
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if l.Module == nil || !l.Module.Main {
			continue
		}
		p := pkg{path: relative(l.Module.Path, l.ImportPath)}
		for _, imp := range l.Imports {
			if imp == l.Module.Path || strings.HasPrefix(imp, l.Module.Path+"/") {
				p.imports = append(p.imports, relative(l.Module.Path, imp))
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func relative(module, path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

// moduleRoot walks up from the test's directory to the one holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestCheck runs the checker on made-up trees, so that a map the real tree
// happens to satisfy cannot hide a checker that accepts everything.
func TestCheck(t *testing.T) {
	const layered = `
# comment line
structs:
state: structs # trailing comment
connect:
connect/...: connect structs
server: state structs connect/...
`
	tests := []struct {
		name string
		text string
		pkgs []pkg
		// want are substrings, one per expected problem, in sorted order.
		want []string
	}{
		{
			name: "allowed exact and subtree imports",
			text: layered,
			pkgs: []pkg{
				{path: "structs"},
				{path: "state", imports: []string{"structs"}},
				{path: "connect"},
				{path: "connect/ca", imports: []string{"structs", "connect"}},
				{path: "server", imports: []string{"state", "connect", "connect/ca"}},
			},
		},
		{
			name: "forbidden import",
			text: layered,
			pkgs: []pkg{
				{path: "structs"},
				{path: "state", imports: []string{"structs", "server"}},
				{path: "connect"},
				{path: "server", imports: []string{"state"}},
			},
			want: []string{"state imports server, which imports.txt:4 (state) does not allow"},
		},
		{
			name: "package missing from the map",
			text: layered,
			pkgs: []pkg{
				{path: "structs"},
				{path: "state"},
				{path: "connect"},
				{path: "server"},
				{path: "gossip", imports: []string{"structs"}},
			},
			want: []string{"gossip: no rule of imports.txt matches it"},
		},
		{
			name: "exact rule narrows its subtree's rule",
			text: "a/...: b\na/leaf:\nb:\n",
			pkgs: []pkg{
				{path: "a", imports: []string{"b"}},
				{path: "a/mid", imports: []string{"b"}},
				{path: "a/leaf", imports: []string{"b"}},
				{path: "b"},
			},
			want: []string{"a/leaf imports b, which imports.txt:2 (a/leaf) does not allow"},
		},
		{
			name: "deeper subtree wins over shallower",
			text: "a/...: b\na/x/...: c\nb:\nc:\n",
			pkgs: []pkg{
				{path: "a/x/y", imports: []string{"c", "b"}},
				{path: "b"},
				{path: "c"},
			},
			want: []string{"a/x/y imports b, which imports.txt:2 (a/x/...) does not allow"},
		},
		{
			name: "subtree pattern is not a name prefix",
			text: "a/...:\nab: a\n",
			pkgs: []pkg{
				{path: "a"},
				{path: "ab", imports: []string{"a"}},
				{path: "abc"},
			},
			want: []string{"abc: no rule of imports.txt matches it"},
		},
		{
			name: "stale rule and stale allowed entry",
			text: "a: gone/...\ngone:\n",
			pkgs: []pkg{{path: "a"}},
			want: []string{
				"imports.txt:1: a allows gone/..., which names no package",
				"imports.txt:2: rule gone matches no package",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := parseMap(strings.NewReader(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			got := check(rules, tt.pkgs)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestParseMapRejects covers lines the parser must refuse rather than
// read as some other rule.
func TestParseMapRejects(t *testing.T) {
	for _, text := range []string{
		"structs",                // no colon
		": structs",              // no pattern
		"a b: structs",           // two patterns
		"structs:\nstructs: fsm", // the same pattern twice
	} {
		if _, err := parseMap(strings.NewReader(text)); err == nil {
			t.Errorf("parseMap(%q) = nil error, want one", text)
		}
	}
}

// TestDecodePackages keeps only the main module's packages and their
// imports of the module.
func TestDecodePackages(t *testing.T) {
	const out = `{"ImportPath": "fmt", "Imports": ["io"]}
{"ImportPath": "example.com/dep", "Module": {"Path": "example.com/dep"}}
{"ImportPath": "example.com/m", "Imports": ["fmt"], "Module": {"Path": "example.com/m", "Main": true}}
{"ImportPath": "example.com/m/a", "Imports": ["example.com/m", "example.com/mx", "example.com/dep", "example.com/m/b/c"], "Module": {"Path": "example.com/m", "Main": true}}
`
	got, err := decodePackages(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []pkg{{path: "."}, {path: "a", imports: []string{".", "b/c"}}}
	if !slices.EqualFunc(got, want, func(a, b pkg) bool { return a.path == b.path && slices.Equal(a.imports, b.imports) }) {
		t.Errorf("decodePackages = %+v, want %+v", got, want)
	}
}
