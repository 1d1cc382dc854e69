package query

import (
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/connect/intentions"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// IntentionsForDestination lists the intentions that apply to connections
// to the service name (its own and the wildcard ones), highest precedence
// first; empty, not nil, when none apply.
func IntentionsForDestination(ws memdb.WatchSet, st *state.Store, name string) (*structs.IndexedIntentions, error) {
	if name == "" {
		return nil, ErrMissingName
	}
	idx, matches, err := st.IntentionMatch(ws, structs.IntentionMatchDestination, []string{name})
	if err != nil {
		return nil, err
	}
	out := &structs.IndexedIntentions{Intentions: structs.Intentions{}}
	if len(matches) == 1 && matches[0] != nil {
		out.Intentions = matches[0]
	}
	out.Index = idx
	return out, nil
}

// IntentionUpstreams lists the Connect services (those with a sidecar or
// a Connect-native instance) that the service name may reach by
// intentions: those the highest-precedence matching intention allows, or
// with L7 permissions (some requests are allowed), and, when no intention
// matches, all of them under a default-allow policy. The service itself,
// "*" and the servers' "consul" service are never listed.
func IntentionUpstreams(ws memdb.WatchSet, st *state.Store, name string, defaultAllow bool) (*structs.ServiceNames, error) {
	if name == "" {
		return nil, ErrMissingName
	}
	ixnIdx, all, err := st.Intentions(ws)
	if err != nil {
		return nil, err
	}
	svcIdx, candidates, err := connectServices(ws, st)
	if err != nil {
		return nil, err
	}
	out := &structs.ServiceNames{Services: []string{}}
	for _, dst := range candidates {
		if dst == name {
			continue
		}
		d := intentions.Evaluate(all, name, dst, defaultAllow, nil)
		if d.Allowed || d.HasPermissions {
			out.Services = append(out.Services, dst)
		}
	}
	out.Index = max(ixnIdx, svcIdx)
	return out, nil
}

// connectServices returns the sorted names of the services that have
// Connect endpoints: sidecars, Connect-native instances, or a terminating
// gateway fronting them (transparent proxies reach those through the
// gateway, as in Consul). Only the services table and gateway-services
// table watches go into ws: they fire on every service write, which
// covers a service gaining or losing its last endpoint, and on every
// link change.
func connectServices(ws memdb.WatchSet, st *state.Store) (uint64, []string, error) {
	lidx, _, err := st.LinkedServices(ws, structs.ServiceKindTerminatingGateway)
	if err != nil {
		return 0, nil, err
	}
	idx, services, err := st.Services(ws, nil)
	if err != nil {
		return 0, nil, err
	}
	names := make([]string, 0, len(services))
	for name := range services {
		if name == structs.WildcardSpecifier || name == structs.ConsulServiceName {
			continue
		}
		_, nodes, err := st.ServiceNodes(nil, name, nil, true)
		if err != nil {
			return 0, nil, err
		}
		if len(nodes) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return max(idx, lidx), names, nil
}
