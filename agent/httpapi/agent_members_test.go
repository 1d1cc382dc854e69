package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// staticPool is a gossip pool with fixed members that records joins.
type staticPool struct {
	members []MemberInfo
	joined  *[]string
}

func (p staticPool) Members() []MemberInfo { return p.members }

func (p staticPool) Join(addr string) (int, error) {
	if addr == "unreachable" {
		return 0, errors.New("no route to host")
	}
	*p.joined = append(*p.joined, addr)
	return 1, nil
}

func TestAgentMembersAndJoin(t *testing.T) {
	lan := []MemberInfo{{Name: "node1", Addr: "127.0.0.1", Port: 8301, Tags: map[string]string{"dc": "dc1", "role": "consul"}, Status: 1}}
	wan := []MemberInfo{
		{Name: "node1.dc1", Addr: "127.0.0.1", Port: 8302, Tags: map[string]string{"dc": "dc1", "role": "consul"}, Status: 1},
		{Name: "node2.dc2", Addr: "127.0.0.1", Port: 9302, Tags: map[string]string{"dc": "dc2", "role": "consul"}, Status: 1},
	}
	var lanJoins, wanJoins []string
	server := func(_ *fakeRPC, c *Config) {
		c.Membership = staticPool{lan, &lanJoins}
		c.WANMembership = staticPool{wan, &wanJoins}
	}
	client := func(_ *fakeRPC, c *Config) { c.Membership = staticPool{lan, &lanJoins} }
	member := func(name, port, dc string) string {
		return `{"Name":"` + name + `","Addr":"127.0.0.1","Port":` + port + `,"Tags":{"dc":"` + dc + `","role":"consul"},"Status":1,` +
			`"ProtocolMin":0,"ProtocolMax":0,"ProtocolCur":0,"DelegateMin":0,"DelegateMax":0,"DelegateCur":0}`
	}
	runCases(t, []apiCase{
		{name: "LAN members", path: "/v1/agent/members", setup: server, wantCode: 200, wantJSON: true, wantBody: `[` + member("node1", "8301", "dc1") + `]`},
		{
			name: "WAN members of a server", path: "/v1/agent/members?wan=1", setup: server, wantCode: 200, wantJSON: true,
			wantBody: `[` + member("node1.dc1", "8302", "dc1") + `,` + member("node2.dc2", "9302", "dc2") + `]`,
		},
		{
			name: "WAN members filtered by tag", path: `/v1/agent/members?wan=1&filter=Tags%5B%22dc%22%5D%20%3D%3D%20dc2`, setup: server,
			wantCode: 200, wantJSON: true, wantBody: `[` + member("node2.dc2", "9302", "dc2") + `]`,
		},
		{
			name: "filter matching nothing", path: `/v1/agent/members?wan=1&filter=Tags%5B%22dc%22%5D%20%3D%3D%20%22not-Exist%22`, setup: server,
			wantCode: 200, wantBody: `[]`,
		},
		{
			name: "filter on an unknown field", path: `/v1/agent/members?filter=Nope%20%3D%3D%201`, setup: server,
			wantCode: 500, skipBody: true,
		},
		{name: "WAN members of a client agent: none", path: "/v1/agent/members?wan", setup: client, wantCode: 200, wantBody: `[]`},
		{
			name: "WAN join", method: http.MethodPut, path: "/v1/agent/join/127.0.0.1:9302?wan=1", setup: server, wantCode: 200, wantBody: "",
			check: func(t *testing.T, _ *httptest.ResponseRecorder, _ []rpcCall) {
				if len(wanJoins) != 1 || wanJoins[0] != "127.0.0.1:9302" || len(lanJoins) != 0 {
					t.Errorf("joins: WAN %q, LAN %q", wanJoins, lanJoins)
				}
			},
		},
		{
			name: "WAN join on a client agent", method: http.MethodPut, path: "/v1/agent/join/127.0.0.1:9302?wan=1", setup: client,
			wantCode: 500, wantBody: "Must be a server to join WAN cluster",
		},
		{
			name: "WAN join failing", method: http.MethodPut, path: "/v1/agent/join/unreachable?wan=1", setup: server,
			wantCode: 500, wantBody: "no route to host",
		},
	})
}
