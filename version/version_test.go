package version

import (
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
