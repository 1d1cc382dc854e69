package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type fakeProxyStatus map[string]any

func (f fakeProxyStatus) ProxyStatus(id string) any {
	if v, ok := f[id]; ok {
		return v
	}
	return []any{}
}

func TestProxyStatusRoute(t *testing.T) {
	srv, err := New(Config{RPC: &fakeRPC{}, NodeName: testNode, Datacenter: testDC,
		ProxyStatus: fakeProxyStatus{"web-sidecar-proxy": []map[string]string{{"State": "waiting"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/v1/agent/proxy-status/web-sidecar-proxy", 200, `[{"State":"waiting"}]`},
		{"/v1/agent/proxy-status/unknown", 200, `[]`},
		{"/v1/agent/proxy-status/", 400, "Missing proxy ID"},
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s: %d %q, want %d %q", tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
}
