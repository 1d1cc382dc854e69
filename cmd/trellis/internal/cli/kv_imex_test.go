package cli

import (
	"path/filepath"
	"testing"
)

func TestKVExport(t *testing.T) {
	list := map[string]reply{"GET /v1/kv/app": {body: `[{"Key":"app/a","Flags":3,"Value":"MQ=="},{"Key":"app/b","Value":null}]`}}
	runCases(t, []cliCase{
		{name: "prefix", args: []string{"kv", "export", "app"}, routes: list,
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/app", Query: "recurse="}},
			stdout: "[\n\t{\n\t\t\"key\": \"app/a\",\n\t\t\"flags\": 3,\n\t\t\"value\": \"MQ==\"\n\t},\n\t{\n\t\t\"key\": \"app/b\",\n\t\t\"flags\": 0,\n\t\t\"value\": \"\"\n\t}\n]\n"},
		{name: "nothing there", args: []string{"kv", "export", "none"},
			want: []sentRequest{{Method: "GET", Path: "/v1/kv/none", Query: "recurse="}}, stdout: "[]\n"},
		{name: "whole tree", args: []string{"kv", "export"},
			want: []sentRequest{{Method: "GET", Path: "/v1/kv/", Query: "recurse="}}, stdout: "[]\n"},
		{name: "server error", args: []string{"kv", "export", "app"},
			routes: map[string]reply{"GET /v1/kv/app": {status: 500, body: "boom"}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/app", Query: "recurse="}}, code: 1,
			stderrHas: []string{"Error querying Consul agent: Unexpected response code: 500 (boom)"}},
		{name: "too many arguments", args: []string{"kv", "export", "a", "b"}, code: 1,
			stderrHas: []string{"Too many arguments (expected 1, got 2)"}},
	})
}

func TestKVImport(t *testing.T) {
	data := `[{"key":"app/a","flags":3,"value":"MQ=="},{"key":"app/b","flags":0,"value":""}]`
	file := filepath.Join(t.TempDir(), "kv.json")
	if err := writeTestFile(file, data); err != nil {
		t.Fatal(err)
	}
	ok := map[string]reply{"PUT /v1/kv/app/a": {body: "true"}, "PUT /v1/kv/app/b": {body: "true"},
		"PUT /v1/kv/p/app/a": {body: "true"}, "PUT /v1/kv/p/app/b": {body: "true"}}
	both := []sentRequest{
		{Method: "PUT", Path: "/v1/kv/app/a", Query: "flags=3", Body: "1", ContentType: "application/octet-stream"},
		{Method: "PUT", Path: "/v1/kv/app/b"},
	}
	runCases(t, []cliCase{
		{name: "inline", args: []string{"kv", "import", data}, routes: ok, want: both,
			stdout: "Imported: app/a\nImported: app/b\n"},
		{name: "file", args: []string{"kv", "import", "@" + file}, routes: ok, want: both,
			stdout: "Imported: app/a\nImported: app/b\n"},
		{name: "stdin with prefix", args: []string{"kv", "import", "-prefix", "p/", "-"}, stdin: data, routes: ok,
			want: []sentRequest{
				{Method: "PUT", Path: "/v1/kv/p/app/a", Query: "flags=3", Body: "1"},
				{Method: "PUT", Path: "/v1/kv/p/app/b"},
			},
			stdout: "Imported: p/app/a\nImported: p/app/b\n"},
		{name: "not json", args: []string{"kv", "import", "{"}, code: 1, stderrHas: []string{"Cannot unmarshal data"}},
		{name: "bad base64 writes nothing", args: []string{"kv", "import", `[{"key":"a","value":"MQ=="},{"key":"b","value":"!!"}]`},
			code: 1, stderrHas: []string{"Error base 64 decoding value for key b"}},
		{name: "write fails", args: []string{"kv", "import", data},
			want: []sentRequest{{Method: "PUT", Path: "/v1/kv/app/a", Query: "flags=3", Body: "1"}}, code: 1,
			stderrHas: []string{"Error! Failed writing data for key app/a: Unexpected response code: 404"}},
		{name: "missing data", args: []string{"kv", "import"}, code: 1, stderrHas: []string{"Error! Missing DATA argument"}},
		{name: "too many arguments", args: []string{"kv", "import", "a", "b"}, code: 1,
			stderrHas: []string{"Too many arguments (expected 1, got 2)"}},
	})
}
