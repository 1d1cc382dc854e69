package gossip

import (
	"log/slog"
	"net"
	"testing"

	"github.com/hashicorp/serf/serf"
)

func TestParseServer(t *testing.T) {
	ip := net.ParseIP("127.0.0.1")
	tests := []struct {
		name string
		tags map[string]string
		want *ServerMeta
	}{
		{
			name: "server tags",
			tags: ServerTags("dc1", "id-1", 8300, 3, false, "v1"),
			want: &ServerMeta{Name: "n", ID: "id-1", Datacenter: "dc1", Addr: "127.0.0.1:8300", Expect: 3, Status: serf.StatusAlive},
		},
		{
			name: "bootstrap server without expect",
			tags: ServerTags("dc2", "id-2", 8301, 0, true, "v1"),
			want: &ServerMeta{Name: "n", ID: "id-2", Datacenter: "dc2", Addr: "127.0.0.1:8301", Bootstrap: true, Status: serf.StatusAlive},
		},
		{name: "client tags", tags: ClientTags("dc1", "id-3", "v1")},
		{name: "no tags"},
		{name: "server without port", tags: map[string]string{TagRole: RoleServer}},
		{name: "server with port 0", tags: map[string]string{TagRole: RoleServer, TagPort: "0"}},
		{name: "server with port past 65535", tags: map[string]string{TagRole: RoleServer, TagPort: "65536"}},
		{name: "server with a port that is not a number", tags: map[string]string{TagRole: RoleServer, TagPort: "http"}},
		{
			// A member from a newer or odd version is still a server.
			name: "unparsable expect reads as none",
			tags: map[string]string{TagRole: RoleServer, TagPort: "8300", TagExpect: "many"},
			want: &ServerMeta{Name: "n", Addr: "127.0.0.1:8300", Status: serf.StatusAlive},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseServer(serf.Member{Name: "n", Addr: ip, Port: 8301, Tags: tt.tags, Status: serf.StatusAlive})
			if ok != (tt.want != nil) {
				t.Fatalf("ParseServer ok = %v, want %v (meta %+v)", ok, tt.want != nil, got)
			}
			if tt.want != nil && *got != *tt.want {
				t.Errorf("ParseServer = %+v, want %+v", *got, *tt.want)
			}
		})
	}
}

// TestTags pins the tag values Consul's tools read from the member list.
func TestTags(t *testing.T) {
	tests := []struct {
		name string
		got  map[string]string
		want map[string]string
	}{
		{
			name: "server",
			got:  ServerTags("dc1", "id", 8300, 3, true, "b"),
			want: map[string]string{"role": "consul", "dc": "dc1", "port": "8300", "id": "id", "build": "b", "vsn": "2", "raft_vsn": "3", "expect": "3", "bootstrap": "1"},
		},
		{
			name: "server without expect or bootstrap",
			got:  ServerTags("dc1", "id", 8300, 0, false, "b"),
			want: map[string]string{"role": "consul", "dc": "dc1", "port": "8300", "id": "id", "build": "b", "vsn": "2", "raft_vsn": "3"},
		},
		{
			name: "client",
			got:  ClientTags("dc1", "id", "b"),
			want: map[string]string{"role": "node", "dc": "dc1", "id": "id", "build": "b", "vsn": "2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.got) != len(tt.want) {
				t.Errorf("tags = %v, want %v", tt.got, tt.want)
			}
			for k, v := range tt.want {
				if tt.got[k] != v {
					t.Errorf("tag %s = %q, want %q", k, tt.got[k], v)
				}
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	m := serf.Member{Name: "web-1", Addr: net.ParseIP("10.0.0.7"), Port: 8301, Status: serf.StatusFailed}
	if got, want := Describe(m), "web-1 (10.0.0.7:8301, failed)"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

// TestLevelWriter checks that serf's and memberlist's "[LEVEL] text" lines
// become slog records at that level, without the prefix.
func TestLevelWriter(t *testing.T) {
	tests := []struct {
		line  string
		level slog.Level
		msg   string
	}{
		{"[TRACE] probing\n", slog.LevelDebug - 4, "probing"},
		{"[DEBUG] memberlist: stream connection\n", slog.LevelDebug, "memberlist: stream connection"},
		{"[INFO] serf: EventMemberJoin: a 127.0.0.1\n", slog.LevelInfo, "serf: EventMemberJoin: a 127.0.0.1"},
		{"[WARN] memberlist: was able to connect\n", slog.LevelWarn, "memberlist: was able to connect"},
		{"[ERR] memberlist: failed to receive\n", slog.LevelError, "memberlist: failed to receive"},
		{"[ERROR] serf: bad\n", slog.LevelError, "serf: bad"},
		{"no prefix at all\n", slog.LevelInfo, "no prefix at all"},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			var logs lockedRecords
			w := &levelWriter{logger: logs.logger()}
			n, err := w.Write([]byte(tt.line))
			if err != nil || n != len(tt.line) {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(tt.line))
			}
			if len(logs.records) != 1 {
				t.Fatalf("got %d records, want 1", len(logs.records))
			}
			if r := logs.records[0]; r.Level != tt.level || r.Message != tt.msg {
				t.Errorf("record = %v %q, want %v %q", r.Level, r.Message, tt.level, tt.msg)
			}
		})
	}
}
