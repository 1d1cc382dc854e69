package server

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/structs"
)

// TestGatewayAndExportEntries writes, reads, lists and deletes each of the
// kinds an API gateway and exported services use through a real server,
// and checks that invalid ones change nothing.
func TestGatewayAndExportEntries(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	limit := 111
	cases := []struct {
		entry   structs.ConfigEntry
		invalid structs.ConfigEntry
		wantErr string
	}{
		{
			entry: &structs.APIGatewayConfigEntry{Kind: structs.APIGateway, Name: "gw",
				Status:    structs.ConfigEntryStatus{Conditions: []structs.Condition{{Type: "Accepted", Status: "True"}}},
				Listeners: []structs.APIGatewayListener{{Name: "l1", Hostname: "host.com", Port: 3360, Protocol: "http"}}},
			invalid: &structs.APIGatewayConfigEntry{Kind: structs.APIGateway, Name: "gw",
				Listeners: []structs.APIGatewayListener{{Name: "l1", Port: 3360, Protocol: "udp"}}},
			wantErr: "unsupported listener protocol",
		},
		{
			entry: &structs.HTTPRouteConfigEntry{Kind: structs.HTTPRoute, Name: "route1", Parents: []structs.ResourceReference{{Kind: structs.APIGateway, Name: "gw"}},
				Rules: []structs.HTTPRouteRule{{Services: []structs.HTTPService{{Name: "svc1", Limits: &structs.UpstreamLimits{MaxConnections: &limit}}}}}},
			invalid: &structs.HTTPRouteConfigEntry{Kind: structs.HTTPRoute, Name: "route1",
				Rules: []structs.HTTPRouteRule{{Matches: []structs.HTTPMatch{{Path: structs.HTTPPathMatch{Match: "exact", Value: "x"}}}}}},
			wantErr: "must begin with '/'",
		},
		{
			entry: &structs.JWTProviderConfigEntry{Kind: structs.JWTProvider, Name: "okta",
				JSONWebKeySet: &structs.JSONWebKeySet{Local: &structs.LocalJWKS{Filename: "/etc/jwks.json"}}},
			invalid: &structs.JWTProviderConfigEntry{Kind: structs.JWTProvider, Name: "okta"},
			wantErr: "JSONWebKeySet: is required",
		},
		{
			entry: &structs.ExportedServicesConfigEntry{Kind: structs.ExportedServices, Name: "default",
				Services: []structs.ExportedService{{Name: "db", Consumers: []structs.ServiceConsumer{{Peer: "alpha"}}}}},
			invalid: &structs.ExportedServicesConfigEntry{Kind: structs.ExportedServices, Name: "default",
				Services: []structs.ExportedService{{Name: "db"}}},
			wantErr: "must have at least one consumer",
		},
		{
			entry:   &structs.InlineCertificateConfigEntry{Kind: structs.InlineCertificate, Name: "cert"},
			invalid: &structs.InlineCertificateConfigEntry{Kind: structs.InlineCertificate, Name: "cert", Certificate: "x", PrivateKey: "y"},
			wantErr: "PrivateKey: failed to parse private key PEM",
		},
	}
	cases[4].entry.(*structs.InlineCertificateConfigEntry).Certificate, cases[4].entry.(*structs.InlineCertificateConfigEntry).PrivateKey = testServerCertificate(t)

	for _, tc := range cases {
		kind, name := tc.entry.GetKind(), tc.entry.GetName()
		t.Run(kind, func(t *testing.T) {
			if !applyEntry(t, s, structs.ConfigEntryUpsert, structs.CloneConfigEntry(tc.entry)) {
				t.Fatal("upsert = false")
			}
			got, _ := getEntry(t, s, kind, name, false)
			if got == nil || got.GetRaftIndex().ModifyIndex == 0 {
				t.Fatalf("stored %#v", got)
			}
			want := structs.CloneConfigEntry(tc.entry)
			if err := want.Normalize(); err != nil {
				t.Fatal(err)
			}
			*want.GetRaftIndex() = *got.GetRaftIndex()
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
			}
			if gw, ok := got.(*structs.APIGatewayConfigEntry); ok && gw.Status.Conditions != nil {
				t.Fatalf("a client's Status was stored: %+v", gw.Status)
			}

			last := s.fsm.State().LastIndex()
			err := rpcErr(s, structs.MethodConfigEntryApply.Name(), &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert, Entry: tc.invalid}, new(bool))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("invalid write: err = %v, want %q", err, tc.wantErr)
			}
			if s.fsm.State().LastIndex() != last {
				t.Fatal("an invalid write changed the store")
			}

			var list structs.IndexedConfigEntries
			rpc(t, s, structs.MethodConfigEntryList, &structs.ConfigEntryQuery{Kind: kind}, &list)
			if len(list.Entries) != 1 || list.Entries[0].GetName() != name {
				t.Fatalf("list %+v", list.Entries)
			}
			var del structs.ConfigEntryDeleteResponse
			rpc(t, s, structs.MethodConfigEntryDelete, &structs.ConfigEntryRequest{Op: structs.ConfigEntryDelete, Entry: structs.CloneConfigEntry(tc.entry)}, &del)
			if got, _ := getEntry(t, s, kind, name, false); got != nil || !del.Deleted {
				t.Fatalf("after delete: %#v %+v", got, del)
			}
		})
	}
}

// TestIntentionJWTRefused: Trellis cannot verify JWTs, so an intention
// requiring one is refused instead of stored and ignored.
func TestIntentionJWTRefused(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	e := &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: "db",
		JWT:     &structs.IntentionJWTRequirement{Providers: []*structs.IntentionJWTProvider{{Name: "okta"}}},
		Sources: []*structs.SourceIntention{{Name: "web", Action: structs.IntentionActionAllow}}}
	err := rpcErr(s, structs.MethodConfigEntryApply.Name(), &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert, Entry: e}, new(bool))
	if err == nil || !strings.Contains(err.Error(), structs.ErrIntentionJWTUnsupported.Error()) {
		t.Fatalf("err = %v", err)
	}
	if got, _ := getEntry(t, s, structs.ServiceIntentions, "db", false); got != nil {
		t.Fatalf("stored %#v", got)
	}
}

func TestExportedServicesResolved(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	list := func() []structs.ResolvedExportedService {
		var out structs.IndexedExportedServices
		rpc(t, s, structs.MethodExportedServicesList, &structs.ExportedServicesQuery{}, &out)
		return out.Services
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("without an entry: %+v", got)
	}
	for _, svc := range []*structs.NodeService{
		{ID: "web1", Service: "web", Port: 80},
		{ID: "api1", Service: "api", Port: 81},
		{Kind: structs.ServiceKindConnectProxy, ID: "web1-proxy", Service: "web-sidecar-proxy", Port: 21000,
			Proxy: structs.ConnectProxyConfig{DestinationServiceName: "web"}},
	} {
		rpc(t, s, structs.MethodCatalogRegister, &structs.RegisterRequest{Node: "n1", Address: "127.0.0.1", Service: svc}, new(struct{}))
	}
	applyEntry(t, s, structs.ConfigEntryUpsert, &structs.ExportedServicesConfigEntry{Kind: structs.ExportedServices, Name: "default",
		Services: []structs.ExportedService{
			{Name: "db", Consumers: []structs.ServiceConsumer{{Peer: "beta"}}},
			{Name: "*", Consumers: []structs.ServiceConsumer{{Peer: "alpha"}}},
			{Name: "web", Consumers: []structs.ServiceConsumer{{Peer: "gamma"}, {Peer: "alpha"}}},
		}})
	want := []structs.ResolvedExportedService{
		{Service: "api", Consumers: structs.ResolvedConsumers{Peers: []string{"alpha"}}},
		{Service: "db", Consumers: structs.ResolvedConsumers{Peers: []string{"beta"}}},
		{Service: "web", Consumers: structs.ResolvedConsumers{Peers: []string{"alpha", "gamma"}}},
	}
	if got := list(); !reflect.DeepEqual(got, want) {
		t.Fatalf("resolved\n got %+v\nwant %+v", got, want)
	}
}

// testServerCertificate returns a certificate and its key, both PEM: a
// root of the built-in CA serves as well as any.
func testServerCertificate(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, keyPEM, err := ca.GenerateKey("ec", 256)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err = ca.NewRootCert(ca.RootRequest{ClusterID: "11111111-2222-3333-4444-555555555555", Key: key, Serial: 1, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}
