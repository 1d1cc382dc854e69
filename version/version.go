// Package version holds the two versions a Trellis binary reports: its own
// release and the Consul release whose HTTP API, CLI and config it emulates.
//
// Tools written against Consul look at the Consul version, not at ours:
// Consul's sdk/testutil runs `consul version -format=json` and parses
// `Version` with hashicorp/go-version to decide which config keys to write, so
// that field must always be a plain Consul release number. Our own release is
// reported beside it, never instead of it.
package version

import (
	"fmt"
	"runtime/debug"
	"time"
)

const (
	// Version is the Trellis release.
	Version = "0.1.0"

	// ConsulVersion is the Consul release whose behaviour Trellis emulates.
	// It is what `trellis version -format=json` reports as "Version" and
	// what the agent reports as its build in Serf tags and /v1/agent/self, so
	// that clients which branch on the Consul version take the 1.22 paths.
	ConsulVersion = "1.22.0"

	// Prerelease marks a pre-release of Trellis ("" for a release). It is
	// reported as Consul reports its own pre-release tag.
	Prerelease = ""
)

// Info describes this build. Zero values mean "unknown" (a binary built
// without VCS stamping has no revision or build date).
type Info struct {
	// Version is the Trellis release, e.g. "0.1.0".
	Version string
	// ConsulVersion is the emulated Consul release, e.g. "1.22.0".
	ConsulVersion string
	// Prerelease is the pre-release tag, "" for a release.
	Prerelease string
	// Revision is the VCS commit the binary was built from, if known.
	Revision string
	// Modified is true when the work tree had uncommitted changes at build.
	Modified bool
	// BuildDate is the commit time of Revision, if known.
	BuildDate time.Time
}

// Get returns the version information of the running binary. The revision
// and date come from the Go toolchain's VCS stamping (debug.ReadBuildInfo),
// so no -ldflags are needed and there is no mutable package state.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return FromBuildInfo(bi)
}

// FromBuildInfo is Get for the given build information (nil when the
// binary has none): vcs.revision, vcs.modified and vcs.time, which `go
// build` records from the work tree it builds in, and none of which `go
// test` or `go run` record.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: Version, ConsulVersion: ConsulVersion, Prerelease: Prerelease}
	if bi == nil {
		return info
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				info.BuildDate = t
			}
		}
	}
	return info
}

// Human returns the one-line description people read, e.g.
// "Trellis v0.1.0 (Consul v1.22.0 compatible)". A pre-release tag and a
// short revision are appended when known.
func (i Info) Human() string {
	v := "v" + i.Version
	if i.Prerelease != "" {
		v += "-" + i.Prerelease
	}
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if i.Modified {
			rev += "+dirty"
		}
		v += " (" + rev + ")"
	}
	return fmt.Sprintf("Trellis %s, Consul v%s compatible", v, i.ConsulVersion)
}

// Human is shorthand for Get().Human().
func Human() string { return Get().Human() }
