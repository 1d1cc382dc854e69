package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/structs"
)

// fakeLeafCerts answers leaf requests with a canned certificate and
// records what it was asked.
type fakeLeafCerts struct {
	mu       sync.Mutex
	cert     *structs.IssuedCert
	err      error
	service  string
	minIndex uint64
	wait     time.Duration
	meta     LeafMeta
}

func (f *fakeLeafCerts) GetWithMeta(_ context.Context, service, _ string, minIndex uint64, wait time.Duration) (*structs.IssuedCert, LeafMeta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.service, f.minIndex, f.wait = service, minIndex, wait
	return f.cert, f.meta, f.err
}

// denyAuthorizer refuses everything, naming the client.
type denyAuthorizer struct{}

func (denyAuthorizer) ConnectAuthorize(_ context.Context, target string, client *connect.SpiffeIDService, serial string) (bool, string, error) {
	return false, "denied " + client.Service + " -> " + target + " #" + serial, nil
}

func TestConnectCARootsEndpoint(t *testing.T) {
	nb := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	roots := structs.IndexedCARoots{
		ActiveRootID: "aa:bb", TrustDomain: "cid.consul",
		Roots: structs.CARoots{
			{ID: "11:22", Name: "Consul CA Root Cert", SerialNumber: 1, SigningKeyID: "01", ExternalTrustDomain: "cid",
				NotBefore: nb, NotAfter: nb, RootCert: "OLD\n", RotatedOutAt: nb, PrivateKeyType: "ec", PrivateKeyBits: 256,
				RaftIndex: structs.RaftIndex{CreateIndex: 5, ModifyIndex: 9}},
			{ID: "aa:bb", Name: "Consul CA Root Cert", SerialNumber: 2, SigningKeyID: "02", ExternalTrustDomain: "cid",
				NotBefore: nb, NotAfter: nb, RootCert: "NEW\n", IntermediateCerts: []string{"CROSS\n"}, Active: true,
				PrivateKeyType: "rsa", PrivateKeyBits: 2048, RaftIndex: structs.RaftIndex{CreateIndex: 9, ModifyIndex: 9}},
		},
		QueryMeta: meta(9),
	}
	withRoots := func(f *fakeRPC, _ *Config) { f.replies[structs.MethodConnectCARoots.Name()] = roots }
	wantJSON := `{"ActiveRootID":"aa:bb","TrustDomain":"cid.consul","Roots":[
		{"ID":"11:22","Name":"Consul CA Root Cert","SerialNumber":1,"SigningKeyID":"01","ExternalTrustDomain":"cid",
		 "NotBefore":"2026-01-02T03:04:05Z","NotAfter":"2026-01-02T03:04:05Z","RootCert":"OLD\n","IntermediateCerts":null,
		 "Active":false,"PrivateKeyType":"ec","PrivateKeyBits":256,"CreateIndex":5,"ModifyIndex":9},
		{"ID":"aa:bb","Name":"Consul CA Root Cert","SerialNumber":2,"SigningKeyID":"02","ExternalTrustDomain":"cid",
		 "NotBefore":"2026-01-02T03:04:05Z","NotAfter":"2026-01-02T03:04:05Z","RootCert":"NEW\n","IntermediateCerts":["CROSS\n"],
		 "Active":true,"PrivateKeyType":"rsa","PrivateKeyBits":2048,"CreateIndex":9,"ModifyIndex":9}]}`
	call := func(q structs.QueryOptions) []rpcCall {
		return []rpcCall{{structs.MethodConnectCARoots.Name(), structs.DCSpecificRequest{QueryOptions: q}}}
	}
	runCases(t, []apiCase{
		{
			name: "roots", path: "/v1/connect/ca/roots?index=3&wait=1s", setup: withRoots,
			wantCode: 200, wantJSON: true, wantBody: wantJSON, wantHeaders: readHeaders("9"),
			wantCalls: call(structs.QueryOptions{Datacenter: testDC, MinQueryIndex: 3, MaxQueryTime: time.Second}),
		},
		{
			name: "agent roots", path: "/v1/agent/connect/ca/roots", setup: withRoots,
			wantCode: 200, wantJSON: true, wantBody: wantJSON, wantHeaders: readHeaders("9"), wantCalls: call(qo()),
		},
		{
			name: "pem chain", path: "/v1/connect/ca/roots?pem=true", setup: withRoots,
			wantCode: 200, wantBody: "OLD\nNEW\nCROSS\n",
			wantHeaders: map[string]string{"Content-Type": "application/pem-certificate-chain", "X-Consul-Index": "9"},
			wantCalls:   call(qo()),
		},
		{
			name: "bad pem flag", path: "/v1/connect/ca/roots?pem=maybe",
			wantCode: 400, wantBody: "The 'pem' query parameter must be a boolean value",
		},
		{
			name: "no roots yet is an empty list", path: "/v1/connect/ca/roots",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodConnectCARoots.Name()] = structs.IndexedCARoots{QueryMeta: meta(0)}
			},
			wantCode: 200, wantJSON: true, wantBody: `{"ActiveRootID":"","TrustDomain":"","Roots":[]}`,
			wantHeaders: map[string]string{"X-Consul-Index": "1"}, wantCalls: call(qo()),
		},
		{
			name: "not allowed", method: http.MethodPut, path: "/v1/connect/ca/roots",
			wantCode: 405, wantBody: "method PUT not allowed", wantHeaders: map[string]string{"Allow": "OPTIONS,GET"},
		},
	})
}

func TestConnectCAConfigurationEndpoint(t *testing.T) {
	stored := structs.CAConfiguration{ClusterID: "secret-cluster", Provider: "consul",
		Config:    map[string]interface{}{"LeafCertTTL": "72h", "PrivateKeyBits": 256},
		RaftIndex: structs.RaftIndex{CreateIndex: 5, ModifyIndex: 7}}
	setCall := func(cfg structs.CAConfiguration) []rpcCall {
		return []rpcCall{{structs.MethodConnectCAConfigurationSet.Name(), structs.CARequest{Config: &cfg, WriteRequest: wr()}}}
	}
	runCases(t, []apiCase{
		{
			name: "get", path: "/v1/connect/ca/configuration",
			setup:    func(f *fakeRPC, _ *Config) { f.replies[structs.MethodConnectCAConfigurationGet.Name()] = stored },
			wantCode: 200, wantJSON: true,
			wantBody: `{"Provider":"consul","Config":{"LeafCertTTL":"72h","PrivateKeyBits":256},"State":null,
				"ForceWithoutCrossSigning":false,"CreateIndex":5,"ModifyIndex":7}`,
			wantCalls: []rpcCall{{structs.MethodConnectCAConfigurationGet.Name(), structs.DCSpecificRequest{QueryOptions: qo()}}},
		},
		{
			name: "put", method: http.MethodPut, path: "/v1/connect/ca/configuration",
			body:     `{"Provider":"consul","Config":{"PrivateKeyType":"rsa","PrivateKeyBits":2048},"force_without_cross_signing":true}`,
			wantCode: 200, wantBody: "",
			wantCalls: setCall(structs.CAConfiguration{Provider: "consul", ForceWithoutCrossSigning: true,
				Config: map[string]interface{}{"PrivateKeyType": "rsa", "PrivateKeyBits": 2048.0}}),
		},
		{
			name: "bad body", method: http.MethodPut, path: "/v1/connect/ca/configuration", body: `{"Config":7}`,
			wantCode: 400, skipBody: true,
			check: func(t *testing.T, rec *httptest.ResponseRecorder, _ []rpcCall) {
				if b := rec.Body.String(); len(b) < 22 || b[:22] != "Request decode failed:" {
					t.Errorf("body %q", b)
				}
			},
		},
		{
			name: "bad cas", method: http.MethodPut, path: "/v1/connect/ca/configuration?cas=x", body: `{}`,
			wantCode: 400, skipBody: true,
		},
		{
			name: "state is read-only", method: http.MethodPut, path: "/v1/connect/ca/configuration",
			body: `{"Provider":"consul","State":{"a":"b"}}`,
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[structs.MethodConnectCAConfigurationSet.Name()] = structs.ErrCAStateReadOnly
			},
			wantCode: 400, wantBody: "Provider State is read-only. It must be omitted or identical to the current value", anyCalls: true,
		},
		{
			name: "server validation errors are 500", method: http.MethodPut, path: "/v1/connect/ca/configuration",
			body: `{"Provider":"consul","Config":{"LeafCertTTL":"1m"}}`,
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[structs.MethodConnectCAConfigurationSet.Name()] = errors.New("error configuring provider: leaf cert TTL must be greater or equal than 1h0m0s")
			},
			wantCode: 500, wantBody: "error configuring provider: leaf cert TTL must be greater or equal than 1h0m0s", anyCalls: true,
		},
		{
			name: "delete not allowed", method: http.MethodDelete, path: "/v1/connect/ca/configuration",
			wantCode: 405, wantBody: "method DELETE not allowed", wantHeaders: map[string]string{"Allow": "OPTIONS,GET,PUT"},
		},
	})
}

func TestAgentConnectCALeafEndpoint(t *testing.T) {
	va := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cert := &structs.IssuedCert{SerialNumber: "0a", CertPEM: "CERT", PrivateKeyPEM: "KEY", Service: "web",
		ServiceURI: "spiffe://cid.consul/ns/default/dc/dc1/svc/web", ValidAfter: va, ValidBefore: va.Add(time.Hour),
		RaftIndex: structs.RaftIndex{CreateIndex: 12, ModifyIndex: 12}}
	leaf := &fakeLeafCerts{cert: cert}
	with := func(l LeafCerts) func(*fakeRPC, *Config) {
		return func(_ *fakeRPC, c *Config) { c.LeafCerts = l }
	}
	runCases(t, []apiCase{
		{
			name: "leaf", path: "/v1/agent/connect/ca/leaf/web?index=11&wait=2s", setup: with(leaf),
			wantCode: 200, wantJSON: true,
			wantBody: `{"SerialNumber":"0a","CertPEM":"CERT","PrivateKeyPEM":"KEY","Service":"web",
				"ServiceURI":"spiffe://cid.consul/ns/default/dc/dc1/svc/web","ValidAfter":"2026-01-02T03:04:05Z",
				"ValidBefore":"2026-01-02T04:04:05Z","CreateIndex":12,"ModifyIndex":12}`,
			wantHeaders: map[string]string{"X-Consul-Index": "12", "Content-Type": "application/json", "X-Cache": "MISS"},
			check: func(t *testing.T, w *httptest.ResponseRecorder, _ []rpcCall) {
				if leaf.service != "web" || leaf.minIndex != 11 || leaf.wait != 2*time.Second {
					t.Errorf("manager asked for %q %d %s", leaf.service, leaf.minIndex, leaf.wait)
				}
				if age := w.Header().Values("Age"); len(age) != 0 {
					t.Errorf("a miss has Age %q", age)
				}
			},
		},
		{
			name: "a held leaf is a hit with its age", path: "/v1/agent/connect/ca/leaf/web",
			setup:    with(&fakeLeafCerts{cert: cert, meta: LeafMeta{Hit: true, Age: 90*time.Second + 700*time.Millisecond}}),
			wantCode: 200, skipBody: true, wantHeaders: map[string]string{"X-Cache": "HIT", "Age": "90"},
		},
		{
			name: "rate limited is 429", path: "/v1/agent/connect/ca/leaf/web", setup: with(&fakeLeafCerts{err: structs.ErrRateLimited}),
			wantCode: 429, wantBody: structs.ErrRateLimited.Error(),
		},
		{name: "no service", path: "/v1/agent/connect/ca/leaf/", setup: with(leaf), wantCode: 400, wantBody: "Missing service name"},
		{name: "no manager", path: "/v1/agent/connect/ca/leaf/web", wantCode: 500, wantBody: errLeafUnavailable.Error()},
		{name: "bad index", path: "/v1/agent/connect/ca/leaf/web?index=x", setup: with(leaf), wantCode: 400, wantBody: "Invalid index"},
	})
}

func TestAgentConnectAuthorizeEndpoint(t *testing.T) {
	post := func(name, body string, code int, want string, setup func(*fakeRPC, *Config)) apiCase {
		c := apiCase{name: name, method: http.MethodPost, path: "/v1/agent/connect/authorize", body: body,
			wantCode: code, wantBody: want, setup: setup}
		if code == 200 {
			c.wantJSON = true
		}
		return c
	}
	client := `"ClientCertURI":"spiffe://cid.consul/ns/default/dc/dc1/svc/web"`
	runCases(t, []apiCase{
		post("default allow", `{"Target":"db",`+client+`}`, 200, `{"Authorized":true,"Reason":"ACLs disabled, access is allowed by default"}`, nil),
		post("custom authorizer", `{"Target":"db",`+client+`,"ClientCertSerial":"0a"}`, 200, `{"Authorized":false,"Reason":"denied web -> db #0a"}`,
			func(_ *fakeRPC, c *Config) { c.ConnectAuthorizer = denyAuthorizer{} }),
		post("no target", `{`+client+`}`, 400, "Target service must be specified", nil),
		post("bad uri", `{"Target":"db","ClientCertURI":"http://x"}`, 400, "ClientCertURI not a valid Connect identifier", nil),
		post("not a service", `{"Target":"db","ClientCertURI":"spiffe://cid.consul"}`, 400, "ClientCertURI not a valid Service identifier", nil),
		{name: "get not allowed", path: "/v1/agent/connect/authorize", wantCode: 405, wantBody: "method GET not allowed"},
	})
}
