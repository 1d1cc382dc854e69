package httpapi

import (
	"net/http"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestOperatorKeyring(t *testing.T) {
	const key = "qxycTi/SsePj/TZzCBmNXw=="
	m := structs.MethodInternalKeyringOperation.Name()
	call := func(op structs.KeyringOp, key string, relay uint8, local bool) []rpcCall {
		return []rpcCall{{m, structs.KeyringRequest{Operation: op, Key: key, RelayFactor: relay, LocalOnly: local,
			QueryOptions: structs.QueryOptions{AllowStale: true}}}}
	}
	pools := structs.KeyringResponses{Responses: []*structs.KeyringResponse{
		{WAN: true, Datacenter: "dc1", Keys: map[string]int{key: 3}, PrimaryKeys: map[string]int{key: 3}, NumNodes: 3},
		{Datacenter: "dc1", Keys: map[string]int{key: 4}, PrimaryKeys: map[string]int{key: 4}, NumNodes: 4},
	}}
	failed := structs.KeyringResponses{Responses: []*structs.KeyringResponse{
		{Datacenter: "dc1", Error: "1/4 nodes reported failure", Messages: map[string]string{"n2": "Removing the primary key is not allowed"}, NumNodes: 4},
	}}
	runCases(t, []apiCase{
		{name: "list", path: "/v1/operator/keyring",
			setup:    func(f *fakeRPC, _ *Config) { f.replies[m] = pools },
			wantCode: 200, wantJSON: true,
			wantBody: `[{"WAN":true,"Datacenter":"dc1","Segment":"","Keys":{"` + key + `":3},"PrimaryKeys":{"` + key + `":3},"NumNodes":3},` +
				`{"WAN":false,"Datacenter":"dc1","Segment":"","Keys":{"` + key + `":4},"PrimaryKeys":{"` + key + `":4},"NumNodes":4}]`,
			wantCalls: call(structs.KeyringList, "", 0, false)},
		{name: "list local-only with a relay factor", path: "/v1/operator/keyring?local-only=true&relay-factor=2",
			setup:    func(f *fakeRPC, _ *Config) { f.replies[m] = pools },
			wantCode: 200, skipBody: true, wantCalls: call(structs.KeyringList, "", 2, true)},
		{name: "install", method: http.MethodPost, path: "/v1/operator/keyring", body: `{"Key":"` + key + `"}`,
			wantCode: 200, wantCalls: call(structs.KeyringInstall, key, 0, false)},
		{name: "use", method: http.MethodPut, path: "/v1/operator/keyring", body: `{"Key":"` + key + `"}`,
			wantCode: 200, wantCalls: call(structs.KeyringUse, key, 0, false)},
		{name: "remove", method: http.MethodDelete, path: "/v1/operator/keyring", body: `{"Key":"` + key + `"}`,
			wantCode: 200, wantCalls: call(structs.KeyringRemove, key, 0, false)},
		{name: "a pool's failure is a 500 naming the pool and the member", method: http.MethodDelete, path: "/v1/operator/keyring", body: `{"Key":"` + key + `"}`,
			setup:    func(f *fakeRPC, _ *Config) { f.replies[m] = failed },
			wantCode: 500, wantBody: "2 errors occurred:\n\t* dc1 (LAN) error: 1/4 nodes reported failure\n\t* n2: Removing the primary key is not allowed\n\n",
			anyCalls: true},
		{name: "bad body", method: http.MethodPost, path: "/v1/operator/keyring", body: `{"Key":1}`,
			wantCode: 400, skipBody: true},
		{name: "relay factor out of range", path: "/v1/operator/keyring?relay-factor=6",
			wantCode: 400, wantBody: "Invalid relay-factor: Relay factor must be in range: [0, 5]"},
		{name: "relay factor not a number", path: "/v1/operator/keyring?relay-factor=x",
			wantCode: 400, wantBody: `Error parsing relay factor: strconv.Atoi: parsing "x": invalid syntax`},
		{name: "local-only on a write", method: http.MethodPost, path: "/v1/operator/keyring?local-only=true", body: `{"Key":"` + key + `"}`,
			wantCode: 400, wantBody: "Invalid use of local-only: local-only can only be set for list requests"},
		{name: "PATCH is 405", method: http.MethodPatch, path: "/v1/operator/keyring", wantCode: 405, wantBody: "method PATCH not allowed"},
	})
}
