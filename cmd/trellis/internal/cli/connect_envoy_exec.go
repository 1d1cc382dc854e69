package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// findEnvoy returns -envoy-binary, or "envoy" from the PATH of env.
func (c *connectEnvoyCmd) findEnvoy(env *Env) (string, error) {
	if c.envoyBinary != "" {
		if err := isExecutable(c.envoyBinary); err != nil {
			return "", err
		}
		return c.envoyBinary, nil
	}
	for _, dir := range filepath.SplitList(env.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, "envoy")
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	return "", errors.New(`exec: "envoy": executable file not found in $PATH`)
}

func isExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return &fs.PathError{Op: "exec", Path: path, Err: fs.ErrPermission}
	}
	return nil
}

// envoyArgs is Envoy's command line: the config, hot restart disabled
// (so that several Envoys run side by side without sharing memory) unless
// the pass-through options configure hot restart, then those options.
func envoyArgs(binary, configPath string, extra []string) []string {
	args := []string{binary, "--config-path", configPath}
	if !hasHotRestartOption(extra) {
		args = append(args, "--disable-hot-restart")
	}
	return append(args, extra...)
}

func hasHotRestartOption(args []string) bool {
	for _, a := range args {
		for _, opt := range []string{"--restart-epoch", "--hot-restart-version", "--drain-time-s", "--parent-shutdown-time-s"} {
			if a == opt || strings.HasPrefix(a, opt+"=") {
				return true
			}
		}
	}
	return false
}
