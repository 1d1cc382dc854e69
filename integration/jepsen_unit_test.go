package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// These tests check the checker on hand-built histories; they start no
// process and run with -short.

// h builds operations on key k0 unless key is set; call and return are in
// arbitrary units.
type h struct {
	kind          opKind
	key           string
	value         string // written, or read ("" = absent)
	expect        string
	out           outcome
	index         uint64
	call, return_ int64
}

func build(ops ...h) []jepsenOp {
	var out []jepsenOp
	for i, o := range ops {
		key := o.key
		if key == "" {
			key = "k0"
		}
		out = append(out, jepsenOp{
			Process: i, Client: i, Kind: o.kind, Key: key, Value: o.value, Expect: o.expect,
			Outcome: o.out, Index: o.index, Call: o.call, Return: o.return_,
		})
	}
	return out
}

func TestRegisterModel(t *testing.T) {
	w := func(v string, out outcome, call, ret int64) h {
		return h{kind: opWrite, value: v, out: out, call: call, return_: ret}
	}
	r := func(v string, call, ret int64) h {
		return h{kind: opRead, value: v, out: outcomeOK, call: call, return_: ret}
	}
	cas := func(exp, v string, out outcome, call, ret int64) h {
		return h{kind: opCAS, expect: exp, value: v, out: out, call: call, return_: ret}
	}
	tests := []struct {
		name string
		ops  []h
		want porcupine.CheckResult
	}{
		{"sequential write, read, cas, read", []h{
			r("", 0, 5), w("a", outcomeOK, 10, 20), r("a", 30, 40), cas("a", "b", outcomeOK, 50, 60), r("b", 70, 80),
		}, porcupine.Ok},
		{"stale read", []h{w("a", outcomeOK, 0, 10), w("b", outcomeOK, 20, 30), r("a", 40, 50)}, porcupine.Illegal},
		{"read concurrent with a write sees either", []h{
			w("a", outcomeOK, 0, 10), w("b", outcomeOK, 20, 60), r("a", 30, 40), r("b", 35, 45),
		}, porcupine.Ok},
		{"a read cannot go back", []h{
			w("a", outcomeOK, 0, 10), w("b", outcomeOK, 20, 60), r("b", 30, 40), r("a", 45, 50),
		}, porcupine.Illegal},
		{"value from nowhere", []h{w("a", outcomeOK, 0, 10), r("zz", 20, 30)}, porcupine.Illegal},
		{"unknown write never seen: final read keeps the last acknowledged", []h{
			w("a", outcomeOK, 0, 10), w("b", outcomeUnknown, 20, 30), r("a", 100, 110),
		}, porcupine.Ok},
		{"unknown write seen long after it gave up", []h{
			w("a", outcomeOK, 0, 10), w("b", outcomeUnknown, 20, 30), r("a", 40, 50), r("b", 100, 110),
		}, porcupine.Ok},
		{"unknown write seen, then undone", []h{
			w("a", outcomeOK, 0, 10), w("b", outcomeUnknown, 20, 30), r("b", 40, 50), r("a", 60, 70),
		}, porcupine.Illegal},
		{"refused write is checked as unknown", []h{
			w("a", outcomeOK, 0, 10), w("b", outcomeRefused, 20, 30), r("b", 40, 50),
		}, porcupine.Ok},
		{"a write that was never sent has no effect", []h{
			w("a", outcomeOK, 0, 10), w("b", outcomeNotSent, 20, 30), r("b", 40, 50),
		}, porcupine.Illegal},
		{"failed reads are dropped", []h{
			w("a", outcomeOK, 0, 10), {kind: opRead, value: "zz", out: outcomeError, call: 20, return_: 30}, r("a", 40, 50),
		}, porcupine.Ok},
		{"cas fails on another value", []h{w("a", outcomeOK, 0, 10), cas("x", "c", outcomeFailed, 20, 30), r("a", 40, 50)}, porcupine.Ok},
		{"cas cannot fail on the expected value", []h{w("a", outcomeOK, 0, 10), cas("a", "c", outcomeFailed, 20, 30)}, porcupine.Illegal},
		{"cas cannot succeed on another value", []h{w("a", outcomeOK, 0, 10), cas("x", "c", outcomeOK, 20, 30)}, porcupine.Illegal},
		{"cas on an absent key", []h{cas("", "c", outcomeOK, 0, 10), r("c", 20, 30)}, porcupine.Ok},
		{"unknown cas applied", []h{w("a", outcomeOK, 0, 10), cas("a", "b", outcomeUnknown, 20, 30), r("b", 40, 50)}, porcupine.Ok},
		{"unknown cas not applied", []h{w("a", outcomeOK, 0, 10), cas("a", "b", outcomeUnknown, 20, 30), r("a", 100, 110)}, porcupine.Ok},
		{"unknown cas cannot apply on another value", []h{
			w("a", outcomeOK, 0, 10), cas("x", "b", outcomeUnknown, 20, 30), r("b", 40, 50),
		}, porcupine.Illegal},
		{"keys are independent", []h{
			w("a", outcomeOK, 0, 10), {kind: opRead, key: "k1", out: outcomeOK, call: 20, return_: 30}, r("a", 20, 30),
		}, porcupine.Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := porcupine.CheckOperations(registerModel, porcupineOps(build(tt.ops...)))
			if want := tt.want == porcupine.Ok; got != want {
				t.Fatalf("linearizable = %v, want %s", got, tt.want)
			}
		})
	}
}

func TestPorcupineOpsUnknownReturnsLast(t *testing.T) {
	ops := porcupineOps(build(
		h{kind: opWrite, value: "a", out: outcomeUnknown, call: 5, return_: 6},
		h{kind: opRead, value: "a", out: outcomeOK, call: 100, return_: 200},
		h{kind: opWrite, value: "b", out: outcomeNotSent, call: 7, return_: 8},
	))
	if len(ops) != 2 || ops[0].Return <= 200 || !ops[0].Output.(regOutput).Unknown || ops[1].Return != 200 {
		t.Fatalf("ops = %+v", ops)
	}
}

func TestDoubleAppliesAndFalseFailures(t *testing.T) {
	ops := build(
		h{kind: opWrite, value: "a", out: outcomeUnknown, call: 0, return_: 10},
		h{kind: opRead, value: "a", out: outcomeOK, index: 5, call: 20, return_: 30},
		h{kind: opRead, value: "a", out: outcomeOK, index: 9, call: 40, return_: 50},
		h{kind: opRead, value: "a", out: outcomeOK, index: 9, call: 60, return_: 70},
		h{kind: opWrite, value: "b", out: outcomeRefused, call: 80, return_: 90},
		h{kind: opWrite, value: "c", out: outcomeRefused, call: 80, return_: 90},
		h{kind: opRead, value: "b", out: outcomeOK, index: 12, call: 100, return_: 110},
		h{kind: opRead, value: "c", out: outcomeError, call: 100, return_: 110},
	)
	da := doubleApplies(ops)
	if len(da) != 1 || da[0] != "value a applied twice: indexes 5 and 9" {
		t.Errorf("doubleApplies = %q", da)
	}
	ff := readDespite(ops, outcomeRefused)
	if len(ff) != 1 || !strings.HasPrefix(ff[0], "write k0 := b: refused") || !strings.Contains(ff[0], "then read: read k0 = b @12") {
		t.Errorf("falseFailures = %q", ff)
	}
	r, _ := checkHistory(ops, 0)
	if r.Result != porcupine.Ok || len(r.failures()) != 2 || r.Counts["read ok"] != 4 {
		t.Errorf("report %+v, failures %q", r, r.failures())
	}
}

func TestStaleReadsAndFalseCASFailures(t *testing.T) {
	ops := build(
		h{kind: opRead, value: "", out: outcomeOK, call: 0, return_: 5},          // fresh: nothing written yet
		h{kind: opWrite, value: "a", out: outcomeOK, call: 10, return_: 20},      // acknowledged
		h{kind: opRead, value: "", out: outcomeOK, call: 15, return_: 25},        // concurrent with a: fine
		h{kind: opRead, value: "", out: outcomeOK, call: 30, return_: 35},        // absent after a: stale
		h{kind: opWrite, value: "b", out: outcomeOK, call: 40, return_: 50},      // replaces a
		h{kind: opWrite, value: "u", out: outcomeUnknown, call: 41, return_: 42}, // may land late
		h{kind: opRead, value: "a", out: outcomeOK, call: 60, return_: 70},       // stale
		h{kind: opRead, value: "u", out: outcomeOK, call: 60, return_: 70},       // fine: u landed late
		h{kind: opCAS, expect: "b", value: "c", out: outcomeFailed, call: 80, return_: 90},
		h{kind: opRead, value: "c", out: outcomeOK, call: 95, return_: 99}, // the false CAS was applied
	)
	for i := range ops {
		ops[i].Mode = "consistent"
	}
	ops[6].Phase = phaseRestart + " consistent"
	counts, examples := staleReads(ops)
	if counts["workload consistent"] != 1 || counts[phaseRestart+" consistent"] != 1 || len(counts) != 2 || len(examples) != 2 {
		t.Errorf("staleReads = %v, %q", counts, examples)
	}
	if f := readDespite(ops, outcomeFailed); len(f) != 1 || !strings.HasPrefix(f[0], "cas k0 b -> c") {
		t.Errorf("readDespite(failed) = %q", f)
	}
}

func TestClassifyPut(t *testing.T) {
	refused := &url.Error{Op: "Put", URL: "http://127.0.0.1:1/v1/kv/k", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	reset := &url.Error{Op: "Put", URL: "http://127.0.0.1:1/v1/kv/k", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
	res := func(status int, body string) response { return response{Status: status, Body: []byte(body)} }
	tests := []struct {
		name  string
		kind  opKind
		r     response
		err   error
		want  outcome
		proto bool
	}{
		{"connection refused", opWrite, response{}, refused, outcomeNotSent, false},
		{"connection reset", opWrite, response{}, reset, outcomeUnknown, false},
		{"timeout", opCAS, response{}, context.DeadlineExceeded, outcomeUnknown, false},
		{"acknowledged", opWrite, res(200, "true\n"), nil, outcomeOK, false},
		{"cas refused", opCAS, res(200, "false"), nil, outcomeFailed, false},
		{"write answered false", opWrite, res(200, "false"), nil, outcomeUnknown, true},
		{"no cluster leader", opWrite, res(500, "No cluster leader: raft: leadership lost"), nil, outcomeRefused, false},
		{"leadership lost", opCAS, res(500, "leadership lost while committing log"), nil, outcomeUnknown, false},
		{"bad request", opWrite, res(400, "bad"), nil, outcomeUnknown, true},
	}
	for _, tt := range tests {
		out, _, _, perr := classifyPut(tt.kind, tt.r, tt.err)
		if out != tt.want || (perr != nil) != tt.proto || (perr != nil && !errors.Is(perr, errProtocol)) {
			t.Errorf("%s: outcome %s, protocol error %v; want %s, %v", tt.name, out, perr, tt.want, tt.proto)
		}
	}
}

func TestClassifyRead(t *testing.T) {
	res := func(status int, body string) response { return response{Status: status, Body: []byte(body)} }
	v, idx, out, _, _, perr := classifyRead("k", res(200, `[{"Key":"k","Value":"YQ==","ModifyIndex":7}]`), nil)
	if v != "a" || idx != 7 || out != outcomeOK || perr != nil {
		t.Errorf("200: %q %d %s %v", v, idx, out, perr)
	}
	if v, _, out, _, _, perr := classifyRead("k", res(404, ""), nil); v != "" || out != outcomeOK || perr != nil {
		t.Errorf("404: %q %s %v", v, out, perr)
	}
	if _, _, out, _, _, perr := classifyRead("k", res(500, "No cluster leader"), nil); out != outcomeError || perr != nil {
		t.Errorf("500: %s %v", out, perr)
	}
	if _, _, out, _, _, perr := classifyRead("k", res(200, `[{"Key":"other","Value":"YQ=="}]`), nil); out != outcomeError || !errors.Is(perr, errProtocol) {
		t.Errorf("wrong key: %s %v", out, perr)
	}
	if _, _, out, _, _, _ := classifyRead("k", response{}, context.DeadlineExceeded); out != outcomeError {
		t.Errorf("timeout: %s", out)
	}
}

func TestDisagreement(t *testing.T) {
	same := []jepsenOp{{Server: "s0", Value: "a", Index: 3}, {Server: "s1", Value: "a", Index: 3}}
	if d := disagreement("k0", same); d != "" {
		t.Errorf("agreeing reads: %q", d)
	}
	diff := append(same, jepsenOp{Server: "s2", Mode: "stale", Index: 0})
	if d := disagreement("k0", diff); !strings.Contains(d, "<absent>@0 from s2 (stale)") || !strings.Contains(d, "a@3 from s0") {
		t.Errorf("disagreement = %q", d)
	}
}

func TestJepsenArtifacts(t *testing.T) {
	ops := build(h{kind: opWrite, value: "a", out: outcomeOK, call: 0, return_: 10}, h{kind: opRead, value: "b", out: outcomeOK, call: 20, return_: 30})
	r, info := checkHistory(ops, 0)
	if r.Result != porcupine.Illegal || len(r.Violations) != 1 ||
		!strings.Contains(r.Violations[0], "key k0: 1 of 2 operations linearize, then the value is a and this cannot: read k0 = b") {
		t.Fatalf("result %s, violations %q", r.Result, r.Violations)
	}
	faults := []faultEvent{{Nemesis: "kill-leader", Fault: faultKill, Target: "server-0", Start: 5, End: 25}}
	dir := t.TempDir()
	files, err := jepsenArtifacts(dir, "run", ops, faults, r, info, true)
	if err != nil || len(files) != 3 {
		t.Fatalf("files %v, err %v", files, err)
	}
	hist, err := os.ReadFile(filepath.Join(dir, "run-history.jsonl"))
	if err != nil || strings.Count(string(hist), "\n") != 2 || !strings.Contains(string(hist), `"kind":"read"`) {
		t.Errorf("history %q, %v", hist, err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "run-linearizability.html"))
	if err != nil || !strings.Contains(string(html), "kill server-0") {
		t.Errorf("visualization lacks the fault annotation (err %v)", err)
	}
	if !isNoLeader(http.StatusInternalServerError, "No cluster leader") || isNoLeader(200, "No cluster leader") {
		t.Error("isNoLeader")
	}
}

func TestKeySpace(t *testing.T) {
	k := keySpace{start: time.Now(), epoch: 10 * time.Second, n: 5}
	if got := k.all(30 * time.Second); len(got) != 15 || got[0] != "jepsen/e00/k0" || got[14] != "jepsen/e02/k4" {
		t.Errorf("all(30s) = %q", got)
	}
	if got := k.all(31 * time.Second); len(got) != 20 {
		t.Errorf("all(31s) has %d keys, want 20", len(got))
	}
	if got := k.pick(newRand(1)); !strings.HasPrefix(got, "jepsen/e00/k") {
		t.Errorf("pick at the start = %q", got)
	}
}
