package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// DefaultPackage is the main package of the trellis binary, relative to the
// module root.
const DefaultPackage = "./cmd/trellis"

// BuildConfig says what to build and where to put it.
type BuildConfig struct {
	// OutDir receives the binary. Required; the caller creates and removes
	// it (TestMain: os.MkdirTemp before m.Run, os.RemoveAll after).
	OutDir string
	// ModuleDir is the module root; empty means the nearest directory at or
	// above the working directory that holds a go.mod.
	ModuleDir string
	// Package is the main package; empty means DefaultPackage.
	Package string
	// Name is the binary's file name; empty means "trellis".
	Name string
	// Race builds with -race, so data races in the servers fail the
	// scenario that triggers them (slower to build and to run).
	Race bool
	// GoCommand is the go tool; empty means "go" from PATH.
	GoCommand string
	// Env is appended to the build environment (for example CGO_ENABLED=0).
	Env []string
}

// BuildBinary runs `go build` once and returns the path of the binary.
// Compiler output is part of the error, which wraps ErrBuild.
func BuildBinary(ctx context.Context, cfg BuildConfig) (string, error) {
	if cfg.OutDir == "" {
		return "", fmt.Errorf("%w: BuildConfig.OutDir is required", ErrInvalidConfig)
	}
	if cfg.ModuleDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("harness: working directory: %w", err)
		}
		root, err := ModuleRoot(wd)
		if err != nil {
			return "", err
		}
		cfg.ModuleDir = root
	}
	if cfg.Package == "" {
		cfg.Package = DefaultPackage
	}
	if cfg.Name == "" {
		cfg.Name = "trellis"
	}
	if runtime.GOOS == "windows" {
		cfg.Name += ".exe"
	}
	if cfg.GoCommand == "" {
		cfg.GoCommand = "go"
	}
	out, err := filepath.Abs(filepath.Join(cfg.OutDir, cfg.Name))
	if err != nil {
		return "", fmt.Errorf("harness: output path: %w", err)
	}
	args := []string{"build", "-o", out}
	if cfg.Race {
		args = append(args, "-race")
	}
	args = append(args, cfg.Package)
	cmd := exec.CommandContext(ctx, cfg.GoCommand, args...)
	cmd.Dir = cfg.ModuleDir
	cmd.Env = append(os.Environ(), cfg.Env...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: go %v in %s: %w\n%s", ErrBuild, args, cfg.ModuleDir, err, output)
	}
	return out, nil
}

// ModuleRoot returns dir or its nearest parent that contains a go.mod.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("harness: module root: %w", err)
	}
	for {
		_, err := os.Stat(filepath.Join(dir, "go.mod"))
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("harness: module root: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no go.mod at or above the working directory", ErrInvalidConfig)
		}
		dir = parent
	}
}
