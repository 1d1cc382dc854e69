package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cliCase runs one client command against the fake agent and checks the
// exact requests sent and the output.
type cliCase struct {
	name   string
	args   []string
	vars   map[string]string // besides CONSUL_HTTP_ADDR
	stdin  string
	routes map[string]reply
	// want are the requests in order; a want Body starting with "{" or
	// "[" is compared as JSON. nil means "no request at all".
	want       []sentRequest
	code       int
	stdout     string // exact, unless stdoutHas is used
	stdoutHas  []string
	stderrHas  []string
	skipStdout bool
}

func runCases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t, tc.routes)
			vars := map[string]string{"CONSUL_HTTP_ADDR": f.addr()}
			for k, v := range tc.vars {
				vars[k] = strings.ReplaceAll(v, "$ADDR", f.addr())
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "$ADDR", f.addr())
			}
			code, out, errOut := runCLI(args, vars, tc.stdin)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if !tc.skipStdout && len(tc.stdoutHas) == 0 && out != tc.stdout {
				t.Errorf("stdout:\n%q\nwant:\n%q", out, tc.stdout)
			}
			for _, s := range tc.stdoutHas {
				if !strings.Contains(out, s) {
					t.Errorf("stdout %q lacks %q", out, s)
				}
			}
			for _, s := range tc.stderrHas {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr %q lacks %q", errOut, s)
				}
			}
			got := f.requests()
			if len(got) != len(tc.want) {
				t.Fatalf("sent %d requests, want %d:\n%+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Method != w.Method || g.Path != w.Path || g.Query != w.Query || g.Token != w.Token {
					t.Errorf("request %d = %s %s?%s token=%q, want %s %s?%s token=%q",
						i, g.Method, g.Path, g.Query, g.Token, w.Method, w.Path, w.Query, w.Token)
				}
				if w.ContentType != "" && g.ContentType != w.ContentType {
					t.Errorf("request %d Content-Type %q, want %q", i, g.ContentType, w.ContentType)
				}
				switch {
				case strings.HasPrefix(w.Body, "{") || strings.HasPrefix(w.Body, "["):
					if !sameJSON(t, g.Body, w.Body) {
						t.Errorf("request %d body %s, want %s", i, g.Body, w.Body)
					}
				case g.Body != w.Body:
					t.Errorf("request %d body %q, want %q", i, g.Body, w.Body)
				}
			}
		})
	}
}

const fooPair = `[{"LockIndex":0,"Key":"foo","Flags":42,"Value":"YmFy","CreateIndex":5,"ModifyIndex":7}]`

func TestKVGet(t *testing.T) {
	runCases(t, []cliCase{
		{name: "value", args: []string{"kv", "get", "foo"},
			routes: map[string]reply{"GET /v1/kv/foo": {body: fooPair}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/foo"}}, stdout: "bar\n"},
		{name: "leading slash and escaping", args: []string{"kv", "get", "/a b/c"},
			routes: map[string]reply{"GET /v1/kv/a b/c": {body: `[{"Key":"a b/c","Value":"eA=="}]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/a%20b/c"}}, stdout: "x\n"},
		{name: "missing", args: []string{"kv", "get", "nope"},
			want: []sentRequest{{Method: "GET", Path: "/v1/kv/nope"}}, code: 1,
			stderrHas: []string{"Error! No key exists at: nope"}},
		{name: "server error", args: []string{"kv", "get", "foo"},
			routes: map[string]reply{"GET /v1/kv/foo": {status: 500, body: "boom"}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/foo"}}, code: 1,
			stderrHas: []string{"Error querying Consul agent: Unexpected response code: 500 (boom)"}},
		{name: "detailed", args: []string{"kv", "get", "-detailed", "foo"},
			routes: map[string]reply{"GET /v1/kv/foo": {body: fooPair}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/foo"}},
			stdout: "CreateIndex      5\nFlags            42\nKey              foo\nLockIndex        0\nModifyIndex      7\nSession          -\nValue            bar\n"},
		{name: "recurse", args: []string{"kv", "get", "-recurse", "app"},
			routes: map[string]reply{"GET /v1/kv/app": {body: `[{"Key":"app/a","Value":"MQ=="},{"Key":"app/b","Value":null}]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/app", Query: "recurse="}}, stdout: "app/a:1\napp/b:\n"},
		{name: "recurse of nothing", args: []string{"kv", "get", "-recurse", "none"},
			want: []sentRequest{{Method: "GET", Path: "/v1/kv/none", Query: "recurse="}}, stdout: ""},
		{name: "keys", args: []string{"kv", "get", "-keys", "app/"},
			routes: map[string]reply{"GET /v1/kv/app/": {body: `["app/a","app/sub/"]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/app/", Query: "keys=&separator=%2F"}}, stdout: "app/a\napp/sub/\n"},
		{name: "stale dc and token", args: []string{"kv", "get", "-stale", "-datacenter", "dc2", "-token", "flagtok", "foo"},
			vars:   map[string]string{"CONSUL_HTTP_TOKEN": "envtok"},
			routes: map[string]reply{"GET /v1/kv/foo": {body: fooPair}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/foo", Query: "dc=dc2&stale=", Token: "flagtok"}}, stdout: "bar\n"},
		{name: "token from env", args: []string{"kv", "get", "foo"},
			vars:   map[string]string{"CONSUL_HTTP_TOKEN": "envtok"},
			routes: map[string]reply{"GET /v1/kv/foo": {body: fooPair}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/foo", Token: "envtok"}}, stdout: "bar\n"},
		{name: "missing key argument", args: []string{"kv", "get"}, code: 1, stderrHas: []string{"Error! Missing KEY argument"}},
		{name: "too many arguments", args: []string{"kv", "get", "a", "b"}, code: 1, stderrHas: []string{"Too many arguments (expected 1, got 2)"}},
		{name: "-http-addr beats the environment", args: []string{"kv", "get", "-http-addr", "http://$ADDR", "foo"},
			vars:   map[string]string{"CONSUL_HTTP_ADDR": "127.0.0.1:1"},
			routes: map[string]reply{"GET /v1/kv/foo": {body: fooPair}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/foo"}}, stdout: "bar\n"},
	})
}

func TestKVPut(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "v.txt")
	if err := os.WriteFile(file, []byte("from file"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := map[string]reply{"PUT /v1/kv/foo": {body: "true"}}
	runCases(t, []cliCase{
		{name: "value", args: []string{"kv", "put", "foo", "bar"}, routes: ok,
			want:   []sentRequest{{Method: "PUT", Path: "/v1/kv/foo", Body: "bar", ContentType: "application/octet-stream"}},
			stdout: "Success! Data written to: foo\n"},
		{name: "no value", args: []string{"kv", "put", "foo"}, routes: ok,
			want: []sentRequest{{Method: "PUT", Path: "/v1/kv/foo"}}, stdout: "Success! Data written to: foo\n"},
		{name: "flags", args: []string{"kv", "put", "-flags", "42", "foo", "bar"}, routes: ok,
			want: []sentRequest{{Method: "PUT", Path: "/v1/kv/foo", Query: "flags=42", Body: "bar"}}, stdout: "Success! Data written to: foo\n"},
		{name: "stdin", args: []string{"kv", "put", "foo", "-"}, stdin: "piped\n", routes: ok,
			want: []sentRequest{{Method: "PUT", Path: "/v1/kv/foo", Body: "piped\n"}}, stdout: "Success! Data written to: foo\n"},
		{name: "file", args: []string{"kv", "put", "foo", "@" + file}, routes: ok,
			want: []sentRequest{{Method: "PUT", Path: "/v1/kv/foo", Body: "from file"}}, stdout: "Success! Data written to: foo\n"},
		{name: "base64", args: []string{"kv", "put", "-base64", "foo", "aGk="}, routes: ok,
			want: []sentRequest{{Method: "PUT", Path: "/v1/kv/foo", Body: "hi"}}, stdout: "Success! Data written to: foo\n"},
		{name: "cas ok", args: []string{"kv", "put", "-cas", "-modify-index", "7", "-flags", "1", "foo", "bar"}, routes: ok,
			want: []sentRequest{{Method: "PUT", Path: "/v1/kv/foo", Query: "cas=7&flags=1", Body: "bar"}}, stdout: "Success! Data written to: foo\n"},
		{name: "cas failed", args: []string{"kv", "put", "-cas", "-modify-index=7", "foo", "bar"},
			routes: map[string]reply{"PUT /v1/kv/foo": {body: "false"}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/kv/foo", Query: "cas=7", Body: "bar"}}, code: 1,
			stderrHas: []string{"Error! Did not write to foo: CAS failed"}},
		{name: "cas without index", args: []string{"kv", "put", "-cas", "foo", "bar"}, code: 1,
			stderrHas: []string{"Must specify -modify-index with -cas!"}},
		{name: "acquire", args: []string{"kv", "put", "-acquire", "-session", "s1", "foo", "v"}, routes: ok,
			want: []sentRequest{{Method: "PUT", Path: "/v1/kv/foo", Query: "acquire=s1", Body: "v"}}, stdout: "Success! Lock acquired on: foo\n"},
		{name: "acquire without session", args: []string{"kv", "put", "-acquire", "foo"}, code: 1,
			stderrHas: []string{"Missing -session"}},
		{name: "write error", args: []string{"kv", "put", "foo", "bar"},
			routes: map[string]reply{"PUT /v1/kv/foo": {status: 413, body: "Value exceeds 524288 byte limit"}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/kv/foo", Body: "bar"}}, code: 1,
			stderrHas: []string{"Error! Failed writing data: Unexpected response code: 413 (Value exceeds 524288 byte limit)"}},
		{name: "missing key", args: []string{"kv", "put"}, code: 1, stderrHas: []string{"Error! Missing KEY argument"}},
	})
}

func TestKVDelete(t *testing.T) {
	ok := map[string]reply{"DELETE /v1/kv/foo": {body: "true"}}
	runCases(t, []cliCase{
		{name: "key", args: []string{"kv", "delete", "foo"}, routes: ok,
			want: []sentRequest{{Method: "DELETE", Path: "/v1/kv/foo"}}, stdout: "Success! Deleted key: foo\n"},
		{name: "recurse", args: []string{"kv", "delete", "-recurse", "foo"}, routes: ok,
			want: []sentRequest{{Method: "DELETE", Path: "/v1/kv/foo", Query: "recurse="}}, stdout: "Success! Deleted keys with prefix: foo\n"},
		{name: "cas", args: []string{"kv", "delete", "-cas", "-modify-index", "3", "foo"}, routes: ok,
			want: []sentRequest{{Method: "DELETE", Path: "/v1/kv/foo", Query: "cas=3"}}, stdout: "Success! Deleted key: foo\n"},
		{name: "cas failed", args: []string{"kv", "delete", "-cas", "-modify-index", "3", "foo"},
			routes: map[string]reply{"DELETE /v1/kv/foo": {body: "false"}},
			want:   []sentRequest{{Method: "DELETE", Path: "/v1/kv/foo", Query: "cas=3"}}, code: 1,
			stderrHas: []string{"Error! Did not delete key foo: CAS failed"}},
		{name: "cas without index", args: []string{"kv", "delete", "-cas", "foo"}, code: 1, stderrHas: []string{"Provide a -modify-index"}},
		{name: "index without cas", args: []string{"kv", "delete", "-modify-index", "3", "foo"}, code: 1, stderrHas: []string{"Cannot specify -modify-index without -cas!"}},
		{name: "cas and recurse", args: []string{"kv", "delete", "-cas", "-modify-index", "3", "-recurse", "foo"}, code: 1, stderrHas: []string{"Cannot specify both -cas and -recurse!"}},
		{name: "no key", args: []string{"kv", "delete"}, code: 1, stderrHas: []string{"Error! Missing KEY argument"}},
	})
}

func TestCatalog(t *testing.T) {
	nodes := `[{"ID":"aaaa1111-2222-3333-4444-555555555555","Node":"n1","Address":"127.0.0.1","Datacenter":"dc1","TaggedAddresses":{"lan":"127.0.0.1","wan":"127.0.0.1"},"Meta":{"b":"2","a":"1"}},
	           {"ID":"bbbb2222-2222-3333-4444-555555555555","Node":"node-two","Address":"10.0.0.2","Datacenter":"dc1"}]`
	runCases(t, []cliCase{
		{name: "datacenters", args: []string{"catalog", "datacenters"},
			routes: map[string]reply{"GET /v1/catalog/datacenters": {body: `["dc1","dc2"]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/datacenters"}}, stdout: "dc1\ndc2\n"},
		{name: "datacenters none", args: []string{"catalog", "datacenters"},
			routes: map[string]reply{"GET /v1/catalog/datacenters": {body: `[]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/datacenters"}}, code: 1, stderrHas: []string{"No datacenters found"}},
		{name: "datacenters with an argument", args: []string{"catalog", "datacenters", "x"}, code: 1, stderrHas: []string{"Too many arguments (expected 0, got 1)"}},
		{name: "services", args: []string{"catalog", "services"},
			routes: map[string]reply{"GET /v1/catalog/services": {body: `{"web":["b","a"],"consul":[]}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/services"}}, stdout: "consul\nweb\n"},
		{name: "services with tags", args: []string{"catalog", "services", "-tags"},
			routes: map[string]reply{"GET /v1/catalog/services": {body: `{"web":["b","a"],"consul":[]}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/services"}}, stdout: "consul      \nweb         a,b\n"},
		{name: "services none", args: []string{"catalog", "services", "-node-meta", "rack=r1"},
			routes:    map[string]reply{"GET /v1/catalog/services": {body: `{}`}},
			want:      []sentRequest{{Method: "GET", Path: "/v1/catalog/services", Query: "node-meta=rack%3Ar1"}},
			stderrHas: []string{"No services match the given query"}},
		{name: "services of a node", args: []string{"catalog", "services", "-node", "n1"},
			routes: map[string]reply{"GET /v1/catalog/node/n1": {body: `{"Node":{"Node":"n1"},"Services":{"web1":{"Service":"web","Tags":["x"]},"db":{"Service":"db"}}}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/node/n1"}}, stdout: "db\nweb\n"},
		{name: "nodes", args: []string{"catalog", "nodes"},
			routes: map[string]reply{"GET /v1/catalog/nodes": {body: nodes}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/nodes"}},
			stdout: "Node      ID        Address    DC\nn1        aaaa1111  127.0.0.1  dc1\nnode-two  bbbb2222  10.0.0.2   dc1\n"},
		{name: "nodes detailed", args: []string{"catalog", "nodes", "-detailed"},
			routes:    map[string]reply{"GET /v1/catalog/nodes": {body: nodes}},
			want:      []sentRequest{{Method: "GET", Path: "/v1/catalog/nodes"}},
			stdoutHas: []string{"TaggedAddresses", "aaaa1111-2222-3333-4444-555555555555", "lan=127.0.0.1, wan=127.0.0.1", "a=1, b=2"}},
		{name: "nodes of a service", args: []string{"catalog", "nodes", "-service", "web"},
			routes: map[string]reply{"GET /v1/catalog/service/web": {body: `[{"ID":"cccc","Node":"n3","Address":"10.0.0.3","Datacenter":"dc1"}]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/service/web"}},
			stdout: "Node  ID    Address   DC\nn3    cccc  10.0.0.3  dc1\n"},
		{name: "nodes error", args: []string{"catalog", "nodes"},
			routes: map[string]reply{"GET /v1/catalog/nodes": {status: 500, body: "No path to datacenter"}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/nodes"}}, code: 1,
			stderrHas: []string{"Error listing nodes: Unexpected response code: 500 (No path to datacenter)"}},
	})
}

func TestRaftListPeers(t *testing.T) {
	cfg := `{"Servers":[{"ID":"id1","Node":"s1","Address":"127.0.0.1:8300","Leader":true,"ProtocolVersion":"3","Voter":true},
	                    {"ID":"id2","Node":"s2","Address":"127.0.0.2:8300","Leader":false,"ProtocolVersion":"3","Voter":true}],"Index":12}`
	health := `{"Healthy":true,"Servers":[{"ID":"id1","LastIndex":20},{"ID":"id2","LastIndex":17}]}`
	both := []sentRequest{{Method: "GET", Path: "/v1/operator/raft/configuration"}, {Method: "GET", Path: "/v1/operator/autopilot/health"}}
	runCases(t, []cliCase{
		{name: "with autopilot", args: []string{"operator", "raft", "list-peers"},
			routes: map[string]reply{"GET /v1/operator/raft/configuration": {body: cfg}, "GET /v1/operator/autopilot/health": {body: health}},
			want:   both,
			stdout: "Node  ID   Address         State     Voter  RaftProtocol  Commit Index  Trails Leader By\n" +
				"s1    id1  127.0.0.1:8300  leader    true   3             20            _\n" +
				"s2    id2  127.0.0.2:8300  follower  true   3             17            3 Commits\n"},
		{name: "unhealthy answers 429", args: []string{"operator", "raft", "list-peers"},
			routes: map[string]reply{"GET /v1/operator/raft/configuration": {body: cfg}, "GET /v1/operator/autopilot/health": {status: 429, body: health}},
			want:   both, stdoutHas: []string{"3 Commits"}},
		{name: "without autopilot", args: []string{"operator", "raft", "list-peers", "-stale"},
			routes: map[string]reply{"GET /v1/operator/raft/configuration": {body: cfg}},
			want: []sentRequest{{Method: "GET", Path: "/v1/operator/raft/configuration", Query: "stale="},
				{Method: "GET", Path: "/v1/operator/autopilot/health", Query: "stale="}},
			stdout: "Node  ID   Address         State     Voter  RaftProtocol\n" +
				"s1    id1  127.0.0.1:8300  leader    true   3\n" +
				"s2    id2  127.0.0.2:8300  follower  true   3\n"},
		{name: "no leader", args: []string{"operator", "raft", "list-peers"},
			routes: map[string]reply{"GET /v1/operator/raft/configuration": {status: 500, body: "No cluster leader"}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/operator/raft/configuration"}}, code: 1,
			stderrHas: []string{"Error getting peers: Failed to retrieve raft configuration: Unexpected response code: 500 (No cluster leader)"}},
	})
}

func TestRaftRemovePeer(t *testing.T) {
	del := func(query string) []sentRequest {
		return []sentRequest{{Method: "DELETE", Path: "/v1/operator/raft/peer", Query: query}}
	}
	ok := map[string]reply{"DELETE /v1/operator/raft/peer": {}}
	runCases(t, []cliCase{
		{name: "by address", args: []string{"operator", "raft", "remove-peer", "-address", "127.0.0.2:8300"},
			routes: ok, want: del("address=127.0.0.2%3A8300"), stdout: "Removed peer with address \"127.0.0.2:8300\"\n"},
		{name: "by id, in a datacenter", args: []string{"operator", "raft", "remove-peer", "-id", "id2", "-datacenter", "dc2"},
			routes: ok, want: del("dc=dc2&id=id2"), stdout: "Removed peer with id \"id2\"\n"},
		{name: "unknown", args: []string{"operator", "raft", "remove-peer", "-address", "127.0.0.9:8300"},
			routes: map[string]reply{"DELETE /v1/operator/raft/peer": {status: 500, body: `address "127.0.0.9:8300" was not found in the Raft configuration`}},
			want:   del("address=127.0.0.9%3A8300"), code: 2,
			stderrHas: []string{`Error removing peer: Unexpected response code: 500 (address "127.0.0.9:8300" was not found in the Raft configuration)`}},
		{name: "neither", args: []string{"operator", "raft", "remove-peer"}, code: 2,
			stderrHas: []string{"Error removing peer: an address or id is required for the peer to remove"}},
		{name: "both", args: []string{"operator", "raft", "remove-peer", "-id", "a", "-address", "b"}, code: 2,
			stderrHas: []string{"Error removing peer: cannot give both an address and id"}},
	})
}

func TestRaftTransferLeader(t *testing.T) {
	post := func(query string) []sentRequest {
		return []sentRequest{{Method: "POST", Path: "/v1/operator/raft/transfer-leader", Query: query}}
	}
	runCases(t, []cliCase{
		{name: "to any voter", args: []string{"operator", "raft", "transfer-leader"},
			routes: map[string]reply{"POST /v1/operator/raft/transfer-leader": {body: `{"Success":true}`}}, want: post(""), stdout: "Success\n"},
		{name: "to a server, in a datacenter", args: []string{"operator", "raft", "transfer-leader", "-id", "id2", "-datacenter", "dc2"},
			routes: map[string]reply{"POST /v1/operator/raft/transfer-leader": {body: `{"Success":true}`}}, want: post("dc=dc2&id=id2"), stdout: "Success\n"},
		{name: "refused", args: []string{"operator", "raft", "transfer-leader", "-id", "nope"},
			routes: map[string]reply{"POST /v1/operator/raft/transfer-leader": {status: 500, body: `cannot transfer leadership: server "nope" was not found in the Raft configuration`}},
			want:   post("id=nope"), code: 1,
			stderrHas: []string{`Error transferring leadership: Unexpected response code: 500 (cannot transfer leadership: server "nope" was not found in the Raft configuration)`}},
		{name: "no success", args: []string{"operator", "raft", "transfer-leader"},
			routes: map[string]reply{"POST /v1/operator/raft/transfer-leader": {body: `{"Success":false}`}}, want: post(""), code: 1,
			stderrHas: []string{"Error transferring leadership: the leader did not transfer its leadership"}},
	})
}

func TestMembersJoinLeave(t *testing.T) {
	members := `[
	 {"Name":"client-1","Addr":"127.0.0.3","Port":8301,"Tags":{"role":"node","dc":"dc1","build":"1.22.0:abc","vsn":"2"},"Status":1},
	 {"Name":"srv-b","Addr":"127.0.0.2","Port":8301,"Tags":{"role":"consul","dc":"dc1","build":"1.22.0:abc","vsn":"2"},"Status":4},
	 {"Name":"srv-a","Addr":"127.0.0.1","Port":8301,"Tags":{"role":"consul","dc":"dc1","build":"1.22.0","vsn":"2"},"Status":1}]`
	mem := map[string]reply{"GET /v1/agent/members": {body: members}}
	runCases(t, []cliCase{
		{name: "members", args: []string{"members"}, routes: mem,
			want: []sentRequest{{Method: "GET", Path: "/v1/agent/members", Query: "segment=_all"}},
			stdout: "Node      Address         Status  Type    Build   Protocol  DC   Partition  Segment\n" +
				"srv-a     127.0.0.1:8301  alive   server  1.22.0  2         dc1  default    <all>\n" +
				"srv-b     127.0.0.2:8301  failed  server  1.22.0  2         dc1  default    <all>\n" +
				"client-1  127.0.0.3:8301  alive   client  1.22.0  2         dc1  default    <default>\n"},
		{name: "members by status", args: []string{"members", "-status", "failed"}, routes: mem,
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/members", Query: "segment=_all"}},
			stdout: "Node   Address         Status  Type    Build   Protocol  DC   Partition  Segment\nsrv-b  127.0.0.2:8301  failed  server  1.22.0  2         dc1  default    <all>\n"},
		{name: "no member matches", args: []string{"members", "-status", "left"}, routes: mem,
			want: []sentRequest{{Method: "GET", Path: "/v1/agent/members", Query: "segment=_all"}}, code: 2},
		{name: "members detailed wan", args: []string{"members", "-detailed", "-wan"}, routes: mem,
			want:      []sentRequest{{Method: "GET", Path: "/v1/agent/members", Query: "segment=_all&wan=1"}},
			stdoutHas: []string{"Node      Address         Status  Tags", "build=1.22.0:abc,dc=dc1,role=node,segment=<default>,vsn=2"}},
		{name: "join", args: []string{"join", "127.0.0.9:8301", "127.0.0.8"},
			routes: map[string]reply{"PUT /v1/agent/join/127.0.0.9:8301": {}, "PUT /v1/agent/join/127.0.0.8": {status: 500, body: "no route"}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/join/127.0.0.9:8301"}, {Method: "PUT", Path: "/v1/agent/join/127.0.0.8"}},
			stdout: "Successfully joined cluster by contacting 1 nodes.\n", stderrHas: []string{"Error joining address '127.0.0.8': Unexpected response code: 500 (no route)"}},
		{name: "join fails", args: []string{"join", "127.0.0.8"},
			want: []sentRequest{{Method: "PUT", Path: "/v1/agent/join/127.0.0.8"}}, code: 1, stderrHas: []string{"Failed to join any nodes."}},
		{name: "join nothing", args: []string{"join"}, code: 1, stderrHas: []string{"At least one address to join must be specified."}},
		{name: "leave", args: []string{"leave"}, routes: map[string]reply{"PUT /v1/agent/leave": {}},
			want: []sentRequest{{Method: "PUT", Path: "/v1/agent/leave"}}, stdout: "Graceful leave complete\n"},
		{name: "leave extra", args: []string{"leave", "x"}, code: 1, stderrHas: []string{"Error found unexpected args: [x]"}},
		{name: "force-leave", args: []string{"force-leave", "-prune", "client-1"},
			routes: map[string]reply{"PUT /v1/agent/force-leave/client-1": {}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/force-leave/client-1", Query: "prune=1"}}, stdout: ""},
		{name: "force-leave unknown", args: []string{"force-leave", "ghost"},
			want: []sentRequest{{Method: "PUT", Path: "/v1/agent/force-leave/ghost"}}, code: 1, stderrHas: []string{"Error force leaving: Unexpected response code: 404"}},
		{name: "force-leave needs one node", args: []string{"force-leave"}, code: 1, stderrHas: []string{"A single node name must be specified"}},
	})
}

func TestServices(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("web.json", `{"service": {"name": "web", "id": "web1", "port": 8080, "tags": ["v1"],
		"check": {"ttl": "10s"}, "connect": {"sidecar_service": {}}}}`)
	many := write("many.json", `{"Services": [{"Name": "a"}, {"Name": "b", "ID": "b1"}]}`)
	bare := write("bare.json", `{"Name": "c", "Port": 1}`)
	bad := write("bad.json", `{"nothing": 1}`)
	hcl := write("web.hcl", `service { name = "web" }`)
	reg := map[string]reply{"PUT /v1/agent/service/register": {}}
	runCases(t, []cliCase{
		{name: "register file", args: []string{"services", "register", one}, routes: reg,
			want: []sentRequest{{Method: "PUT", Path: "/v1/agent/service/register",
				Body: `{"name":"web","id":"web1","port":8080,"tags":["v1"],"check":{"ttl":"10s"},"connect":{"sidecar_service":{}}}`}},
			stdout: "Registered service: web\n"},
		{name: "register list and flags fill gaps", args: []string{"services", "register", "-address", "10.0.0.1", "-tag", "x", many}, routes: reg,
			want: []sentRequest{
				{Method: "PUT", Path: "/v1/agent/service/register", Body: `{"Name":"a","Address":"10.0.0.1","Tags":["x"]}`},
				{Method: "PUT", Path: "/v1/agent/service/register", Body: `{"Name":"b","ID":"b1","Address":"10.0.0.1","Tags":["x"]}`}},
			stdout: "Registered service: a\nRegistered service: b\n"},
		{name: "register bare body", args: []string{"services", "register", bare}, routes: reg,
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/service/register", Body: `{"Name":"c","Port":1}`}},
			stdout: "Registered service: c\n"},
		{name: "register flags", args: []string{"services", "register", "-name", "web", "-id", "web2", "-port", "80", "-tag", "a", "-tag", "b", "-meta", "k=v"}, routes: reg,
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/service/register", Body: `{"Name":"web","ID":"web2","Port":80,"Tags":["a","b"],"Meta":{"k":"v"}}`}},
			stdout: "Registered service: web\n"},
		{name: "register rejected", args: []string{"services", "register", "-name", "web", "-port", "70000"},
			routes: map[string]reply{"PUT /v1/agent/service/register": {status: 400, body: "Invalid Service Port"}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/service/register", Body: `{"Name":"web","Port":70000}`}}, code: 1,
			stderrHas: []string{`Error registering service "web": Unexpected response code: 400 (Invalid Service Port)`}},
		{name: "register nothing", args: []string{"services", "register"}, code: 1, stderrHas: []string{"requires at least one argument or flags"}},
		{name: "register file and name", args: []string{"services", "register", "-name", "x", one}, code: 1, stderrHas: []string{"not both"}},
		{name: "register bad file", args: []string{"services", "register", bad}, code: 1, stderrHas: []string{"no service definition found"}},
		{name: "register hcl", args: []string{"services", "register", hcl}, code: 1, stderrHas: []string{"only JSON"}},
		{name: "deregister id", args: []string{"services", "deregister", "-id", "web1"},
			routes: map[string]reply{"PUT /v1/agent/service/deregister/web1": {}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/service/deregister/web1"}}, stdout: "Deregistered service: web1\n"},
		{name: "deregister file", args: []string{"services", "deregister", many},
			routes: map[string]reply{"PUT /v1/agent/service/deregister/a": {}, "PUT /v1/agent/service/deregister/b1": {}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/service/deregister/a"}, {Method: "PUT", Path: "/v1/agent/service/deregister/b1"}},
			stdout: "Deregistered service: a\nDeregistered service: b1\n"},
		{name: "deregister unknown", args: []string{"services", "deregister", "-id", "ghost"},
			want: []sentRequest{{Method: "PUT", Path: "/v1/agent/service/deregister/ghost"}}, code: 1,
			stderrHas: []string{`Error deregistering service "ghost": Unexpected response code: 404`}},
		{name: "deregister nothing", args: []string{"services", "deregister"}, code: 1, stderrHas: []string{"requires at least one argument or -id"}},
	})
}

func TestMaint(t *testing.T) {
	runCases(t, []cliCase{
		{name: "enable node", args: []string{"maint", "-enable", "-reason", "kernel upgrade"},
			routes: map[string]reply{"PUT /v1/agent/maintenance": {}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/maintenance", Query: "enable=true&reason=kernel+upgrade"}},
			stdout: "Node maintenance is now enabled\n"},
		{name: "disable node", args: []string{"maint", "-disable"},
			routes: map[string]reply{"PUT /v1/agent/maintenance": {}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/maintenance", Query: "enable=false"}},
			stdout: "Node maintenance is now disabled\n"},
		{name: "enable service", args: []string{"maint", "-enable", "-service", "web1"},
			routes: map[string]reply{"PUT /v1/agent/service/maintenance/web1": {}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/service/maintenance/web1", Query: "enable=true&reason="}},
			stdout: "Service maintenance is now enabled for \"web1\"\n"},
		{name: "disable unknown service", args: []string{"maint", "-disable", "-service", "ghost"},
			want: []sentRequest{{Method: "PUT", Path: "/v1/agent/service/maintenance/ghost", Query: "enable=false"}}, code: 1,
			stderrHas: []string{"Error disabling service maintenance: Unexpected response code: 404"}},
		{name: "list", args: []string{"maint"},
			routes: map[string]reply{
				"GET /v1/agent/self":   {body: `{"Config":{"NodeName":"n1"}}`},
				"GET /v1/agent/checks": {body: `{"_node_maintenance":{"CheckID":"_node_maintenance","Notes":"upgrading"},"_service_maintenance:web1":{"CheckID":"_service_maintenance:web1","ServiceID":"web1","Notes":"draining"},"service:web1":{"CheckID":"service:web1"}}`},
			},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/self"}, {Method: "GET", Path: "/v1/agent/checks"}},
			stdout: "Node:\n  Name:   n1\n  Reason: upgrading\n\nService:\n  ID:     web1\n  Reason: draining\n\n"},
		{name: "both", args: []string{"maint", "-enable", "-disable"}, code: 1, stderrHas: []string{"Only one of -enable or -disable may be provided"}},
		{name: "reason without enable", args: []string{"maint", "-reason", "x"}, code: 1, stderrHas: []string{"Reason may only be provided with -enable"}},
		{name: "service without mode", args: []string{"maint", "-service", "x"}, code: 1, stderrHas: []string{"Service requires either -enable or -disable"}},
	})
}
