package fsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestAutopilotCommandAndSnapshot: set and check-and-set as Consul's
// (CAS 0 only creates, otherwise the ModifyIndex must match), and the
// configuration survives a snapshot.
func TestAutopilotCommandAndSnapshot(t *testing.T) {
	f := New(Config{})
	last := populate(t, f)
	conf := structs.DefaultAutopilotConfig()
	steps := []struct {
		name string
		req  structs.AutopilotSetConfigRequest
		want bool
		// wantModify is the stored ModifyIndex after the step, as an
		// offset back from the step's own index (0: written there).
		wantBack uint64
	}{
		{name: "cas 0 creates", req: structs.AutopilotSetConfigRequest{Config: conf, CAS: true}, want: true},
		{name: "cas 0 again loses", req: structs.AutopilotSetConfigRequest{Config: conf, CAS: true}, want: false, wantBack: 1},
		{name: "stale cas loses", req: structs.AutopilotSetConfigRequest{Config: withIndex(conf, 1), CAS: true}, want: false, wantBack: 2},
		{name: "cas at the stored index wins", req: structs.AutopilotSetConfigRequest{Config: withIndex(conf, last+1), CAS: true}, want: true},
		{name: "set always writes", req: structs.AutopilotSetConfigRequest{Config: structs.AutopilotConfig{MaxTrailingLogs: 9, LastContactThreshold: time.Second}}, want: true},
	}
	first := last + 1
	for _, s := range steps {
		last++
		if got := apply(t, f, last, structs.AutopilotRequestType, &s.req); got != s.want {
			t.Fatalf("%s: got %#v, want %v", s.name, got, s.want)
		}
		_, c, err := f.State().AutopilotConfig(nil)
		if err != nil || c == nil || c.ModifyIndex != last-s.wantBack || c.CreateIndex != first {
			t.Fatalf("%s: stored %+v, %v", s.name, c, err)
		}
	}
	_, before, _ := f.State().AutopilotConfig(nil)
	if before.CleanupDeadServers || before.MaxTrailingLogs != 9 {
		t.Fatalf("a set replaces the whole configuration: %+v", before)
	}
	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	idx, after, err := dst.State().AutopilotConfig(nil)
	if err != nil || !reflect.DeepEqual(after, before) || idx != last {
		t.Fatalf("restored %+v at %d, %v; want %+v at %d", after, idx, err, before, last)
	}
}

func withIndex(c structs.AutopilotConfig, modify uint64) structs.AutopilotConfig {
	c.ModifyIndex = modify
	return c
}

// TestRestoreVersion4Stream: a stream written before the autopilot
// configuration was replicated (version 4) still restores, without one.
func TestRestoreVersion4Stream(t *testing.T) {
	src := New(Config{})
	populate(t, src)
	buf, _ := nodeOnlyStream(t, func() (structs.Nodes, error) {
		_, ns, err := src.State().Nodes(nil, nil)
		return ns, err
	}, 4, src.State().LastIndex())
	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(buf)); err != nil {
		t.Fatalf("version 4 stream: %v", err)
	}
	if _, c, err := dst.State().AutopilotConfig(nil); err != nil || c != nil {
		t.Fatalf("autopilot config after a version 4 restore = %+v, %v", c, err)
	}
}
