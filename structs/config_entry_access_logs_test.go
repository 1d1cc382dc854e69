package structs

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestProxyDefaultsAccessLogsDecode(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		want    AccessLogsConfig
		wantErr string
	}{
		{
			name: "camel case",
			body: `{"Kind":"proxy-defaults","Name":"global","AccessLogs":{"Enabled":true,"Type":"file","Path":"/var/log/envoy.log","JSONFormat":"{\"a\":\"%START_TIME%\"}"}}`,
			want: AccessLogsConfig{Enabled: true, Type: FileLogSinkType, Path: "/var/log/envoy.log", JSONFormat: `{"a":"%START_TIME%"}`},
		},
		{
			name: "snake case aliases",
			body: `{"kind":"proxy-defaults","name":"global","access_logs":{"enabled":true,"disable_listener_logs":true,"type":"stderr","text_format":"%START_TIME%"}}`,
			want: AccessLogsConfig{Enabled: true, DisableListenerLogs: true, Type: StdErrLogSinkType, TextFormat: "%START_TIME%"},
		},
		{
			name: "weakly typed bool",
			body: `{"Kind":"proxy-defaults","Name":"global","AccessLogs":{"Enabled":"true","json_format":"{}"}}`,
			want: AccessLogsConfig{Enabled: true, JSONFormat: "{}"},
		},
		{
			name: "absent",
			body: `{"Kind":"proxy-defaults","Name":"global"}`,
		},
		{
			name:    "unknown key",
			body:    `{"Kind":"proxy-defaults","Name":"global","AccessLogs":{"Enabled":true,"Format":"x"}}`,
			wantErr: `invalid config key "AccessLogs.Format"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := DecodeConfigEntryJSON([]byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := e.(*ProxyConfigEntry).AccessLogs; got != tc.want {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestProxyDefaultsAccessLogsValidate(t *testing.T) {
	cases := []struct {
		name string
		logs AccessLogsConfig
		want string // "" means valid
	}{
		{"zero", AccessLogsConfig{}, ""},
		{"enabled default", AccessLogsConfig{Enabled: true}, ""},
		{"stdout text", AccessLogsConfig{Enabled: true, Type: StdOutLogSinkType, TextFormat: "[%START_TIME%]"}, ""},
		{"stderr json", AccessLogsConfig{Enabled: true, Type: StdErrLogSinkType, JSONFormat: `{"t":"%START_TIME%"}`}, ""},
		{"file with path", AccessLogsConfig{Enabled: true, Type: FileLogSinkType, Path: "/tmp/a.log"}, ""},
		{"json array is json", AccessLogsConfig{Enabled: true, JSONFormat: `[1]`}, ""},
		{"unknown type", AccessLogsConfig{Enabled: true, Type: "syslog"}, "invalid access log type: syslog"},
		{"file without path", AccessLogsConfig{Enabled: true, Type: FileLogSinkType}, "path must be specified when using file type access logs"},
		{"both formats", AccessLogsConfig{Enabled: true, JSONFormat: "{}", TextFormat: "x"}, "cannot specify both access log JSONFormat and TextFormat"},
		{"path with stdout", AccessLogsConfig{Enabled: true, Path: "/tmp/a.log"}, "path is only valid for file type access logs"},
		{"path with stderr", AccessLogsConfig{Type: StdErrLogSinkType, Path: "/tmp/a.log"}, "path is only valid for file type access logs"},
		{"bad json", AccessLogsConfig{Enabled: true, JSONFormat: `{"a":`}, "invalid access log json for JSON format: "},
		// Consul checks the settings whether or not logging is enabled.
		{"disabled is checked too", AccessLogsConfig{Type: FileLogSinkType}, "path must be specified when using file type access logs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &ProxyConfigEntry{Name: ProxyConfigGlobal, AccessLogs: tc.logs}
			if err := e.Normalize(); err != nil {
				t.Fatal(err)
			}
			err := e.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("err = %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestProxyDefaultsAccessLogsCodec(t *testing.T) {
	c := NewCodec()
	in := &ProxyConfigEntry{Kind: ProxyDefaults, Name: ProxyConfigGlobal, AccessLogs: AccessLogsConfig{
		Enabled: true, DisableListenerLogs: true, Type: FileLogSinkType, Path: "/a", TextFormat: "%START_TIME%",
	}}
	b, err := c.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out ProxyConfigEntry
	if err := c.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, &out) {
		t.Fatalf("round trip:\n in %#v\nout %#v", in, &out)
	}

	// Entries stored while AccessLogs was an opaque map still decode:
	// an absent value, and the field names Consul's JSON uses.
	type oldEntry struct {
		Kind       string
		Name       string
		AccessLogs map[string]interface{}
	}
	for _, old := range []oldEntry{
		{Kind: ProxyDefaults, Name: ProxyConfigGlobal},
		{Kind: ProxyDefaults, Name: ProxyConfigGlobal, AccessLogs: map[string]interface{}{"Enabled": true, "Type": "stderr"}},
	} {
		b, err := c.Marshal(&old)
		if err != nil {
			t.Fatal(err)
		}
		var got ProxyConfigEntry
		if err := c.Unmarshal(b, &got); err != nil {
			t.Fatalf("old %v: %v", old.AccessLogs, err)
		}
		want := AccessLogsConfig{}
		if old.AccessLogs != nil {
			want = AccessLogsConfig{Enabled: true, Type: StdErrLogSinkType}
		}
		if got.AccessLogs != want {
			t.Fatalf("old %v decoded as %#v", old.AccessLogs, got.AccessLogs)
		}
	}
}

func TestProxyDefaultsAccessLogsJSON(t *testing.T) {
	// Consul's JSON carries the block, empty when unset, with its field
	// names (what the official client decodes).
	b, err := json.Marshal(&ProxyConfigEntry{Kind: ProxyDefaults, Name: ProxyConfigGlobal})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"AccessLogs":{}`) {
		t.Fatalf("zero AccessLogs in %s", b)
	}
	b, _ = json.Marshal(&AccessLogsConfig{Enabled: true, DisableListenerLogs: true, Type: FileLogSinkType, Path: "/a", JSONFormat: "{}"})
	if got := string(b); got != `{"Enabled":true,"DisableListenerLogs":true,"Type":"file","Path":"/a","JSONFormat":"{}"}` {
		t.Fatalf("JSON %s", got)
	}
	// And a JSON round trip through the API's decoder gives it back.
	full := `{"Kind":"proxy-defaults","Name":"global","AccessLogs":` + string(b) + `}`
	e, err := DecodeConfigEntryJSON([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.(*ProxyConfigEntry).AccessLogs; got != (AccessLogsConfig{Enabled: true, DisableListenerLogs: true, Type: FileLogSinkType, Path: "/a", JSONFormat: "{}"}) {
		t.Fatalf("decoded %#v", got)
	}
}
