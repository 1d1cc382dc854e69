package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestConfigCommands(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "web.json")
	if err := os.WriteFile(file, []byte(`{"kind":"service-defaults","name":"web","protocol":"http"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"Kind":"service-defaults","Name":"web","Bogus":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	written := `{"Kind":"service-defaults","Name":"web","Protocol":"http","TransparentProxy":{},"MeshGateway":{},"Expose":{},"CreateIndex":0,"ModifyIndex":0}`
	entry := `{"Kind":"service-defaults","Name":"web","Protocol":"http","CreateIndex":5,"ModifyIndex":6}`
	runCases(t, []cliCase{
		{name: "write from file", args: []string{"config", "write", file},
			routes: map[string]reply{"PUT /v1/config": {body: "true"}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/config", Body: written, ContentType: "application/json"}},
			stdout: "Config entry written: service-defaults/web\n"},
		{name: "write from stdin with cas", args: []string{"config", "write", "-cas", "-modify-index", "6", "-"},
			stdin:  `{"Kind":"service-resolver","Name":"db","ConnectTimeout":"3s"}`,
			routes: map[string]reply{"PUT /v1/config": {body: "false"}},
			want: []sentRequest{{Method: "PUT", Path: "/v1/config", Query: "cas=6",
				Body: `{"Kind":"service-resolver","Name":"db","ConnectTimeout":"3s","CreateIndex":0,"ModifyIndex":0}`}},
			code: 1, stderrHas: []string{"Config entry not updated: service-resolver/db"}},
		{name: "write refused", args: []string{"config", "write", file},
			routes: map[string]reply{"PUT /v1/config": {status: 500, body: "boom"}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/config", Body: written}},
			code:   1, stderrHas: []string{"Error writing config entry service-defaults/web: Unexpected response code: 500 (boom)"}},
		{name: "write undecodable", args: []string{"config", "write", bad}, code: 1,
			stderrHas: []string{"Failed to decode config entry input: 1 error occurred:", `invalid config key "Bogus"`}},
		{name: "write missing file", args: []string{"config", "write", filepath.Join(dir, "nope")}, code: 1,
			stderrHas: []string{"Failed to load data: "}},
		{name: "write without argument", args: []string{"config", "write"}, code: 1,
			stderrHas: []string{"Must provide exactly one positional argument to specify the config entry to write"}},
		{name: "read", args: []string{"config", "read", "-kind", "service-defaults", "-name", "web"},
			routes: map[string]reply{"GET /v1/config/service-defaults/web": {body: entry}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/config/service-defaults/web"}},
			stdout: "{\n    \"Kind\": \"service-defaults\",\n    \"Name\": \"web\",\n    \"Protocol\": \"http\",\n    \"CreateIndex\": 5,\n    \"ModifyIndex\": 6\n}\n"},
		{name: "read missing", args: []string{"config", "read", "-kind", "service-defaults", "-name", "nope"},
			routes: map[string]reply{"GET /v1/config/service-defaults/nope": {status: 404, body: `Config entry not found for "service-defaults" / "nope"`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/config/service-defaults/nope"}}, code: 1,
			stderrHas: []string{`Error reading config entry service-defaults/nope: Unexpected response code: 404 (Config entry not found for "service-defaults" / "nope")`}},
		{name: "read without name", args: []string{"config", "read", "-kind", "mesh"}, code: 1,
			stderrHas: []string{"Must specify the -name parameter"}},
		{name: "list", args: []string{"config", "list", "-kind", "service-defaults"},
			routes: map[string]reply{"GET /v1/config/service-defaults": {body: `[{"Kind":"service-defaults","Name":"api"},{"Kind":"service-defaults","Name":"web"}]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/config/service-defaults"}}, stdout: "api\nweb\n"},
		{name: "list without kind", args: []string{"config", "list"}, code: 1, stderrHas: []string{"Must specify the -kind parameter"}},
		{name: "read without kind", args: []string{"config", "read", "-name", "web"}, code: 1, stderrHas: []string{"Must specify the -kind parameter"}},
		{name: "delete without kind", args: []string{"config", "delete", "-name", "web"}, code: 1, stderrHas: []string{"Must specify the -kind parameter"}},
		{name: "delete without name", args: []string{"config", "delete", "-kind", "service-defaults"}, code: 1, stderrHas: []string{"Must specify the -name parameter"}},
		{name: "delete", args: []string{"config", "delete", "-kind", "service-defaults", "-name", "web"},
			routes: map[string]reply{"DELETE /v1/config/service-defaults/web": {body: "{}"}},
			want:   []sentRequest{{Method: "DELETE", Path: "/v1/config/service-defaults/web"}},
			stdout: "Config entry deleted: service-defaults/web\n"},
		{name: "delete cas lost", args: []string{"config", "delete", "-kind", "service-defaults", "-name", "web", "-cas", "-modify-index", "3"},
			routes: map[string]reply{"DELETE /v1/config/service-defaults/web": {body: "false"}},
			want:   []sentRequest{{Method: "DELETE", Path: "/v1/config/service-defaults/web", Query: "cas=3"}},
			code:   1, stderrHas: []string{"Config entry not deleted: service-defaults/web"}},
	})
}

func TestIntentionCommands(t *testing.T) {
	list := `[{"SourceName":"web","DestinationName":"db","Action":"deny","Precedence":9},{"SourceName":"*","DestinationName":"db","Action":"allow","Precedence":8},` +
		`{"SourceName":"fe","DestinationName":"api","Precedence":9,"Permissions":[{"Action":"allow"},{"Action":"deny"}]}]`
	runCases(t, []cliCase{
		{name: "create", args: []string{"intention", "create", "web", "db"},
			routes: map[string]reply{"PUT /v1/connect/intentions/exact": {body: "true"}},
			want: []sentRequest{
				{Method: "GET", Path: "/v1/connect/intentions/exact", Query: "destination=db&source=web"},
				{Method: "PUT", Path: "/v1/connect/intentions/exact", Query: "destination=db&source=web", Body: `{"SourceType":"consul","Action":"allow"}`},
			},
			stdout: "Created: web => db (allow)\n"},
		{name: "create deny with meta, replacing", args: []string{"intention", "create", "-deny", "-replace", "-meta", "k=v", "web", "db"},
			routes: map[string]reply{"PUT /v1/connect/intentions/exact": {body: "true"}},
			want: []sentRequest{{Method: "PUT", Path: "/v1/connect/intentions/exact", Query: "destination=db&source=web",
				Body: `{"SourceType":"consul","Action":"deny","Meta":{"k":"v"}}`}},
			stdout: "Created: web => db (deny)\n"},
		{name: "create existing", args: []string{"intention", "create", "web", "db"},
			routes: map[string]reply{"GET /v1/connect/intentions/exact": {body: `{"SourceName":"web"}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/intentions/exact", Query: "destination=db&source=web"}},
			code:   1, stderrHas: []string{`an intention from "web" to "db" already exists; use -replace to replace it`}},
		{name: "create with both actions", args: []string{"intention", "create", "-allow", "-deny", "a", "b"}, code: 1,
			stderrHas: []string{"Only one of -allow or -deny may be specified."}},
		{name: "create with one argument", args: []string{"intention", "create", "a"}, code: 1,
			stderrHas: []string{"Error: Must specify two arguments: source and destination"}},
		{name: "check allowed", args: []string{"intention", "check", "web", "db"},
			routes: map[string]reply{"GET /v1/connect/intentions/check": {body: `{"Allowed":true}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/intentions/check", Query: "destination=db&source=web&source-type=consul"}},
			stdout: "Allowed\n"},
		{name: "check denied", args: []string{"intention", "check", "web", "db"},
			routes: map[string]reply{"GET /v1/connect/intentions/check": {body: `{"Allowed":false}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/intentions/check", Query: "destination=db&source=web&source-type=consul"}},
			stdout: "Denied\n", code: 1},
		{name: "check error", args: []string{"intention", "check", "web"}, code: 2,
			stderrHas: []string{"Error: command requires exactly two arguments: src and dst"}},
		{name: "delete", args: []string{"intention", "delete", "web", "db"},
			routes: map[string]reply{"DELETE /v1/connect/intentions/exact": {body: "true"}},
			want:   []sentRequest{{Method: "DELETE", Path: "/v1/connect/intentions/exact", Query: "destination=db&source=web"}},
			stdout: "Intention deleted.\n"},
		{name: "delete by ID", args: []string{"intention", "delete", "-datacenter", "dc2", "e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11"},
			routes: map[string]reply{"DELETE /v1/connect/intentions/e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11": {body: "true"}},
			want:   []sentRequest{{Method: "DELETE", Path: "/v1/connect/intentions/e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11", Query: "dc=dc2"}},
			stdout: "Intention deleted.\n"},
		{name: "delete by missing ID", args: []string{"intention", "delete", "e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11"},
			routes: map[string]reply{"DELETE /v1/connect/intentions/e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11": {status: 500, body: "Cannot delete non-existent intention: 'e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11'"}},
			want:   []sentRequest{{Method: "DELETE", Path: "/v1/connect/intentions/e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11"}},
			code:   1, stderrHas: []string{"Error deleting the intention:", "Cannot delete non-existent intention"}},
		{name: "get by source and destination", args: []string{"intention", "get", "web", "db"},
			routes: map[string]reply{"GET /v1/connect/intentions/exact": {body: `{"SourceName":"web","DestinationName":"db","Action":"deny","Description":"no",` +
				`"Meta":{"b":"2","a":"1"},"CreatedAt":"0001-01-01T00:00:00Z"}`}},
			want: []sentRequest{{Method: "GET", Path: "/v1/connect/intentions/exact", Query: "destination=db&source=web"}},
			stdout: "Source:       web\nDestination:  db\nAction:       deny\nDescription:  no\nMeta[a]:      1\nMeta[b]:      2\n" +
				"Created At:   " + time.Time{}.Local().Format(time.RFC850) + "\n"},
		{name: "get by ID, with permissions", args: []string{"intention", "get", "e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11"},
			routes: map[string]reply{"GET /v1/connect/intentions/e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11": {body: `{"ID":"e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11",` +
				`"SourceName":"web","DestinationName":"api","Permissions":[{"Action":"allow"}],"CreatedAt":"2026-11-30T07:00:00Z"}`}},
			want: []sentRequest{{Method: "GET", Path: "/v1/connect/intentions/e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11"}},
			stdout: "Source:       web\nDestination:  api\nID:           e4c4bd5e-4b5e-4d2b-9a3c-5f0d2c7e8a11\n" +
				"Created At:   " + time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC).Local().Format(time.RFC850) + "\n" +
				"Permissions:\n[\n  {\n    \"Action\": \"allow\"\n  }\n]\n"},
		{name: "get missing", args: []string{"intention", "get", "web", "nope"},
			want: []sentRequest{{Method: "GET", Path: "/v1/connect/intentions/exact", Query: "destination=nope&source=web"}},
			code: 1, stderrHas: []string{`Intention not found with source "web" and destination "nope"`}},
		{name: "get without arguments", args: []string{"intention", "get"}, code: 1, stderrHas: []string{"command requires exactly 1 or 2 arguments"}},
		{name: "match", args: []string{"intention", "match", "db"},
			routes: map[string]reply{"GET /v1/connect/intentions/match": {body: `{"db":` + list + `}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/intentions/match", Query: "by=destination&name=db"}},
			stdout: "web => db (deny)\n* => db (allow)\nfe => api (2 permissions)\n"},
		{name: "match by source", args: []string{"intention", "match", "-source", "web"},
			routes: map[string]reply{"GET /v1/connect/intentions/match": {body: `{"web":[]}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/intentions/match", Query: "by=source&name=web"}}},
		{name: "match both ways", args: []string{"intention", "match", "-source", "-destination", "web"}, code: 1,
			stderrHas: []string{"Error: only one of -source or -destination may be specified"}},
		{name: "list", args: []string{"intention", "list"},
			routes: map[string]reply{"GET /v1/connect/intentions": {body: list}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/intentions"}},
			stdout: "ID  Source  Action         Destination  Precedence\n    web     deny           db           9\n    *       allow          db           8\n    fe      2 permissions  api          9\n"},
		{name: "list empty", args: []string{"intention", "list"},
			routes: map[string]reply{"GET /v1/connect/intentions": {body: `[]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/connect/intentions"}},
			code:   2, stderrHas: []string{"There are no intentions."}},
	})
}
