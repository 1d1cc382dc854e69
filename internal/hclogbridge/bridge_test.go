package hclogbridge

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func TestHCLogBridgeFormatsAsHCLog(t *testing.T) {
	servers := []raft.Server{{Suffrage: raft.Voter, ID: "s1", Address: "127.0.0.1:8300"}}
	for _, tc := range []struct {
		name string
		args []any
		want string
	}{
		{"raft's initial configuration", []any{"index", uint64(1), "servers", hclog.Fmt("%+v", servers)},
			`index=1 servers="[{Suffrage:Voter ID:s1 Address:127.0.0.1:8300}]"`},
		{"hex", []any{"flags", hclog.Hex(255)}, "flags=0xff"},
		{"octal", []any{"mode", hclog.Octal(8)}, "mode=010"},
		{"binary", []any{"bits", hclog.Binary(5)}, "bits=0b101"},
		{"quote", []any{"raw", hclog.Quote("a b")}, `raw="\"a b\""`},
		{"empty format", []any{"f", hclog.Format{}}, "f=[]"},
		{"plain values", []any{"peer", "s2", "term", 3}, "peer=s2 term=3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := New(slog.New(slog.NewTextHandler(&buf, nil)), "raft")
			l.Info("msg", tc.args...)
			if !strings.Contains(buf.String(), tc.want) {
				t.Errorf("logged %q, want it to contain %q", buf.String(), tc.want)
			}
		})
	}
	// Arguments given to With are rendered the same way.
	var buf bytes.Buffer
	New(slog.New(slog.NewTextHandler(&buf, nil)), "raft").With("servers", hclog.Fmt("%d", 2)).Info("msg")
	if !strings.Contains(buf.String(), "servers=2") {
		t.Errorf("With: logged %q", buf.String())
	}
}
