package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// FuzzConfigApply sends arbitrary bodies to PUT /v1/config: what the
// decoder refuses must be a 400 "Request decoding failed: " that never
// reaches the backend; what it accepts reaches it once, as a valid kind.
func FuzzConfigApply(f *testing.F) {
	for _, seed := range []string{
		`{"Kind":"service-defaults","Name":"web","Protocol":"http"}`,
		`{"Kind":"service-router","Name":"web","Routes":[{"Match":{"HTTP":{"PathPrefix":"/"}}}]}`,
		`{"Kind":"service-resolver","Name":"db","ConnectTimeout":"5s"}`,
		`{"Kind":"nope"}`, `{"Kind":"mesh","Bogus":1}`, `{`, ``, `[]`, `{"Kind":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, decodeErr := structs.DecodeConfigEntryJSON(body)
		rec, calls := fuzzRequest(t, http.MethodPut, "/v1/config", "", body, func(fr *fakeRPC, _ *Config) {
			fr.replies[structs.MethodConfigEntryApply.Name()] = true
		})
		if decodeErr != nil {
			if len(calls) != 0 || rec.Code != http.StatusBadRequest || !strings.HasPrefix(rec.Body.String(), "Request decoding failed: ") {
				t.Fatalf("undecodable body: %d %q, %d calls", rec.Code, rec.Body.String(), len(calls))
			}
			return
		}
		if rec.Code != http.StatusOK || len(calls) != 1 {
			t.Fatalf("decodable body: %d %q, %d calls", rec.Code, rec.Body.String(), len(calls))
		}
		req := calls[0].Args.(structs.ConfigEntryRequest)
		if req.Entry == nil || !structs.ValidConfigEntryKind(req.Entry.GetKind()) {
			t.Fatalf("backend got %+v", req)
		}
	})
}
