package checks

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestTCPCheckFollowsListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	closeLn := func() {
		if ln != nil {
			_ = ln.Close()
			ln = nil
		}
	}
	defer func() { closeLn() }()

	rec := newRecorder()
	c := NewTCPCheck(TCPCheckConfig{CheckID: "tcp", Address: addr, Interval: testInterval, Notifier: rec})
	c.Start()
	defer c.Stop()

	steps := []struct {
		name       string
		action     func()
		wantStatus string
		wantOutput string // exact when set
		contains   string
	}{
		{"listening", func() {}, structs.HealthPassing, fmt.Sprintf("TCP connect %s: Success", addr), ""},
		{"closed", closeLn, structs.HealthCritical, "", "connection refused"},
		{"listening again", func() { ln = listenAgain(t, addr) }, structs.HealthPassing, fmt.Sprintf("TCP connect %s: Success", addr), ""},
	}
	for _, st := range steps {
		st.action()
		u := rec.waitStatus(t, "tcp", st.wantStatus)
		if st.wantOutput != "" && u.output != st.wantOutput {
			t.Fatalf("%s: output %q, want %q", st.name, u.output, st.wantOutput)
		}
		if !strings.Contains(u.output, st.contains) {
			t.Fatalf("%s: output %q does not contain %q", st.name, u.output, st.contains)
		}
	}
}
