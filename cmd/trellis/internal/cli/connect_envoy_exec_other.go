//go:build !unix

package cli

// execEnvoy cannot replace the process on this system.
func execEnvoy(string, []byte, []string) error { return errExecUnsupported }
