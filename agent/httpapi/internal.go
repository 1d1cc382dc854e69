package httpapi

import (
	"net/http"

	"github.com/trellis-mesh/trellis/structs"
)

// internalServiceVirtualIP is PUT /v1/internal/service-virtual-ip: it sets
// a service's manual virtual IPs (consul/api's AssignServiceVirtualIP).
// The answer says whether the service has a virtual IP assignment (only
// then are the IPs set) and which services lost one of them.
func (s *Server) internalServiceVirtualIP(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.AssignServiceManualVIPsRequest
	if err := decodeRequest(r, &args); err != nil {
		return nil, err
	}
	args.Datacenter = s.parseDC(r)
	args.Token = parseToken(r)
	var out structs.AssignServiceManualVIPsResponse
	if err := structs.MethodInternalAssignManualServiceVIPs.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return out, nil
}
