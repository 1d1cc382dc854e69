package httpapi

import (
	"net/http"

	"github.com/trellis-mesh/trellis/structs"
)

// catalogGatewayServices handles GET /v1/catalog/gateway-services/<gateway>:
// the services an ingress or terminating gateway fronts, wildcards
// expanded. A gateway without a config entry has none (200 []), as in
// Consul.
func (s *Server) catalogGatewayServices(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.ServiceSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.ServiceName = pathSuffix(r, "/v1/catalog/gateway-services/")
	if args.ServiceName == "" {
		return nil, badRequest("Missing gateway name")
	}
	var out structs.IndexedGatewayServices
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodGatewayServices.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	list := make([]gatewayServiceJSON, 0, len(out.Services))
	for _, gs := range out.Services {
		if gs == nil {
			continue
		}
		list = append(list, gatewayServiceJSON{
			Gateway: compoundName{Name: gs.Gateway}, Service: compoundName{Name: gs.Service},
			GatewayKind: gs.GatewayKind, Port: gs.Port, Protocol: gs.Protocol, Hosts: gs.Hosts,
			CAFile: gs.CAFile, CertFile: gs.CertFile, KeyFile: gs.KeyFile, SNI: gs.SNI,
			FromWildcard: gs.FromWildcard, AutoHostRewrite: gs.AutoHostRewrite,
		})
	}
	return list, nil
}

// gatewayServiceJSON is Consul's GatewayService on the wire: the gateway
// and the service as compound names, the rest left out when empty.
type gatewayServiceJSON struct {
	Gateway         compoundName
	Service         compoundName
	GatewayKind     structs.ServiceKind
	Port            int      `json:",omitempty"`
	Protocol        string   `json:",omitempty"`
	Hosts           []string `json:",omitempty"`
	CAFile          string   `json:",omitempty"`
	CertFile        string   `json:",omitempty"`
	KeyFile         string   `json:",omitempty"`
	SNI             string   `json:",omitempty"`
	FromWildcard    bool     `json:",omitempty"`
	AutoHostRewrite bool     `json:",omitempty"`
}

// compoundName is Consul's ServiceName: in Consul CE, the name alone
// (namespace and partition are Enterprise features and left out).
type compoundName struct {
	Name string
}
