package httpapi

import (
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestCatalogGatewayServices(t *testing.T) {
	linked := func(f *fakeRPC, _ *Config) {
		f.replies[structs.MethodGatewayServices.Name()] = structs.IndexedGatewayServices{
			Services: []*structs.GatewayService{
				{Gateway: "term", Service: "api", GatewayKind: structs.ServiceKindTerminatingGateway,
					CAFile: "ca.pem", SNI: "api.example", AutoHostRewrite: true},
				{Gateway: "term", Service: "db", GatewayKind: structs.ServiceKindTerminatingGateway, FromWildcard: true},
			},
			QueryMeta: meta(12),
		}
	}
	req := structs.ServiceSpecificRequest{ServiceName: "term", QueryOptions: qo()}
	runCases(t, []apiCase{
		{
			name: "Consul's shape: compound names, empty fields left out", path: "/v1/catalog/gateway-services/term", setup: linked,
			wantCode: 200, wantJSON: true, wantHeaders: readHeaders("12"),
			wantBody: `[{"Gateway":{"Name":"term"},"Service":{"Name":"api"},"GatewayKind":"terminating-gateway","CAFile":"ca.pem","SNI":"api.example","AutoHostRewrite":true},` +
				`{"Gateway":{"Name":"term"},"Service":{"Name":"db"},"GatewayKind":"terminating-gateway","FromWildcard":true}]`,
			wantCalls: []rpcCall{{structs.MethodGatewayServices.Name(), req}},
		},
		{
			name: "a gateway without services is an empty list", path: "/v1/catalog/gateway-services/term",
			wantCode: 200, wantBody: "[]", wantJSON: true, anyCalls: true,
		},
		{
			name: "missing gateway name", path: "/v1/catalog/gateway-services/",
			wantCode: 400, wantBody: "Missing gateway name", anyCalls: true,
		},
	})
}
