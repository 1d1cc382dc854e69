package query

import (
	"maps"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ResolveServiceConfig reads the global proxy-defaults entry and the
// service-defaults entry of req.Name and merges them (MergeServiceConfig)
// for the upstreams req.Upstreams names. It wakes when either entry is
// written or deleted.
func ResolveServiceConfig(ws memdb.WatchSet, st *state.Store, req *structs.ServiceConfigRequest) (*structs.ServiceConfigResponse, error) {
	if req.Name == "" {
		return nil, ErrMissingName
	}
	pIdx, pe, err := st.ConfigEntry(ws, structs.ProxyDefaults, structs.ProxyConfigGlobal)
	if err != nil {
		return nil, err
	}
	sIdx, se, err := st.ConfigEntry(ws, structs.ServiceDefaults, req.Name)
	if err != nil {
		return nil, err
	}
	pd, _ := pe.(*structs.ProxyConfigEntry)
	sd, _ := se.(*structs.ServiceConfigEntry)
	out := MergeServiceConfig(pd, sd, req.Upstreams)
	out.Index = max(pIdx, sIdx)
	return out, nil
}

// MergeServiceConfig computes what structs.ServiceConfigResponse
// documents from the global proxy-defaults entry (pd) and the service's
// service-defaults entry (sd), either of which may be nil: the service
// entry's settings win over the global ones where set, the protocol
// defaults to tcp, and every upstream in upstreams (and every upstream the
// service entry overrides) gets the entry's upstream defaults overlaid
// with its override. The result shares nothing mutable with pd and sd
// beyond what they point to, which it treats as read-only.
func MergeServiceConfig(pd *structs.ProxyConfigEntry, sd *structs.ServiceConfigEntry, upstreams []string) *structs.ServiceConfigResponse {
	out := &structs.ServiceConfigResponse{Protocol: structs.DefaultServiceProtocol}
	if pd != nil {
		if len(pd.Config) > 0 {
			out.ProxyConfig = maps.Clone(pd.Config)
		}
		if p, ok := pd.Config["protocol"].(string); ok && p != "" {
			out.Protocol = strings.ToLower(p)
		}
		out.Mode = pd.Mode
		out.TransparentProxy = pd.TransparentProxy
		out.MutualTLSMode = pd.MutualTLSMode
		out.MeshGateway = pd.MeshGateway
		out.Expose = pd.Expose
		out.AccessLogs = pd.AccessLogs
	}
	if sd == nil {
		return out
	}
	if sd.Protocol != "" {
		out.Protocol = sd.Protocol
		if out.ProxyConfig == nil {
			out.ProxyConfig = make(map[string]any, 1)
		}
		out.ProxyConfig["protocol"] = sd.Protocol
	}
	if sd.Mode != structs.ProxyModeDefault {
		out.Mode = sd.Mode
	}
	if sd.TransparentProxy != (structs.TransparentProxyConfig{}) {
		out.TransparentProxy = sd.TransparentProxy
	}
	if sd.MutualTLSMode != structs.MutualTLSModeDefault {
		out.MutualTLSMode = sd.MutualTLSMode
	}
	if sd.MeshGateway.Mode != "" {
		out.MeshGateway = sd.MeshGateway
	}
	// As Consul: Checks is ORed, and service-defaults' paths replace
	// proxy-defaults' only when it lists some.
	if sd.Expose.Checks {
		out.Expose.Checks = true
	}
	if len(sd.Expose.Paths) > 0 {
		out.Expose.Paths = sd.Expose.Paths
	}
	uc := sd.UpstreamConfig
	if uc == nil {
		return out
	}
	out.UpstreamDefaults = uc.Defaults
	overrides := make(map[string]*structs.UpstreamConfig, len(uc.Overrides))
	for _, o := range uc.Overrides {
		if o != nil && o.Name != "" {
			overrides[o.Name] = o
		}
	}
	names := make(map[string]bool, len(upstreams)+len(overrides))
	for _, n := range upstreams {
		names[n] = true
	}
	for n := range overrides {
		names[n] = true
	}
	for n := range names {
		if merged := mergeUpstream(uc.Defaults, overrides[n], n); merged != nil {
			if out.UpstreamConfigs == nil {
				out.UpstreamConfigs = make(map[string]*structs.UpstreamConfig, len(names))
			}
			out.UpstreamConfigs[n] = merged
		}
	}
	return out
}

// mergeUpstream overlays an upstream's override on the defaults: every
// field the override sets wins. Nil when neither exists.
func mergeUpstream(def, o *structs.UpstreamConfig, name string) *structs.UpstreamConfig {
	if def == nil && o == nil {
		return nil
	}
	var out structs.UpstreamConfig
	if def != nil {
		out = *def
	}
	out.Name = name
	if o == nil {
		return &out
	}
	setString(&out.Namespace, o.Namespace)
	setString(&out.Partition, o.Partition)
	setString(&out.Peer, o.Peer)
	setString(&out.EnvoyListenerJSON, o.EnvoyListenerJSON)
	setString(&out.EnvoyClusterJSON, o.EnvoyClusterJSON)
	setString(&out.Protocol, o.Protocol)
	setString(&out.MeshGateway.Mode, o.MeshGateway.Mode)
	setString(&out.BalanceOutboundConnections, o.BalanceOutboundConnections)
	if o.ConnectTimeoutMs != 0 {
		out.ConnectTimeoutMs = o.ConnectTimeoutMs
	}
	if o.Limits != nil {
		out.Limits = o.Limits
	}
	if o.PassiveHealthCheck != nil {
		out.PassiveHealthCheck = o.PassiveHealthCheck
	}
	return &out
}

func setString(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}
