package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// fuzzRequest sends body to path through a fresh Server and returns the
// response, the RPCs made and any recovered panics. The URL is built
// field by field because fuzzed keys and queries need not parse.
func fuzzRequest(t *testing.T, method, path, rawQuery string, body []byte, setup func(*fakeRPC, *Config)) (*httptest.ResponseRecorder, []rpcCall) {
	t.Helper()
	s, f, pl := newTestServer(t, setup)
	req := httptest.NewRequest(method, "/", bytes.NewReader(body))
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = path, "", rawQuery
	req.RequestURI = req.URL.RequestURI()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if p := pl.count(); len(p) > 0 {
		t.Fatalf("panic serving %s %q: %v", method, path, p)
	}
	return rec, f.recorded()
}

// mustNotReachBackend fails when a body that does not decode produced an
// RPC or anything but Consul's 400.
func mustNotReachBackend(t *testing.T, rec *httptest.ResponseRecorder, calls []rpcCall, prefix string) {
	t.Helper()
	if len(calls) != 0 {
		t.Fatalf("undecodable body reached the backend: %s", dump(calls))
	}
	if rec.Code != http.StatusBadRequest || !strings.HasPrefix(rec.Body.String(), prefix) {
		t.Fatalf("undecodable body answered %d %q, want 400 %q...", rec.Code, rec.Body.String(), prefix)
	}
}

func FuzzCatalogRegister(f *testing.F) {
	for _, seed := range []string{
		`{"Node":"n","Address":"10.0.0.1"}`,
		`{"node":"n","address":"a","Service":{"Service":"web","Tags":["a"],"Port":80,"Weights":{"Passing":1}},"Check":{"Status":"passing","Definition":{"Interval":"10s"}}}`,
		`{"Node":"n","SkipNodeUpdate":true,"Checks":[{"CheckID":"c","Status":"critical","Definition":{"TTL":15000000000}}]}`,
		`{"Node":"n","Address":"a","ID":"8f246b77-f3e1-ff88-5b48-8ec93abf3e05","TaggedAddresses":{"lan":"x"},"NodeMeta":{"k":"v"}}`,
		`{"Node":5}`, `[]`, `{"Service":null}`, `{`, ``, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, decodeErr := decodeRegister(body)
		rec, calls := fuzzRequest(t, http.MethodPut, "/v1/catalog/register", "", body, nil)
		if decodeErr != nil {
			mustNotReachBackend(t, rec, calls, "Request decode failed: ")
			return
		}
		switch {
		case rec.Code == http.StatusOK:
			if len(calls) != 1 || calls[0].Args.(structs.RegisterRequest).Node == "" {
				t.Fatalf("200 with calls %s", dump(calls))
			}
		case len(calls) != 0:
			t.Fatalf("refused (%d %q) but reached the backend", rec.Code, rec.Body.String())
		}
	})
}

func FuzzTxn(f *testing.F) {
	for _, seed := range []string{
		`[{"KV":{"Verb":"set","Key":"k","Value":"aGk=","Flags":0,"Index":0,"Session":""}}]`,
		`[{"KV":{"Verb":"get","Key":"k"}},{"KV":{"Verb":"check-index","Key":"k","Index":4}}]`,
		`[{"kv":{"verb":"lock","key":"k","session":"s"}},{}]`,
		`[{"KV":{"Verb":"set","Key":"/abs"}}]`, `[{"Node":{"Verb":"set"}}]`,
		`[{"Service":{"Verb":"get","Node":"n","Service":{"ID":"s"}}},{"Check":{"Verb":"cas","Check":{"Node":"n","Definition":{"Interval":"10s"}}}}]`,
		`[{"KV":{"Value":"!"}}]`, `{}`, `[null]`, `[`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, decodeErr := decodeTxnBody(body)
		rec, calls := fuzzRequest(t, http.MethodPut, "/v1/txn", "", body, nil)
		if decodeErr != nil && len(body) <= txnMaxReqLen {
			mustNotReachBackend(t, rec, calls, "Failed to parse body: ")
			return
		}
		if len(in) > maxTxnOps && len(calls) != 0 {
			t.Fatalf("%d ops reached the backend", len(in))
		}
		for _, c := range calls {
			var ops structs.TxnOps
			switch a := c.Args.(type) {
			case structs.TxnRequest:
				ops = a.Ops
			case structs.TxnReadRequest:
				ops = a.Ops
				for _, op := range ops {
					if op.IsWrite() {
						t.Fatalf("write verb %q sent to Txn.Read", op.Verb())
					}
				}
			default:
				t.Fatalf("unexpected call %s", dump(c))
			}
			for _, op := range ops {
				if op.IsEmpty() || (op.KV != nil && strings.HasPrefix(op.KV.DirEnt.Key, "/")) {
					t.Fatalf("bad op reached the backend: %s", dump(op))
				}
			}
		}
	})
}

func FuzzSessionCreate(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"Name":"lock","LockDelay":"15000ms","TTL":"30s","Behavior":"delete"}`,
		`{"LockDelay":15,"NodeChecks":[],"ServiceChecks":[{"ID":"svc"}]}`, `{"Checks":["a","serfHealth"]}`,
		`{"TTL":"1s"}`, `{"TTL":"-5s"}`, `{"Behavior":"x"}`, `{"LockDelay":[1]}`, `{"LockDelay":1e300}`,
		`{"TTL":15}`, `[`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, decodeErr := decodeSessionCreate(body, testNode)
		rec, calls := fuzzRequest(t, http.MethodPut, "/v1/session/create", "", body, nil)
		if decodeErr != nil {
			mustNotReachBackend(t, rec, calls, "Request decode failed: ")
			return
		}
		if len(calls) == 0 {
			if rec.Code == http.StatusOK {
				t.Fatal("200 without a backend call")
			}
			return
		}
		sess := calls[0].Args.(structs.SessionRequest).Session
		if !uuidRE.MatchString(sess.ID) || sess.Node == "" || sess.NodeChecks == nil {
			t.Fatalf("bad session reached the backend: %s", dump(sess))
		}
		if sess.Behavior != structs.SessionKeysRelease && sess.Behavior != structs.SessionKeysDelete {
			t.Fatalf("behavior %q reached the backend", sess.Behavior)
		}
		if sess.TTL != "" {
			ttl, err := time.ParseDuration(sess.TTL)
			if err != nil || (ttl != 0 && (ttl < defaultSessionTTLMin || ttl > sessionTTLMax)) {
				t.Fatalf("TTL %q reached the backend", sess.TTL)
			}
		}
	})
}

func FuzzKVPut(f *testing.F) {
	f.Add("app/config", "", []byte("value"))
	f.Add("k", "cas=5&flags=3", []byte{0, 1, 2})
	f.Add("k", "acquire=s1", []byte(nil))
	f.Add("a b/c", "release=s&cas=1", []byte("x"))
	f.Add("../etc", "", []byte("x"))
	f.Add("k\x00", "", []byte("x"))
	f.Add(" k", "flags=-1", []byte("x"))
	f.Add("k", "a=%zz", []byte("x"))
	f.Fuzz(func(t *testing.T, key, query string, body []byte) {
		rec, calls := fuzzRequest(t, http.MethodPut, "/v1/kv/"+key, query, body, nil)
		if len(body) > kvMaxValueSize && len(calls) != 0 {
			t.Fatalf("%d-byte value reached the backend", len(body))
		}
		if len(calls) == 0 {
			if rec.Code == http.StatusOK {
				t.Fatalf("200 without a backend call")
			}
			return
		}
		if len(calls) != 1 || calls[0].Method != structs.MethodKVSApply.Name() {
			t.Fatalf("calls %s", dump(calls))
		}
		req := calls[0].Args.(structs.KVSRequest)
		if req.DirEnt.Key != key || validateKVKey(key) != nil || !bytes.Equal(req.DirEnt.Value, body) {
			t.Fatalf("key %q value %d bytes reached the backend for key %q body %d bytes", req.DirEnt.Key, len(req.DirEnt.Value), key, len(body))
		}
		if _, err := io.ReadAll(rec.Body); err != nil {
			t.Fatal(err)
		}
	})
}
