package httpapi

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestSessionCreate(t *testing.T) {
	put := http.MethodPut
	// created checks the one Session.Apply call against want (whose ID is
	// ignored: it is random) and that the answer carries the ID sent.
	created := func(want structs.Session, w structs.WriteRequest) func(*testing.T, *httptest.ResponseRecorder, []rpcCall) {
		return func(t *testing.T, rec *httptest.ResponseRecorder, calls []rpcCall) {
			if len(calls) != 1 || calls[0].Method != structs.MethodSessionApply.Name() {
				t.Fatalf("calls = %s", dump(calls))
			}
			got := calls[0].Args.(structs.SessionRequest)
			if !uuidRE.MatchString(got.Session.ID) {
				t.Errorf("session ID %q is not a v4 UUID", got.Session.ID)
			}
			if rec.Body.String() != `{"ID":"`+got.Session.ID+`"}` {
				t.Errorf("body = %s, want the generated ID %s", rec.Body.String(), got.Session.ID)
			}
			want.ID = got.Session.ID
			wantReq := structs.SessionRequest{Op: structs.SessionCreate, Session: want, WriteRequest: w}
			if dump(got) != dump(wantReq) {
				t.Errorf("args:\n got %s\nwant %s", dump(got), dump(wantReq))
			}
		}
	}
	defaults := func(mut func(*structs.Session)) structs.Session {
		s := structs.Session{Node: testNode, LockDelay: 15 * time.Second, Behavior: structs.SessionKeysRelease, NodeChecks: []string{"serfHealth"}}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	echoID := func(f *fakeRPC, _ *Config) {
		f.fn = func(_ string, args, reply any) error {
			*reply.(*string) = args.(*structs.SessionRequest).Session.ID
			return nil
		}
	}
	ok := func(name, body string, want structs.Session) apiCase {
		return apiCase{name: name, method: put, path: "/v1/session/create", body: body, setup: echoID,
			wantCode: 200, anyCalls: true, skipBody: true, check: created(want, wr())}
	}
	cases := []apiCase{
		ok("no body takes every default", "", defaults(nil)),
		ok("string lock delay in ms, as the Go client sends it", `{"Name":"lock","LockDelay":"15000ms","TTL":"30s","Behavior":"delete"}`,
			defaults(func(s *structs.Session) { s.Name, s.TTL, s.Behavior = "lock", "30s", structs.SessionKeysDelete })),
		ok("small number means seconds", `{"lockdelay":20}`, defaults(func(s *structs.Session) { s.LockDelay = 20 * time.Second })),
		ok("large number is nanoseconds", `{"LockDelay":2000000000}`, defaults(func(s *structs.Session) { s.LockDelay = 2 * time.Second })),
		ok("short string also scaled to seconds", `{"LockDelay":"500ns"}`, defaults(func(s *structs.Session) { s.LockDelay = 500 * time.Second })),
		ok("null lock delay keeps the default", `{"LockDelay":null}`, defaults(nil)),
		ok("lock delay of another type is zero", `{"LockDelay":true}`, defaults(func(s *structs.Session) { s.LockDelay = 0 })),
		ok("empty NodeChecks means no checks", `{"NodeChecks":[]}`, defaults(func(s *structs.Session) { s.NodeChecks = []string{} })),
		ok("empty legacy Checks means no checks", `{"Checks":[]}`, defaults(func(s *structs.Session) { s.NodeChecks = []string{} })),
		ok("legacy Checks add to serfHealth", `{"Checks":["disk"]}`, defaults(func(s *structs.Session) { s.NodeChecks = []string{"serfHealth", "disk"} })),
		ok("legacy Checks with empty NodeChecks are dropped", `{"Checks":["disk"],"NodeChecks":[]}`, defaults(func(s *structs.Session) { s.NodeChecks = []string{} })),
		ok("service checks keep serfHealth", `{"ServiceChecks":[{"ID":"svc:web"}]}`,
			defaults(func(s *structs.Session) { s.ServiceChecks = []structs.ServiceCheck{{ID: "svc:web"}} })),
		ok("other node, zero TTL", `{"Node":"n2","TTL":"0s"}`, defaults(func(s *structs.Session) { s.Node, s.TTL = "n2", "0s" })),
		{
			name: "TTL below the minimum", method: put, path: "/v1/session/create", body: `{"TTL":"5s"}`,
			wantCode: 500, wantBody: "Invalid Session TTL '5000000000', must be between [10s=24h0m0s]",
		},
		{
			name: "TTL above the maximum", method: put, path: "/v1/session/create", body: `{"TTL":"25h"}`,
			wantCode: 500, wantBody: "Invalid Session TTL '90000000000000', must be between [10s=24h0m0s]",
		},
		{
			name: "configured minimum", method: put, path: "/v1/session/create", body: `{"TTL":"5s"}`,
			setup:    func(f *fakeRPC, c *Config) { echoID(f, c); c.SessionTTLMin = time.Second },
			wantCode: 200, anyCalls: true, skipBody: true, check: created(defaults(func(s *structs.Session) { s.TTL = "5s" }), wr()),
		},
		{
			name: "unparseable TTL", method: put, path: "/v1/session/create", body: `{"TTL":"soon"}`,
			wantCode: 500, wantBody: `Session TTL 'soon' invalid: time: invalid duration "soon"`,
		},
		{name: "bad behavior", method: put, path: "/v1/session/create", body: `{"Behavior":"explode"}`, wantCode: 500, wantBody: "Invalid Behavior setting 'explode'"},
		{name: "empty node", method: put, path: "/v1/session/create", body: `{"Node":""}`, wantCode: 500, wantBody: "Must provide Node"},
		{
			name: "wrong type", method: put, path: "/v1/session/create", body: `{"TTL":15}`,
			wantCode: 400, wantBody: "Request decode failed: json: cannot unmarshal number into Go struct field sessionCreateJSON.TTL of type string",
		},
		{name: "bad lock delay", method: put, path: "/v1/session/create", body: `{"LockDelay":"soon"}`, wantCode: 400, wantBody: `Request decode failed: time: invalid duration "soon"`},
		{name: "malformed", method: put, path: "/v1/session/create", body: `{`, wantCode: 400, wantBody: "Request decode failed: unexpected EOF"},
		{
			name: "datacenter and token", method: put, path: "/v1/session/create?dc=dc2", headers: map[string]string{"X-Consul-Token": "t"},
			setup: echoID, wantCode: 200, anyCalls: true, skipBody: true,
			check: created(defaults(nil), structs.WriteRequest{Datacenter: "dc2", Token: "t"}),
		},
	}
	runCases(t, cases)
}

func TestSessionOtherEndpoints(t *testing.T) {
	sess := &structs.Session{ID: "s1", Name: "lock", Node: "n1", LockDelay: 15 * time.Second, Behavior: "release", TTL: "30s",
		NodeChecks: []string{"serfHealth"}, RaftIndex: structs.RaftIndex{CreateIndex: 4, ModifyIndex: 4}}
	sessJSON := `{"ID":"s1","Name":"lock","Node":"n1","LockDelay":15000000000,"Behavior":"release","TTL":"30s","NodeChecks":["serfHealth"],"ServiceChecks":null,"CreateIndex":4,"ModifyIndex":4}`
	one := structs.IndexedSessions{Sessions: structs.Sessions{sess}, QueryMeta: meta(4)}
	specific := func(method, id string, q structs.QueryOptions) []rpcCall {
		return []rpcCall{{method, structs.SessionSpecificRequest{SessionID: id, QueryOptions: q}}}
	}
	runCases(t, []apiCase{
		{
			name: "destroy", method: http.MethodPut, path: "/v1/session/destroy/s1",
			wantCode: 200, wantBody: "true",
			wantCalls: []rpcCall{{structs.MethodSessionApply.Name(), structs.SessionRequest{Op: structs.SessionDestroy, Session: structs.Session{ID: "s1"}, WriteRequest: wr()}}},
		},
		{name: "destroy without ID", method: http.MethodPut, path: "/v1/session/destroy/", wantCode: 400, wantBody: "Missing session"},
		{
			name: "renew", method: http.MethodPut, path: "/v1/session/renew/s1",
			setup:    func(f *fakeRPC, _ *Config) { f.replies[structs.MethodSessionRenew.Name()] = one },
			wantCode: 200, wantJSON: true, wantBody: "[" + sessJSON + "]",
			wantCalls: specific(structs.MethodSessionRenew.Name(), "s1", qo()),
		},
		{
			name: "renew a missing session is 404", method: http.MethodPut, path: "/v1/session/renew/gone",
			wantCode: 404, wantBody: "Session id 'gone' not found",
			wantCalls: specific(structs.MethodSessionRenew.Name(), "gone", qo()),
		},
		{
			name: "info", path: "/v1/session/info/s1?index=3&wait=10s",
			setup:    func(f *fakeRPC, _ *Config) { f.replies[structs.MethodSessionGet.Name()] = one },
			wantCode: 200, wantJSON: true, wantBody: "[" + sessJSON + "]", wantHeaders: readHeaders("4"),
			wantCalls: specific(structs.MethodSessionGet.Name(), "s1", structs.QueryOptions{Datacenter: testDC, MinQueryIndex: 3, MaxQueryTime: 10 * time.Second}),
		},
		{
			name: "info of a missing session is []", path: "/v1/session/info/gone",
			wantCode: 200, wantBody: "[]", wantHeaders: map[string]string{"X-Consul-Index": "1"},
			wantCalls: specific(structs.MethodSessionGet.Name(), "gone", qo()),
		},
		{name: "info without ID", path: "/v1/session/info/", wantCode: 400, wantBody: "Missing session"},
		{
			name: "node sessions", path: "/v1/session/node/n1",
			setup:    func(f *fakeRPC, _ *Config) { f.replies[structs.MethodSessionNodeSessions.Name()] = one },
			wantCode: 200, wantJSON: true, wantBody: "[" + sessJSON + "]",
			wantCalls: []rpcCall{{structs.MethodSessionNodeSessions.Name(), structs.NodeSpecificRequest{Node: "n1", QueryOptions: qo()}}},
		},
		{name: "node sessions without node", path: "/v1/session/node/", wantCode: 400, wantBody: "Missing node name"},
		{
			name: "list of nothing is []", path: "/v1/session/list",
			wantCode: 200, wantBody: "[]",
			wantCalls: []rpcCall{{structs.MethodSessionList.Name(), structs.DCSpecificRequest{QueryOptions: qo()}}},
		},
	})
}
