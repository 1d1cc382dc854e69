package structs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestIntentionJSONTimes: CreatedAt and UpdatedAt appear only when set (a
// legacy intention's), as in Consul's API, and decode back.
func TestIntentionJSONTimes(t *testing.T) {
	at := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		ixn     Intention
		want    []string
		wantNot []string
	}{
		{name: "config-entry intention", ixn: Intention{SourceName: "web", DestinationName: "db", Action: "allow"},
			want: []string{`"SourceName":"web"`}, wantNot: []string{"CreatedAt", "UpdatedAt"}},
		{name: "legacy intention", ixn: Intention{ID: "x", SourceName: "web", DestinationName: "db", Action: "allow", CreatedAt: at, UpdatedAt: at.Add(time.Minute)},
			want: []string{`"ID":"x"`, `"CreatedAt":"2026-11-30T07:00:00Z"`, `"UpdatedAt":"2026-11-30T07:01:00Z"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []any{tc.ixn, &tc.ixn, Intentions{&tc.ixn}} {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range tc.want {
					if !strings.Contains(string(b), w) {
						t.Errorf("%T: %s lacks %s", v, b, w)
					}
				}
				for _, w := range tc.wantNot {
					if strings.Contains(string(b), w) {
						t.Errorf("%T: %s has %s", v, b, w)
					}
				}
			}
			b, _ := json.Marshal(tc.ixn)
			var back Intention
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !back.CreatedAt.Equal(tc.ixn.CreatedAt) || !back.UpdatedAt.Equal(tc.ixn.UpdatedAt) || back.SourceName != "web" {
				t.Fatalf("decoded %+v from %s", back, b)
			}
		})
	}
}
