package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// maxJSONBody bounds a JSON request body (Consul has no bound; this one only
// keeps a hostile client from filling the agent's memory).
const maxJSONBody = 64 << 20

// errBodyTooLarge reports a body over its limit.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads the whole body, failing with errBodyTooLarge past limit
// bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if int64(len(buf)) > limit {
		return nil, errBodyTooLarge
	}
	return buf, nil
}

// decodeJSON decodes the first JSON value of body into out, as Consul's
// decoder does (trailing data is ignored). Field names match in any case;
// unknown fields are ignored; a known field of the wrong type is an error.
func decodeJSON(body []byte, out any) error {
	return json.NewDecoder(bytes.NewReader(body)).Decode(out)
}

// decodeRequest reads and decodes a JSON write body, turning any failure
// into Consul's 400 "Request decode failed: ...".
func decodeRequest(r *http.Request, out any) error {
	body, err := readBody(r, maxJSONBody)
	if errors.Is(err, errBodyTooLarge) {
		return tooLarge(fmt.Sprintf("Request body too large, max size: %d bytes", maxJSONBody))
	}
	if err == nil {
		err = decodeJSON(body, out)
	}
	if err != nil {
		return badRequest(fmt.Sprintf("Request decode failed: %v", err))
	}
	return nil
}

// marshalJSON encodes a reply as Consul does: compact, or with ?pretty
// indented by four spaces with a trailing newline.
func marshalJSON(obj any, pretty bool) ([]byte, error) {
	if !pretty {
		return json.Marshal(obj)
	}
	buf, err := json.MarshalIndent(obj, "", "    ")
	if err != nil {
		return nil, err
	}
	return append(buf, '\n'), nil
}

// decodeRegister decodes a /v1/catalog/register body.
func decodeRegister(body []byte) (*structs.RegisterRequest, error) {
	var args structs.RegisterRequest
	if err := decodeJSON(body, &args); err != nil {
		return nil, err
	}
	return &args, nil
}

// txnOpJSON is one operation of a /v1/txn body in Consul's API format
// (api.TxnOp). Consul's API has no session operations: a "Session" member
// is ignored, as Consul ignores it.
type txnOpJSON struct {
	KV      *txnKVOpJSON
	Node    *structs.TxnNodeOp
	Service *structs.TxnServiceOp
	Check   *structs.TxnCheckOp
}

// txnKVOpJSON is a KV operation in API format: the value is base64 and the
// index to compare against is called Index.
type txnKVOpJSON struct {
	Verb      structs.KVOp
	Key       string
	Value     []byte
	Flags     uint64
	Index     uint64
	Session   string
	Namespace string
	Partition string
}

// decodeTxnBody decodes a /v1/txn body in Consul's API format (a JSON
// list of operations); convertTxnOps turns it into the RPC form.
func decodeTxnBody(body []byte) ([]*txnOpJSON, error) {
	var in []*txnOpJSON
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	return in, nil
}

// sessionCreateJSON is a /v1/session/create body. Checks is the legacy
// (pre-1.7) spelling of NodeChecks. LockDelay is decoded by hand because
// Consul accepts a duration string or a number there (see lockDelay).
type sessionCreateJSON struct {
	Name          string
	Node          string
	LockDelay     any
	Behavior      structs.SessionBehavior
	TTL           string
	NodeChecks    []string
	ServiceChecks []structs.ServiceCheck
	Checks        []string
}

// lockDelayMinThreshold is Consul's: a lock delay below 1000 (nanoseconds)
// is taken to mean seconds, because users write "LockDelay": 15.
const lockDelayMinThreshold = 1000

// defaultLockDelay is the lock delay of a session that names none.
const defaultLockDelay = 15 * time.Second

// decodeSessionCreate decodes a session create body over Consul's defaults
// (this agent's node, the serfHealth check, release, 15s lock delay) and
// applies Consul's check defaulting. An empty body keeps every default.
func decodeSessionCreate(body []byte, node string) (structs.Session, error) {
	in := sessionCreateJSON{
		Node:       node,
		NodeChecks: []string{structs.SerfCheckID},
		Checks:     []string{structs.SerfCheckID},
		Behavior:   structs.SessionKeysRelease,
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeJSON(body, &in); err != nil {
			return structs.Session{}, err
		}
	}
	delay := defaultLockDelay
	if in.LockDelay != nil {
		d, err := lockDelay(in.LockDelay)
		if err != nil {
			return structs.Session{}, err
		}
		delay = d
	}
	fixupSessionChecks(&in)
	return structs.Session{
		Name:          in.Name,
		Node:          in.Node,
		LockDelay:     delay,
		Behavior:      in.Behavior,
		TTL:           in.TTL,
		NodeChecks:    mergeChecks(in.NodeChecks, in.Checks),
		ServiceChecks: in.ServiceChecks,
	}, nil
}

// lockDelay converts a LockDelay value as Consul does: a string is a Go
// duration, a number is nanoseconds, and either below 1000ns is scaled to
// seconds. Any other JSON type yields 0, as in Consul.
func lockDelay(v any) (time.Duration, error) {
	var d time.Duration
	switch v := v.(type) {
	case string:
		parsed, err := time.ParseDuration(v)
		if err != nil {
			return 0, err
		}
		d = parsed
	case float64:
		d = time.Duration(v)
	}
	if d < lockDelayMinThreshold {
		d *= time.Second
	}
	return d, nil
}

// fixupSessionChecks is Consul's fixupEmptySessionChecks: the legacy Checks
// field and NodeChecks both default to serfHealth; an explicit empty list in
// either one means "no node checks".
func fixupSessionChecks(in *sessionCreateJSON) {
	switch {
	case len(in.Checks) == 0:
		in.NodeChecks = []string{}
	case len(in.Checks) == 1 && in.Checks[0] == structs.SerfCheckID:
		in.Checks = nil
	case len(in.NodeChecks) == 0:
		in.Checks = nil
	}
}

// mergeChecks folds the legacy Checks into NodeChecks (structs.Session has
// no legacy field; Consul's servers also treat both as one list), keeping
// order and dropping duplicates. The result is never nil.
func mergeChecks(nodeChecks, legacy []string) []string {
	out := make([]string, 0, len(nodeChecks)+len(legacy))
	seen := make(map[string]bool, cap(out))
	for _, list := range [][]string{nodeChecks, legacy} {
		for _, id := range list {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}
