package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/version"
)

func TestVersionJSONFields(t *testing.T) {
	when := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		info version.Info
		want map[string]any
	}{
		{"stamped build", version.Info{Version: "0.1.0", ConsulVersion: "1.22.0", Revision: "0123456789abcdef", BuildDate: when},
			map[string]any{"Version": "1.22.0", "Revision": "0123456789abcdef", "BuildDate": "2026-11-30T12:00:00Z", "TrellisVersion": "0.1.0", "Prerelease": ""}},
		{"unstamped build", version.Info{Version: "0.1.0", ConsulVersion: "1.22.0"},
			map[string]any{"Version": "1.22.0", "Revision": "", "BuildDate": "0001-01-01T00:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(newVersionInfo(tc.info))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s = %v, want %v (%s)", k, got[k], want, b)
				}
			}
		})
	}
}
