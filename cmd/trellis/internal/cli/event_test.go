package cli

import (
	"net/http"
	"strings"
	"testing"
)

func TestEventCommand(t *testing.T) {
	fire := map[string]reply{"PUT /v1/event/fire/deploy": {body: `{"ID":"b54fe110-7af5-cafc-d1fb-afc8ba432b1c","Name":"deploy"}`}}
	tests := []struct {
		name      string
		args      []string
		code      int
		stdout    string
		stderrHas string
		wantQuery string
		wantBody  string
	}{
		{name: "fires with filters and payload", args: []string{"event", "-name", "deploy", "-service", "web", "-tag", "v1", "-node", "^n", "v2"},
			code: 0, stdout: "Event ID: b54fe110-7af5-cafc-d1fb-afc8ba432b1c\n", wantQuery: "node=%5En&service=web&tag=v1", wantBody: "v2"},
		{name: "no payload", args: []string{"event", "-name", "deploy"}, code: 0,
			stdout: "Event ID: b54fe110-7af5-cafc-d1fb-afc8ba432b1c\n"},
		{name: "no name", args: []string{"event"}, code: 1, stderrHas: "Event name must be specified"},
		{name: "tag without service", args: []string{"event", "-name", "x", "-tag", "v1"}, code: 1, stderrHas: "Cannot provide tag filter without service filter."},
		{name: "bad regexp", args: []string{"event", "-name", "x", "-node", "("}, code: 1, stderrHas: "Failed to compile node filter regexp"},
		{name: "two payloads", args: []string{"event", "-name", "x", "a", "b"}, code: 1, stderrHas: "Too many command line arguments."},
		{name: "agent error", args: []string{"event", "-name", "other"}, code: 1, stderrHas: "Error firing event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAgent(t, fire)
			code, out, errOut := runCLI(tt.args, map[string]string{"CONSUL_HTTP_ADDR": f.addr()}, "")
			if code != tt.code || out != tt.stdout || !strings.Contains(errOut, tt.stderrHas) {
				t.Fatalf("code %d stdout %q stderr %q", code, out, errOut)
			}
			if tt.code == 0 {
				reqs := f.requests()
				if len(reqs) != 1 || reqs[0].Method != http.MethodPut || reqs[0].Query != tt.wantQuery || reqs[0].Body != tt.wantBody {
					t.Fatalf("requests %+v", reqs)
				}
			}
		})
	}
}

func TestWatchEventWithoutHandler(t *testing.T) {
	f := newFakeAgent(t, map[string]reply{"GET /v1/event/list": {body: `[{"ID":"b54fe110-7af5-cafc-d1fb-afc8ba432b1c","Name":"deploy","Payload":"djI=","Version":1,"LTime":3}]`}})
	code, out, errOut := runCLI([]string{"watch", "-type", "event", "-name", "deploy"}, map[string]string{"CONSUL_HTTP_ADDR": f.addr()}, "")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	want := `[{"ID":"b54fe110-7af5-cafc-d1fb-afc8ba432b1c","Name":"deploy","Payload":"djI=","NodeFilter":"","ServiceFilter":"","TagFilter":"","Version":1,"LTime":3}]`
	if !sameJSON(t, out, want) {
		t.Fatalf("stdout %s, want %s", out, want)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].Query != "name=deploy" {
		t.Fatalf("requests %+v", reqs)
	}
	for _, args := range [][]string{{"watch"}, {"watch", "-type", "key"}} {
		if code, _, _ := runCLI(args, map[string]string{"CONSUL_HTTP_ADDR": f.addr()}, ""); code != 1 {
			t.Errorf("%v: code %d, want 1", args, code)
		}
	}
}
