package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCLIServerCommands: trellis lock against a real server holds
// Consul's lock at PREFIX/.lock (or a semaphore under PREFIX with -n > 1)
// while the child runs, releases and cleans it up afterwards, and gives
// Consul's exit codes; trellis info prints the server's Stats sections;
// trellis monitor streams the agent's debug logs until interrupted.
func TestCLIServerCommands(t *testing.T) {
	_, leader := startAgentCluster(t, agentClusterConfig{servers: 1})
	ctx := scenarioContext(t)
	addr := leader.HTTPAddr()
	t.Run("info", func(t *testing.T) {
		r := runCLI(ctx, t, "info", "-http-addr", addr)
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		for _, want := range []string{"agent:\n", "build:\n", "consul:\n", "raft:\n", "runtime:\n", "serf_lan:\n",
			"\tleader = true\n", "\tserver = true\n", "\tstate = Leader\n", "\tmembers = 1\n", "\tversion = 1.22.0\n"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("info lacks %q: %v", want, r)
			}
		}
	})
	client := newConsulClient(t, addr)
	lock := func(args ...string) cliResult {
		return runCLI(ctx, t, append([]string{"lock", "-http-addr", addr}, args...)...)
	}
	// noKeysUnder fails when the lock left anything behind.
	noKeysUnder := func(t *testing.T, prefix string) {
		t.Helper()
		pairs, _, err := client.KV().List(prefix, nil)
		if err != nil || len(pairs) != 0 {
			t.Fatalf("keys left under %s: %v (%v)", prefix, pairs, err)
		}
	}

	t.Run("monitor", func(t *testing.T) { cliMonitor(ctx, t, addr) })

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
		prefix string
	}{
		{name: "lock held while the child runs", prefix: "l1",
			args:   []string{"l1", `echo held=$CONSUL_LOCK_HELD; echo done`},
			stdout: "held=true\ndone\n"},
		{name: "semaphore", prefix: "s1", args: []string{"-n", "2", "s1", "echo", "sem"}, stdout: "sem\n"},
		{name: "child failure is not propagated by default", prefix: "l2", args: []string{"l2", "exit 3"}},
		{name: "-child-exit-code", prefix: "l3", args: []string{"-child-exit-code", "l3", "exit 3"}, code: 2},
		{name: "verbose", prefix: "l4", args: []string{"-verbose", "l4", "true"},
			stdout: "Setting up lock at path: l4/.lock\nAttempting lock acquisition\nStarting handler\nCleanup succeeded\n"},
		{name: "missing child", args: []string{"l5"}, code: 1, stderr: "Key prefix and child command must be specified"},
		{name: "bad limit", args: []string{"-n", "0", "l5", "true"}, code: 1, stderr: "Lock holder limit must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := lock(tt.args...)
			if r.code != tt.code || (tt.stdout != "" && r.stdout != tt.stdout) || !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("%v", r)
			}
			if tt.prefix != "" {
				noKeysUnder(t, tt.prefix)
			}
		})
	}

	t.Run("lost lock ends the child", func(t *testing.T) {
		done := make(chan cliResult, 1)
		go func() { done <- lock("-child-exit-code", "lost", "sleep 60") }()
		var session string
		eventually(t, 20*time.Second, "the lock at lost/.lock", func() error {
			pair, _, err := client.KV().Get("lost/.lock", nil)
			if err != nil || pair == nil || pair.Session == "" {
				return fmt.Errorf("not held: %+v %w", pair, err)
			}
			session = pair.Session
			return nil
		})
		if _, err := client.Session().Destroy(session, nil); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.code != 2 || !strings.Contains(r.stderr, "Lock lost, killing child") {
			t.Fatalf("%v", r)
		}
	})

	t.Run("-timeout while another holds the lock", func(t *testing.T) {
		l, err := client.LockKey("held/.lock")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Lock(nil); err != nil {
			t.Fatal(err)
		}
		r := lock("-timeout", "500ms", "held", "echo never")
		if r.code != 1 || strings.Contains(r.stdout, "never") ||
			!strings.Contains(r.stderr, "Shutdown triggered or timeout during lock acquisition") {
			t.Fatalf("%v", r)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		r = lock("-timeout", "5s", "held", "echo now")
		if r.code != 0 || r.stdout != "now\n" {
			t.Fatalf("%v", r)
		}
		pair, _, err := client.KV().Get("held/.lock", nil)
		if err != nil || (pair != nil && pair.Session != "") {
			t.Fatalf("lock still held after the command: %+v (%v)", pair, err)
		}
	})
}

// cliMonitor runs `trellis monitor -log-level debug` and fires user events
// until the agent's debug line about one shows up in its output, then
// interrupts it: Consul's monitor exits 0 on an interrupt.
func cliMonitor(ctx context.Context, t *testing.T, addr string) {
	cmd := exec.CommandContext(ctx, requireBinary(t), "monitor", "-log-level", "debug", "-http-addr", addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "user event received") && strings.Contains(sc.Text(), "event=monitored") {
				found <- sc.Text()
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	eventually(t, 20*time.Second, "a user event in the monitor's output", func() error {
		if r := runCLI(ctx, t, "event", "-http-addr", addr, "-name", "monitored"); r.code != 0 {
			return fmt.Errorf("%v", r)
		}
		select {
		case <-found:
			return nil
		case <-time.After(300 * time.Millisecond):
			return errors.New("not seen yet")
		}
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("monitor after an interrupt: %v (stderr %s)", err, stderr.String())
	}
}
