package agent

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestPreparedQueryDNS: a -dev agent answers <query>.query.consul by
// executing the prepared query stored through /v1/query: by name, by a
// template's prefix, and NXDOMAIN for a name no query answers.
func TestPreparedQueryDNS(t *testing.T) {
	a, url, _ := devAgent(t)
	waitFor(t, "a leader", func() bool {
		code, body := get(t, url+"/v1/status/leader")
		return code == 200 && body != `""`
	})
	put := func(method, path, body string) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
	}
	put(http.MethodPut, "/v1/catalog/register", `{"Node":"web-node","Address":"10.9.0.1","Service":{"Service":"web","Port":80}}`)
	put(http.MethodPut, "/v1/catalog/register", `{"Node":"api-node","Address":"10.9.0.2","Service":{"Service":"api","Port":81}}`)
	put(http.MethodPost, "/v1/query", `{"Name":"web-q","Service":{"Service":"web"},"DNS":{"TTL":"15s"}}`)
	put(http.MethodPost, "/v1/query", `{"Name":"svc-","Template":{"Type":"name_prefix_match"},"Service":{"Service":"${name.suffix}"}}`)
	for _, tc := range []struct {
		name  string
		rcode int
		want  []string
	}{
		{"web-q.query.consul.", dns.RcodeSuccess, []string{"web-q.query.consul.\t15\tIN\tA\t10.9.0.1"}},
		{"svc-api.query.consul.", dns.RcodeSuccess, []string{"svc-api.query.consul.\t0\tIN\tA\t10.9.0.2"}},
		{"nope.query.consul.", dns.RcodeNameError, nil},
	} {
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		r, _, err := c.Exchange(new(dns.Msg).SetQuestion(tc.name, dns.TypeA), a.rc.DNSListenAddrs()[0])
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, rr := range r.Answer {
			got = append(got, rr.String())
		}
		if r.Rcode != tc.rcode || !slices.Equal(got, tc.want) {
			t.Fatalf("%s: rcode %d answer %q, want %d %q", tc.name, r.Rcode, got, tc.rcode, tc.want)
		}
	}
}
