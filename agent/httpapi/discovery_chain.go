package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// discoveryChainResponse is the body of /v1/discovery-chain/<service>.
type discoveryChainResponse struct {
	Chain *structs.CompiledDiscoveryChain
}

// discoveryChainOverrides is the optional POST body: overrides for the
// compilation, in CamelCase or snake_case.
type discoveryChainOverrides struct {
	OverrideMeshGateway    structs.MeshGatewayConfig
	OverrideProtocol       string
	OverrideConnectTimeout time.Duration
}

// discoveryChain serves GET and POST /v1/discovery-chain/<service>
// (?compile-dc= picks the datacenter to compile for), blocking.
func (s *Server) discoveryChain(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DiscoveryChainRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.Name = pathSuffix(r, "/v1/discovery-chain/")
	if args.Name == "" {
		return nil, badRequest("Missing chain name")
	}
	args.EvaluateInDatacenter = r.URL.Query().Get("compile-dc")
	if r.Method == http.MethodPost {
		body, err := readBody(r, maxJSONBody)
		var o discoveryChainOverrides
		if err == nil {
			o, err = decodeDiscoveryChainOverrides(body)
		}
		if err != nil {
			return nil, badRequest(fmt.Sprintf("Request decoding failed: %v", err))
		}
		switch o.OverrideMeshGateway.Mode {
		case "", "none", "local", "remote":
		default:
			return nil, badRequest("Invalid OverrideMeshGateway.Mode parameter")
		}
		args.OverrideMeshGateway = o.OverrideMeshGateway
		args.OverrideProtocol = o.OverrideProtocol
		args.OverrideConnectTimeout = o.OverrideConnectTimeout
	}
	var out structs.DiscoveryChainResponse
	if err := structs.MethodDiscoveryChainGet.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	return discoveryChainResponse{Chain: out.Chain}, nil
}

// decodeDiscoveryChainOverrides reads the POST body weakly, as Consul does:
// keys in any case or snake_case, the timeout as a duration string or
// nanoseconds, the protocol as any scalar. An empty body is no overrides.
func decodeDiscoveryChainOverrides(body []byte) (discoveryChainOverrides, error) {
	var o discoveryChainOverrides
	if len(bytes.TrimSpace(body)) == 0 {
		return o, nil
	}
	var raw map[string]interface{}
	if err := decodeJSON(body, &raw); err != nil {
		return o, err
	}
	for k, v := range raw {
		switch strings.ToLower(strings.ReplaceAll(k, "_", "")) {
		case "overrideprotocol":
			switch p := v.(type) {
			case string, float64, bool:
				o.OverrideProtocol = fmt.Sprint(p)
			case nil:
			default:
				return o, fmt.Errorf("OverrideProtocol: invalid type %T", v)
			}
		case "overrideconnecttimeout":
			switch d := v.(type) {
			case string:
				t, err := time.ParseDuration(d)
				if err != nil {
					return o, err
				}
				o.OverrideConnectTimeout = t
			case float64:
				o.OverrideConnectTimeout = time.Duration(d)
			case nil:
			default:
				return o, fmt.Errorf("OverrideConnectTimeout: invalid type %T", v)
			}
		case "overridemeshgateway":
			if v == nil {
				continue
			}
			m, ok := v.(map[string]interface{})
			if !ok {
				return o, errors.New("OverrideMeshGateway: expected an object")
			}
			for mk, mv := range m {
				if strings.EqualFold(mk, "mode") && mv != nil {
					o.OverrideMeshGateway.Mode = fmt.Sprint(mv)
				}
			}
		}
	}
	return o, nil
}
