package integration

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/anishathalye/porcupine"
)

// The Jepsen-style linearizability check (issue 12, item 5): clients read,
// write and compare-and-swap a few KV keys through the HTTP API while a
// nemesis kills or pauses servers; every operation is recorded with its
// call and return times, and porcupine decides whether some sequential
// order of them, each taking effect between its call and its return, is
// legal for a register per key. This file holds the history and the model;
// they need no process and are unit-tested on hand-built histories.

// opKind is what a client asked.
type opKind string

const (
	opRead  opKind = "read"
	opWrite opKind = "write"
	opCAS   opKind = "cas"
)

// outcome is what the client learned about an operation's effect.
type outcome string

const (
	// outcomeOK: a write or CAS answered 200 true, or a read answered 200
	// or 404.
	outcomeOK outcome = "ok"
	// outcomeFailed: a CAS answered 200 false; it had no effect.
	outcomeFailed outcome = "failed"
	// outcomeNotSent: the connection was refused, so no request left the
	// client. Such an operation cannot have had an effect and is not
	// checked.
	outcomeNotSent outcome = "not-sent"
	// outcomeRefused: a write answered 5xx "No cluster leader", which
	// promises it was not applied. Porcupine still treats it as unknown,
	// so its verdict is about the data; the promise itself is checked
	// apart, by falseFailures.
	outcomeRefused outcome = "refused"
	// outcomeUnknown: a timeout, a lost connection or any other 5xx: the
	// write may have been applied, at any time until the end.
	outcomeUnknown outcome = "unknown"
	// outcomeError: a read that got no answer or an error; it had no
	// effect and is not checked.
	outcomeError outcome = "error"
)

// jepsenOp is one operation of the history, as written one per line to
// the history file.
type jepsenOp struct {
	// Process identifies the client for porcupine: a client whose
	// operation ended unknown carries on under a new process, because the
	// old one may still be in flight (Jepsen's convention).
	Process int    `json:"process"`
	Client  int    `json:"client"`
	Kind    opKind `json:"kind"`
	Key     string `json:"key"`
	// Server is the node the request went to; Mode the read mode.
	Server string `json:"server"`
	Mode   string `json:"mode,omitempty"`
	// Value is the value written (write, CAS) or read ("" when absent).
	Value string `json:"value,omitempty"`
	// Expect is the value a CAS expects ("" = absent); CASIndex is the
	// ModifyIndex it sent as ?cas=.
	Expect   string `json:"expect,omitempty"`
	CASIndex uint64 `json:"casIndex,omitempty"`
	// Index is the ModifyIndex a read returned with Value.
	Index   uint64  `json:"index,omitempty"`
	Outcome outcome `json:"outcome"`
	// Status and Detail describe a failure (HTTP status, body or error).
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Call and Return are nanoseconds since the run started.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	// Phase is empty for the workload and names the final-read step.
	Phase string `json:"phase,omitempty"`
}

// checked reports whether the operation goes to porcupine: everything but
// requests never sent and reads that failed.
func (o jepsenOp) checked() bool {
	return o.Outcome != outcomeNotSent && o.Outcome != outcomeError
}

// mayHaveApplied reports whether a write or CAS is open until the end of
// the history.
func (o jepsenOp) mayHaveApplied() bool {
	return o.Outcome == outcomeUnknown || o.Outcome == outcomeRefused
}

func (o jepsenOp) String() string {
	s := fmt.Sprintf("%s %s", o.Kind, o.Key)
	switch o.Kind {
	case opRead:
		s += fmt.Sprintf(" = %s", showValue(o.Value))
		if o.Index != 0 {
			s += fmt.Sprintf(" @%d", o.Index)
		}
	case opWrite:
		s += " := " + o.Value
	case opCAS:
		s += fmt.Sprintf(" %s -> %s (cas=%d)", showValue(o.Expect), o.Value, o.CASIndex)
	}
	s += fmt.Sprintf(": %s [client %d, %s", o.Outcome, o.Client, o.Server)
	if o.Mode != "" {
		s += ", " + o.Mode
	}
	if o.Phase != "" {
		s += ", " + o.Phase
	}
	s += fmt.Sprintf(", %.3fs-%.3fs]", float64(o.Call)/1e9, float64(o.Return)/1e9)
	if o.Detail != "" {
		s += " " + o.Detail
	}
	return s
}

func showValue(v string) string {
	if v == "" {
		return "<absent>"
	}
	return v
}

// regInput and regOutput are porcupine's view of an operation on one key,
// whose state is its value ("" while absent). Values are unique, so a value
// stands for the one write that wrote it: a CAS by ModifyIndex is exactly a
// CAS by value, with no ABA.
type regInput struct {
	Kind   opKind
	Key    string
	Value  string // write, CAS: the new value
	Expect string // CAS: the expected value
}

type regOutput struct {
	Value   string // read: what it returned
	OK      bool   // CAS: swapped
	Unknown bool   // write, CAS: may or may not have been applied
}

// registerModel is one register per key, partitioned by key so each key
// is checked on its own.
var registerModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return "" },
	Step:      stepRegister,
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(state.(string)))
		return h.Sum64()
	},
	DescribeOperation: describeRegisterOp,
	DescribeState: func(state any) string {
		return showValue(state.(string))
	},
}

func stepRegister(state, input, output any) (bool, any) {
	cur, in, out := state.(string), input.(regInput), output.(regOutput)
	switch in.Kind {
	case opRead:
		return out.Value == cur, cur
	case opWrite:
		return true, in.Value
	case opCAS:
		// An unknown CAS that was not applied is linearized at the end of
		// the history, where it changes nothing anyone reads; anywhere
		// else it behaves as an answered one.
		if out.Unknown {
			if cur == in.Expect {
				return true, in.Value
			}
			return true, cur
		}
		if out.OK {
			return cur == in.Expect, in.Value
		}
		return cur != in.Expect, cur
	}
	return false, cur
}

func describeRegisterOp(input, output any) string {
	in, out := input.(regInput), output.(regOutput)
	switch in.Kind {
	case opRead:
		return fmt.Sprintf("read() -> %s", showValue(out.Value))
	case opWrite:
		if out.Unknown {
			return fmt.Sprintf("write(%s) -> ?", in.Value)
		}
		return fmt.Sprintf("write(%s)", in.Value)
	default:
		res := fmt.Sprint(out.OK)
		if out.Unknown {
			res = "?"
		}
		return fmt.Sprintf("cas(%s, %s) -> %s", showValue(in.Expect), in.Value, res)
	}
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range history {
		k := op.Input.(regInput).Key
		byKey[k] = append(byKey[k], op)
	}
	var out [][]porcupine.Operation
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out
}

// porcupineOps converts the checked operations. A write or CAS whose
// outcome is unknown returns after everything else, final reads included:
// it may take effect at any point after its call, and taking effect last
// is the same as never.
func porcupineOps(ops []jepsenOp) []porcupine.Operation {
	var end int64
	for _, o := range ops {
		end = max(end, o.Return, o.Call)
	}
	end++
	var out []porcupine.Operation
	for _, o := range ops {
		if !o.checked() {
			continue
		}
		in := regInput{Kind: o.Kind, Key: o.Key, Value: o.Value, Expect: o.Expect}
		var res regOutput
		ret := o.Return
		switch {
		case o.Kind == opRead:
			res.Value = o.Value
		case o.mayHaveApplied():
			res.Unknown = true
			ret = end
		default:
			res.OK = o.Outcome == outcomeOK
		}
		out = append(out, porcupine.Operation{
			ClientId: o.Process,
			Input:    in,
			Call:     o.Call,
			Output:   res,
			Return:   ret,
			Metadata: o.String(),
		})
	}
	return out
}
