package state

import (
	"reflect"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// TestServiceUsage: names and instances are counted as Consul's usage
// counts them; the consul service is an instance but not billable, and
// proxies and gateways are counted by kind.
func TestServiceUsage(t *testing.T) {
	s := NewStore()
	registerNode(t, s, 1, "srv")
	registerNode(t, s, 2, "n1")
	svcs := []struct {
		node string
		svc  structs.NodeService
	}{
		{"srv", structs.NodeService{ID: structs.ConsulServiceID, Service: structs.ConsulServiceName}},
		{"n1", structs.NodeService{ID: "redis1", Service: "redis"}},
		{"n1", structs.NodeService{ID: "redis2", Service: "redis"}},
		{"n1", structs.NodeService{ID: "p1", Service: "proxy", Kind: structs.ServiceKindConnectProxy, Proxy: structs.ConnectProxyConfig{DestinationServiceName: "redis"}}},
		{"n1", structs.NodeService{ID: "gw", Service: "gw", Kind: structs.ServiceKindMeshGateway}},
		{"n1", structs.NodeService{ID: "web", Service: "web", Connect: structs.ServiceConnect{Native: true}}},
	}
	for i, e := range svcs {
		must(t, s.EnsureService(uint64(10+i), e.node, &e.svc))
	}
	idx, u, err := s.ServiceUsage(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := structs.ServiceUsage{
		Nodes: 2, Services: 5, ServiceInstances: 6, BillableServiceInstances: 3,
		ConnectServiceInstances: map[string]int{
			"api-gateway": 0, "connect-native": 1, "connect-proxy": 1, "ingress-gateway": 0,
			"mesh-gateway": 1, "terminating-gateway": 0,
		},
	}
	if !reflect.DeepEqual(u, want) || idx != 15 {
		t.Fatalf("usage %+v at %d, want %+v at 15", u, idx, want)
	}
}
