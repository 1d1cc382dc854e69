package structs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
)

// DedupWindow is how long the FSM remembers an applied request ID, in the
// time of the leaders that proposed the writes. Every retry of a write must
// be proposed within it of the first attempt; retries are bounded by the
// RPC hold time (seconds), so minutes leave room for slow disks and clock
// differences between successive leaders.
const DedupWindow = 2 * time.Minute

// EnsureRequestID gives a write its request ID if it has none yet and
// returns the ID ("" for anything that is not a write). The first agent to
// handle a write calls it before the first attempt, so that every retry,
// on whichever server, carries the same ID.
func EnsureRequestID(args any) string {
	w, ok := args.(interface{ WriteOpts() *WriteRequest })
	if !ok {
		return ""
	}
	o := w.WriteOpts()
	if o.RequestID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		o.RequestID = hex.EncodeToString(b[:])
	}
	return o.RequestID
}

// DedupRequest is the Raft command that carries one client write with its
// request ID (DedupRequestType). The FSM applies Command, a complete
// encoded command (type byte and body), unless a command with the same ID
// was applied within DedupWindow, in which case it returns that command's
// recorded result instead.
type DedupRequest struct {
	// ID is the write's request ID, with a sequence number for a write
	// whose handler proposes more than one command.
	ID string
	// ProposedAt is the proposing leader's wall clock (Unix nanoseconds).
	// The FSM forgets IDs older than DedupWindow relative to the newest
	// ProposedAt it applied: deterministic on every replica, since the time
	// travels in the log.
	ProposedAt int64
	Command    []byte
}

// AppliedResult is the recorded outcome of a deduplicated command: what
// the FSM's Apply returned, in a form that survives a snapshot. Kind says
// which field holds it.
type AppliedResult struct {
	Kind  ResultKind
	Error string `json:",omitempty"`
	// ErrorName is the name of the sentinel Error wraps, if any, so that
	// a replayed error still satisfies errors.Is (see WireError).
	ErrorName string `json:",omitempty"`
	Bool      bool   `json:",omitempty"`
	String    string `json:",omitempty"`
	Txn       *TxnResponse
	// VirtualIPs is a manual virtual IP assignment's response.
	VirtualIPs *AssignServiceManualVIPsResponse `json:",omitempty"`
}

// ResultKind tags an AppliedResult. Numbers are never reused.
type ResultKind uint8

const (
	ResultNil    ResultKind = 0
	ResultError  ResultKind = 1
	ResultBool   ResultKind = 2
	ResultString ResultKind = 3
	ResultTxn    ResultKind = 4
	// ResultVirtualIPs is an UpdateVirtualIP command's response.
	ResultVirtualIPs ResultKind = 5
)

// ErrResultNotRecordable is what a command whose result has no
// AppliedResult form records: a retry of it learns it was applied, not
// what it returned.
var ErrResultNotRecordable = errors.New("the request was already applied; its result was not recorded")

// RecordResult turns an FSM response into its recordable form.
func RecordResult(resp any) AppliedResult {
	switch v := resp.(type) {
	case nil:
		return AppliedResult{Kind: ResultNil}
	case error:
		r := AppliedResult{Kind: ResultError, Error: v.Error()}
		if e := SentinelOf(v); e != nil {
			r.ErrorName = e.Name()
		}
		return r
	case bool:
		return AppliedResult{Kind: ResultBool, Bool: v}
	case string:
		return AppliedResult{Kind: ResultString, String: v}
	case *TxnResponse:
		// A copy: the caller hands v on to the client's reply, and the
		// record must not change with it.
		return AppliedResult{Kind: ResultTxn, Txn: v.clone()}
	case *AssignServiceManualVIPsResponse:
		c := *v
		c.UnassignedFrom = slices.Clone(v.UnassignedFrom)
		return AppliedResult{Kind: ResultVirtualIPs, VirtualIPs: &c}
	}
	return AppliedResult{Kind: ResultError, Error: fmt.Sprintf("%s (%T)", ErrResultNotRecordable, resp)}
}

// Response gives back what the FSM returned the first time, as its Apply
// returned it: the same types the endpoints expect.
func (r AppliedResult) Response() any {
	switch r.Kind {
	case ResultError:
		return WireError(r.ErrorName, r.Error)
	case ResultBool:
		return r.Bool
	case ResultString:
		return r.String
	case ResultTxn:
		return r.Txn
	case ResultVirtualIPs:
		return r.VirtualIPs
	}
	return nil
}

// clone copies r deeply enough that no result or error is shared.
func (r *TxnResponse) clone() *TxnResponse {
	if r == nil {
		return nil
	}
	out := &TxnResponse{}
	for _, res := range r.Results {
		out.Results = append(out.Results, res.clone())
	}
	for _, e := range r.Errors {
		if e != nil {
			c := *e
			out.Errors = append(out.Errors, &c)
		}
	}
	return out
}

// clone copies one result deeply: every kind of entity it may carry.
func (r *TxnResult) clone() *TxnResult {
	c := &TxnResult{}
	if r == nil {
		return c
	}
	if r.KV != nil {
		c.KV = r.KV.Clone()
	}
	c.Node = r.Node.Clone()
	c.Service = r.Service.Clone()
	c.Check = r.Check.Clone()
	return c
}
