package version

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestConstants(t *testing.T) {
	// sdk/testutil parses ConsulVersion with hashicorp/go-version and compares
	// it with 1.14 to decide whether to write ports.grpc_tls: it must stay a
	// bare release number.
	for _, tc := range []struct{ name, got, want string }{
		{"Version", Version, "0.1.0"},
		{"ConsulVersion", ConsulVersion, "1.22.0"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestHuman(t *testing.T) {
	for _, tc := range []struct {
		name string
		info Info
		want string
	}{
		{"release", Info{Version: "0.1.0", ConsulVersion: "1.22.0"}, "Trellis v0.1.0, Consul v1.22.0 compatible"},
		{"prerelease", Info{Version: "0.2.0", ConsulVersion: "1.22.0", Prerelease: "dev"}, "Trellis v0.2.0-dev, Consul v1.22.0 compatible"},
		{"revision", Info{Version: "0.1.0", ConsulVersion: "1.22.0", Revision: "0123456789abcdef", Modified: true, BuildDate: time.Unix(0, 0)},
			"Trellis v0.1.0 (0123456789ab+dirty), Consul v1.22.0 compatible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.info.Human(); got != tc.want {
				t.Errorf("Human() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	i := Get()
	if i.Version != Version || i.ConsulVersion != ConsulVersion {
		t.Fatalf("Get() = %+v", i)
	}
	if !strings.Contains(Human(), "Trellis v"+Version) {
		t.Fatalf("Human() = %q", Human())
	}
}

func TestFromBuildInfo(t *testing.T) {
	when := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		settings []debug.BuildSetting
		want     Info
	}{
		{"no build info", nil, Info{Version: Version, ConsulVersion: ConsulVersion}},
		{"stamped", []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-30T12:00:00Z"}, {Key: "vcs.modified", Value: "false"}},
			Info{Version: Version, ConsulVersion: ConsulVersion, Revision: "0123abcd", BuildDate: when}},
		{"dirty", []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}},
			Info{Version: Version, ConsulVersion: ConsulVersion, Revision: "0123abcd", Modified: true}},
		{"bad time", []debug.BuildSetting{{Key: "vcs.time", Value: "yesterday"}}, Info{Version: Version, ConsulVersion: ConsulVersion}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bi *debug.BuildInfo
			if tc.settings != nil {
				bi = &debug.BuildInfo{Settings: tc.settings}
			}
			if got := FromBuildInfo(bi); got != tc.want {
				t.Errorf("FromBuildInfo = %+v, want %+v", got, tc.want)
			}
		})
	}
}
