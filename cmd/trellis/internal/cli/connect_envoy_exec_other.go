//go:build !unix

package cli

import "errors"

// errExecUnsupported is returned where the process cannot become Envoy.
var errExecUnsupported = errors.New("running Envoy directly is only supported on unix systems; use -bootstrap and start Envoy with that file")

// execEnvoy cannot replace the process on this system.
func execEnvoy(string, []byte, []string) error { return errExecUnsupported }
