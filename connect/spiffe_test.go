package connect

import (
	"errors"
	"reflect"
	"testing"
)

func TestServiceIDFormatAndParse(t *testing.T) {
	td := TrustDomain("11111111-2222-3333-4444-555555555555")
	if td != "11111111-2222-3333-4444-555555555555.consul" {
		t.Fatalf("trust domain %q", td)
	}
	cases := []struct {
		name string
		id   *SpiffeIDService
		want string
	}{
		{"plain", NewServiceID(td, "dc1", "web"), "spiffe://" + td + "/ns/default/dc/dc1/svc/web"},
		{"escaped", NewServiceID(td, "dc1", "a b"), "spiffe://" + td + "/ns/default/dc/dc1/svc/a%20b"},
		{"partition", &SpiffeIDService{Host: td, Partition: "p1", Namespace: "default", Datacenter: "dc2", Service: "db"},
			"spiffe://" + td + "/ap/p1/ns/default/dc/dc2/svc/db"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.id.String(); got != tc.want {
				t.Fatalf("URI = %q, want %q", got, tc.want)
			}
			parsed, err := ParseCertURIFromString(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(parsed, tc.id) {
				t.Fatalf("parsed %+v, want %+v", parsed, tc.id)
			}
		})
	}
}

func TestParseCertURI(t *testing.T) {
	cases := []struct {
		in      string
		want    CertURI
		wantErr bool
	}{
		{in: "spiffe://abc.consul", want: &SpiffeIDSigning{ClusterID: "abc", Domain: "consul"}},
		{in: "spiffe://abc.consul/ns/default/dc/dc1/svc/web", want: &SpiffeIDService{Host: "abc.consul", Namespace: "default", Datacenter: "dc1", Service: "web"}},
		{in: "https://abc.consul/ns/default/dc/dc1/svc/web", wantErr: true},
		{in: "spiffe://abc.consul/ns/default/dc/dc1/svc/", wantErr: true},
		{in: "spiffe://abc.consul/agent/client/dc/dc1/id/x", want: &SpiffeIDAgent{Host: "abc.consul", Datacenter: "dc1", Agent: "x"}},
		{in: "spiffe://abc.consul/agent/server/dc/dc1/id/x", wantErr: true},
		{in: "spiffe://nodot", wantErr: true},
		{in: "spiffe://abc.consul/ns/default/dc/dc1/svc/a%2Fb", want: &SpiffeIDService{Host: "abc.consul", Namespace: "default", Datacenter: "dc1", Service: "a/b"}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCertURIFromString(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidSpiffeID) {
					t.Fatalf("got %+v, %v; want ErrInvalidSpiffeID", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestSigningIDCanSign(t *testing.T) {
	s := NewSigningID("abc")
	if s.URI().String() != "spiffe://abc.consul" || s.Host() != "abc.consul" {
		t.Fatalf("signing URI %s", s.URI())
	}
	cases := []struct {
		id   CertURI
		want bool
	}{
		{NewServiceID("abc.consul", "dc1", "web"), true},
		{NewServiceID("ABC.consul", "dc1", "web"), true},
		{NewServiceID("other.consul", "dc1", "web"), false},
		{NewSigningID("abc"), false},
	}
	for _, tc := range cases {
		if got := s.CanSign(tc.id); got != tc.want {
			t.Errorf("CanSign(%s) = %v", tc.id.URI(), got)
		}
	}
}

func TestHexString(t *testing.T) {
	if got := HexString([]byte{0x0a, 0xff, 0x10}); got != "0a:ff:10" {
		t.Fatalf("HexString = %q", got)
	}
	if HexString(nil) != "" {
		t.Fatal("empty input")
	}
}
