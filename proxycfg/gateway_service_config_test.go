package proxycfg

import (
	"fmt"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// TestGatewayServiceConfig: every gateway kind watches its own resolved
// service config (proxy-defaults' access logs reach it that way), is
// delivered without it, and gets a new snapshot when it arrives and
// whenever it changes.
func TestGatewayServiceConfig(t *testing.T) {
	cases := []struct {
		name string
		svc  *structs.NodeService
		// ready sends what the kind needs to be valid.
		ready func(t *testing.T, h *harness)
		// config reads the gateway's own service config off a snapshot.
		config func(s *ConfigSnapshot) (*structs.ServiceConfigResponse, error)
	}{
		{
			name: "ingress gateway",
			svc:  testGateway(structs.ServiceKindIngressGateway, "ingress"),
			ready: func(t *testing.T, h *harness) {
				h.f.gatewayServices.waitSub(t, "ingress", forService("ingress")).send(t, &structs.IndexedGatewayServices{})
			},
			config: func(s *ConfigSnapshot) (*structs.ServiceConfigResponse, error) {
				if s.IngressGateway == nil {
					return nil, fmt.Errorf("no ingress part")
				}
				return s.IngressGateway.ServiceConfig, nil
			},
		},
		{
			name: "terminating gateway",
			svc:  testGateway(structs.ServiceKindTerminatingGateway, "term"),
			ready: func(t *testing.T, h *harness) {
				h.f.gatewayServices.waitSub(t, "term", forService("term")).send(t, &structs.IndexedGatewayServices{Services: []*structs.GatewayService{
					{Gateway: "term", Service: "billing", GatewayKind: structs.ServiceKindTerminatingGateway},
				}})
			},
			config: func(s *ConfigSnapshot) (*structs.ServiceConfigResponse, error) {
				if s.TerminatingGateway == nil {
					return nil, fmt.Errorf("no terminating part")
				}
				return s.TerminatingGateway.ServiceConfig, nil
			},
		},
		{
			name: "mesh gateway",
			svc:  testGateway(structs.ServiceKindMeshGateway, "mesh-gateway"),
			ready: func(t *testing.T, h *harness) {
				h.f.configEntryList.waitSub(t, "resolvers", nil).send(t, &structs.IndexedConfigEntries{Kind: structs.ServiceResolver})
				h.f.serviceList.waitSub(t, "services", nil).send(t, &structs.IndexedServices{Services: map[string][]string{}})
			},
			config: func(s *ConfigSnapshot) (*structs.ServiceConfigResponse, error) {
				if s.MeshGateway == nil {
					return nil, fmt.Errorf("no mesh gateway part")
				}
				return s.MeshGateway.ServiceConfig, nil
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.f.autoBasics()
			gw := tc.svc.Service
			// Linked services' configs answer at once; the gateway's own
			// is pushed by the test.
			h.f.serviceConfig.setRespond(func(r *structs.ServiceConfigRequest) any {
				if r.Name == gw {
					return nil
				}
				return basicSvcConfig
			})
			own := func(r *structs.ServiceConfigRequest) bool { return r.Name == gw }
			_, ch := h.register(tc.svc)
			tc.ready(t, h)

			// Delivered without the config: nothing waits for it.
			waitSnap(t, ch, func(s *ConfigSnapshot) error {
				if c, err := tc.config(s); err != nil || c != nil {
					return fmt.Errorf("service config %+v, %v; want none yet", c, err) //nolint:errorlint // err may be nil here, which %v prints as <nil>
				}
				return nil
			})

			sub := h.f.serviceConfig.waitSub(t, "gateway's own", own)
			if len(sub.req.Upstreams) != 0 || sub.req.Datacenter != "dc1" || sub.req.Token != "token-1" {
				t.Fatalf("service config request %+v", sub.req)
			}
			for i, want := range []*structs.ServiceConfigResponse{
				{Protocol: "tcp", AccessLogs: structs.AccessLogsConfig{Enabled: true}},
				{Protocol: "tcp", AccessLogs: structs.AccessLogsConfig{Enabled: true, Type: structs.StdErrLogSinkType}},
			} {
				sub.send(t, want)
				waitSnap(t, ch, func(s *ConfigSnapshot) error {
					if c, err := tc.config(s); err != nil || c != want {
						return fmt.Errorf("config %d: got %+v, %v", i, c, err) //nolint:errorlint // err may be nil here, which %v prints as <nil>
					}
					return nil
				})
			}
		})
	}
}
