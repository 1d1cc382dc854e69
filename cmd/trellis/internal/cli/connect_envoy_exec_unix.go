//go:build unix

package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
)

// execEnvoy replaces this process with Envoy. The bootstrap, which may hold
// an ACL token, goes in a temp file that is unlinked at once and handed over
// as an open descriptor (/dev/fd/N), so that it never stays on disk and no
// other process can open it by name.
func execEnvoy(binary string, bootstrapJSON []byte, extra []string) error {
	f, path, err := ephemeralConfigFile(bootstrapJSON)
	if err != nil {
		return fmt.Errorf("writing the bootstrap to a temp file: %w", err)
	}
	err = syscall.Exec(binary, envoyArgs(binary, path, extra), os.Environ()) //nolint:gosec // running the Envoy binary the user named is this command's job
	// Only reached on failure; f must stay open (and not be collected)
	// until then.
	runtime.KeepAlive(f)
	_ = f.Close()
	return err
}

// ephemeralConfigFile writes b to an unlinked temp file whose descriptor
// survives exec, and returns the path Envoy opens it by.
func ephemeralConfigFile(b []byte) (*os.File, string, error) {
	f, err := os.CreateTemp("", "trellis-envoy-bootstrap-*.json")
	if err != nil {
		return nil, "", err
	}
	fail := func(err error) (*os.File, string, error) {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, "", err
	}
	if _, err := f.Write(b); err != nil {
		return fail(err)
	}
	// /dev/fd/N shares the offset on some systems (macOS): rewind.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	if _, err := os.Stat("/dev/fd"); err != nil {
		// No /dev/fd: Envoy reads the file by name, which then stays.
		return f, f.Name(), nil //nolint:nilerr // no /dev/fd is not a failure: Envoy opens the file by name
	}
	if err := os.Remove(f.Name()); err != nil {
		return fail(err)
	}
	fd := f.Fd()
	// Clear close-on-exec so the descriptor survives into Envoy.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFD, 0); errno != 0 {
		return fail(errno)
	}
	return f, filepath.Join("/dev/fd", strconv.FormatUint(uint64(fd), 10)), nil
}
