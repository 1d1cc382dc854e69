package structs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// testCertificate returns a self-signed certificate for the common name cn
// and the DNS names sans, and its key, both PEM.
func testCertificate(t *testing.T, key crypto.Signer, cn string, sans ...string) (certPEM, keyPEM string) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, DNSNames: sans,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

func ecKey(t *testing.T) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestGatewayEntriesValidate(t *testing.T) {
	cert, key := testCertificate(t, ecKey(t), "example.com", "*.example.com")
	_, otherKey := testCertificate(t, ecKey(t), "example.com")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // a key too short on purpose: validation must refuse it
	if err != nil {
		t.Fatal(err)
	}
	shortCert, shortKey := testCertificate(t, rsaKey, "example.com")
	badHostCert, badHostKey := testCertificate(t, ecKey(t), "a..b")

	listener := func(mod func(*APIGatewayListener)) *APIGatewayConfigEntry {
		l := APIGatewayListener{Name: "l1", Port: 8443, Protocol: "HTTP", Hostname: "*.example.com"}
		if mod != nil {
			mod(&l)
		}
		return &APIGatewayConfigEntry{Name: "gw", Listeners: []APIGatewayListener{l}}
	}
	remote := func(mod func(*RemoteJWKS)) *JWTProviderConfigEntry {
		r := &RemoteJWKS{URI: "https://example.com/.well-known/jwks.json"}
		if mod != nil {
			mod(r)
		}
		return &JWTProviderConfigEntry{Name: "okta", JSONWebKeySet: &JSONWebKeySet{Remote: r}}
	}
	export := func(c ...ServiceConsumer) *ExportedServicesConfigEntry {
		return &ExportedServicesConfigEntry{Name: "default", Services: []ExportedService{{Name: "db", Consumers: c}}}
	}

	cases := []validateCase{
		{"api-gateway ok", listener(func(l *APIGatewayListener) {
			l.TLS.Certificates = []ResourceReference{{Name: "cert"}}
		}), ""},
		{"api-gateway no name", &APIGatewayConfigEntry{}, "Name is required"},
		{"api-gateway protocol", listener(func(l *APIGatewayListener) { l.Protocol = "grpc" }),
			`Listeners[0]: unsupported listener protocol "grpc", must be one of 'tcp' or 'http'`},
		{"api-gateway port", listener(func(l *APIGatewayListener) { l.Port = 0 }),
			"Listeners[0]: listener port 0 is not in the range 1 to 65535"},
		{"api-gateway hostname", listener(func(l *APIGatewayListener) { l.Hostname = "a..b" }),
			`Listeners[0].Hostname: host "a..b" must be a valid DNS hostname`},
		{"api-gateway certificate kind", listener(func(l *APIGatewayListener) {
			l.TLS.Certificates = []ResourceReference{{Kind: ServiceDefaults, Name: "cert"}}
		}), `Listeners[0].TLS.Certificates[0]: unsupported certificate kind "service-defaults"`},
		{"api-gateway tls version", listener(func(l *APIGatewayListener) { l.TLS.MinVersion = "TLSv9" }),
			`Listeners[0].TLS: TLS version "TLSv9" is not valid`},
		{"api-gateway duplicate listener", &APIGatewayConfigEntry{Name: "gw", Listeners: []APIGatewayListener{
			{Name: "a", Port: 1, Protocol: "tcp"}, {Name: "a", Port: 2, Protocol: "tcp"}}},
			`Listeners[1]: listener name "a" is used by more than one listener`},
		{"api-gateway jwt provider without name", listener(func(l *APIGatewayListener) {
			l.Default = &APIGatewayPolicy{JWT: &IntentionJWTRequirement{Providers: []*IntentionJWTProvider{{}}}}
		}), "Listeners[0].Default.JWT: Providers[0]: Name is required"},

		{"http-route ok", &HTTPRouteConfigEntry{Name: "r", Parents: []ResourceReference{{Name: "gw"}}, Hostnames: []string{"example.com"},
			Rules: []HTTPRouteRule{{
				Matches:  []HTTPMatch{{Method: "get", Path: HTTPPathMatch{Match: "prefix", Value: "/api"}, Headers: []HTTPHeaderMatch{{Match: "exact", Name: "x"}}}},
				Filters:  HTTPFilters{URLRewrite: &URLRewrite{Path: "abc"}},
				Services: []HTTPService{{Name: "api", Weight: 1}},
			}}}, ""},
		{"http-route parent kind", &HTTPRouteConfigEntry{Name: "r", Parents: []ResourceReference{{Kind: IngressGateway, Name: "gw"}}},
			`Parents[0]: unsupported parent kind "ingress-gateway", must be "api-gateway"`},
		{"http-route path", &HTTPRouteConfigEntry{Name: "r", Rules: []HTTPRouteRule{{Matches: []HTTPMatch{{Path: HTTPPathMatch{Match: "exact", Value: "api"}}}}}},
			`Rules[0].Matches[0].Path.Value: "api" must begin with '/'`},
		{"http-route method", &HTTPRouteConfigEntry{Name: "r", Rules: []HTTPRouteRule{{Matches: []HTTPMatch{{Method: "FETCH"}}}}},
			`Rules[0].Matches[0].Method: "FETCH" is not an HTTP method`},
		{"http-route header match", &HTTPRouteConfigEntry{Name: "r", Rules: []HTTPRouteRule{{Matches: []HTTPMatch{{Headers: []HTTPHeaderMatch{{Match: "glob", Name: "x"}}}}}}},
			`Rules[0].Matches[0].Headers[0].Match: "glob" must be one of`},
		{"http-route service name", &HTTPRouteConfigEntry{Name: "r", Rules: []HTTPRouteRule{{Services: []HTTPService{{}}}}},
			"Rules[0].Services[0].Name is required"},
		{"http-route retry status", &HTTPRouteConfigEntry{Name: "r", Rules: []HTTPRouteRule{{Filters: HTTPFilters{RetryFilter: &RetryFilter{RetryOnStatusCodes: []uint32{42}}}}}},
			"Rules[0].Filters.RetryFilter.RetryOnStatusCodes: 42 is not an HTTP status code"},

		{"inline-certificate ok", &InlineCertificateConfigEntry{Name: "c", Certificate: cert, PrivateKey: key}, ""},
		{"inline-certificate no key", &InlineCertificateConfigEntry{Name: "c", Certificate: cert}, "PrivateKey: failed to parse private key PEM"},
		{"inline-certificate no certificate", &InlineCertificateConfigEntry{Name: "c", PrivateKey: key}, "Certificate: failed to parse certificate PEM"},
		{"inline-certificate garbage certificate", &InlineCertificateConfigEntry{Name: "c", PrivateKey: key,
			Certificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("nope")}))}, "Certificate: failed to parse certificate: "},
		{"inline-certificate key mismatch", &InlineCertificateConfigEntry{Name: "c", Certificate: cert, PrivateKey: otherKey},
			"PrivateKey: does not match Certificate"},
		{"inline-certificate short rsa key", &InlineCertificateConfigEntry{Name: "c", Certificate: shortCert, PrivateKey: shortKey},
			"PrivateKey: RSA key length must be at least 2048 bits, not 1024"},
		{"inline-certificate bad host", &InlineCertificateConfigEntry{Name: "c", Certificate: badHostCert, PrivateKey: badHostKey},
			`Certificate: host "a..b" must be a valid DNS hostname`},

		{"jwt-provider remote ok", remote(func(r *RemoteJWKS) {
			r.JWKSCluster = &JWKSCluster{DiscoveryType: "STATIC", TLSCertificates: &JWKSTLSCertificate{TrustedCA: &JWKSTLSCertTrustedCA{Filename: "ca.pem"}}}
		}), ""},
		{"jwt-provider local ok", &JWTProviderConfigEntry{Name: "local", JSONWebKeySet: &JSONWebKeySet{Local: &LocalJWKS{JWKS: "e30="}}}, ""},
		{"jwt-provider no key set", &JWTProviderConfigEntry{Name: "okta"}, "JSONWebKeySet: is required"},
		{"jwt-provider both key sets", &JWTProviderConfigEntry{Name: "okta", JSONWebKeySet: &JSONWebKeySet{Local: &LocalJWKS{Filename: "f"}, Remote: &RemoteJWKS{URI: "https://x"}}},
			"JSONWebKeySet: must set exactly one of Local or Remote"},
		{"jwt-provider local not base64", &JWTProviderConfigEntry{Name: "okta", JSONWebKeySet: &JSONWebKeySet{Local: &LocalJWKS{JWKS: "{not base64"}}},
			"JSONWebKeySet: Local.JWKS: must be base64 encoded"},
		{"jwt-provider remote uri", remote(func(r *RemoteJWKS) { r.URI = "jwks.json" }), `JSONWebKeySet: Remote.URI: "jwks.json" is not a valid URL`},
		{"jwt-provider discovery type", remote(func(r *RemoteJWKS) { r.JWKSCluster = &JWKSCluster{DiscoveryType: "DNS"} }),
			`JSONWebKeySet: Remote.JWKSCluster.DiscoveryType: "DNS" must be one of`},
		{"jwt-provider trusted ca", remote(func(r *RemoteJWKS) {
			r.JWKSCluster = &JWKSCluster{TLSCertificates: &JWKSTLSCertificate{TrustedCA: &JWKSTLSCertTrustedCA{Filename: "a", InlineString: "b"}}}
		}), "JSONWebKeySet: Remote.JWKSCluster.TLSCertificates.TrustedCA: must set exactly one of"},
		{"jwt-provider backoff", remote(func(r *RemoteJWKS) {
			r.RetryPolicy = &JWKSRetryPolicy{RetryPolicyBackOff: &RetryPolicyBackOff{BaseInterval: time.Second, MaxInterval: time.Millisecond}}
		}), "JSONWebKeySet: Remote.RetryPolicy.RetryPolicyBackOff: MaxInterval must not be less than BaseInterval"},
		{"jwt-provider location", &JWTProviderConfigEntry{Name: "okta", JSONWebKeySet: &JSONWebKeySet{Local: &LocalJWKS{Filename: "f"}}, Locations: []*JWTLocation{{}}},
			"Locations[0]: must set exactly one of Header, QueryParam or Cookie"},

		{"exported-services ok", export(ServiceConsumer{Peer: "alpha"}), ""},
		{"exported-services empty", &ExportedServicesConfigEntry{Name: "default"}, ""},
		{"exported-services name", &ExportedServicesConfigEntry{Name: "web"}, `exported-services Name must be "default", the name of the partition, not "web"`},
		{"exported-services no consumers", export(), "Services[0]: must have at least one consumer"},
		{"exported-services two kinds of consumer", export(ServiceConsumer{Peer: "a", SamenessGroup: "b"}),
			"Services[0].Consumers[0]: must set exactly one of Peer, Partition or SamenessGroup"},
		{"exported-services partition", export(ServiceConsumer{Partition: "p"}),
			"Services[0].Consumers[0]: Partition: admin partitions are a Consul Enterprise feature"},
		{"exported-services wildcard peer", export(ServiceConsumer{Peer: "*"}),
			"Services[0].Consumers[0]: exporting to all peers (wildcard) is not supported"},

		{"intentions jwt refused", &ServiceIntentionsConfigEntry{Name: "db", JWT: &IntentionJWTRequirement{Providers: []*IntentionJWTProvider{{Name: "okta"}}},
			Sources: []*SourceIntention{{Name: "web", Action: "allow", Type: IntentionSourceConsul}}},
			"JWT: JWT requirements in intentions are not supported"},
		{"intentions permission jwt refused", &ServiceIntentionsConfigEntry{Name: "db", Sources: []*SourceIntention{{Name: "web", Type: IntentionSourceConsul,
			Permissions: []*IntentionPermission{{Action: "allow", HTTP: &IntentionHTTPPermission{PathPrefix: "/"},
				JWT: &IntentionJWTRequirement{Providers: []*IntentionJWTProvider{{Name: "okta"}}}}}}}},
			"Sources[0].Permissions[0].JWT: JWT requirements in intentions are not supported"},
		{"intentions empty jwt requirement", &ServiceIntentionsConfigEntry{Name: "db", JWT: &IntentionJWTRequirement{},
			Sources: []*SourceIntention{{Name: "web", Action: "allow", Type: IntentionSourceConsul}}}, ""},
	}
	checkValidate(t, cases)
}

// TestGatewayEntriesNormalize: protocols and methods are canonical, parent
// and certificate kinds filled in, and a Status sent by a client dropped.
func TestGatewayEntriesNormalize(t *testing.T) {
	gw := &APIGatewayConfigEntry{Name: "gw", Status: ConfigEntryStatus{Conditions: []Condition{{Type: "Accepted", Status: "True"}}},
		Listeners: []APIGatewayListener{{Protocol: "HTTP", TLS: APIGatewayTLSConfiguration{Certificates: []ResourceReference{{Name: "c"}}}}}}
	if err := gw.Normalize(); err != nil {
		t.Fatal(err)
	}
	if gw.Kind != APIGateway || gw.Status.Conditions != nil || gw.Listeners[0].Protocol != "http" || gw.Listeners[0].TLS.Certificates[0].Kind != InlineCertificate {
		t.Fatalf("normalized gateway %+v", gw)
	}
	r := &HTTPRouteConfigEntry{Name: "r", Status: ConfigEntryStatus{Conditions: []Condition{{Type: "Accepted"}}},
		Parents: []ResourceReference{{Name: "gw"}}, Rules: []HTTPRouteRule{{Matches: []HTTPMatch{{Method: "post"}}}}}
	if err := r.Normalize(); err != nil {
		t.Fatal(err)
	}
	if r.Kind != HTTPRoute || r.Status.Conditions != nil || r.Parents[0].Kind != APIGateway || r.Rules[0].Matches[0].Method != "POST" {
		t.Fatalf("normalized route %+v", r)
	}
}
