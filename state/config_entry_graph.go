package state

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/connect/discoverychain"
	"github.com/trellis-mesh/trellis/structs"
)

// Discovery chains across config entries: collecting the entries a chain
// consults, compiling it for reads, and refusing writes that would break a
// chain (Consul's validateProposedConfigEntryInGraph).

// entryOverrides replaces stored entries during a speculative compilation:
// the entry being written (or nil for one being deleted). Keys are
// lowercased, as the table's.
type entryOverrides map[structs.ConfigEntryKindName]structs.ConfigEntry

func overrideKey(kind, name string) structs.ConfigEntryKindName {
	return structs.ConfigEntryKindName{Kind: strings.ToLower(kind), Name: strings.ToLower(name)}
}

// lookup returns the entry, from the overrides when they name it.
func (o entryOverrides) lookup(tx *memdb.Txn, ws memdb.WatchSet, kind, name string) (structs.ConfigEntry, error) {
	if e, ok := o[overrideKey(kind, name)]; ok {
		return e, nil
	}
	return configEntryTxn(tx, ws, kind, name)
}

// readChainEntries collects the entries the chain of service consults: its
// router, the splitters and resolvers reachable from it, the
// service-defaults of every service reached, and proxy-defaults.
func readChainEntries(tx *memdb.Txn, ws memdb.WatchSet, service string, o entryOverrides) (*discoverychain.Entries, error) {
	res := discoverychain.NewEntries()
	if e, err := o.lookup(tx, ws, structs.ProxyDefaults, structs.ProxyConfigGlobal); err != nil {
		return nil, err
	} else if pd, ok := e.(*structs.ProxyConfigEntry); ok {
		res.ProxyDefaults = pd
	}
	defaults := map[string]bool{service: true}
	var splitters, resolvers []string
	e, err := o.lookup(tx, ws, structs.ServiceRouter, service)
	if err != nil {
		return nil, err
	}
	if r, ok := e.(*structs.ServiceRouterConfigEntry); ok {
		res.Routers[service] = r
		splitters = append(splitters, r.ListRelatedServices()...)
	} else {
		splitters = append(splitters, service)
	}

	seenSplitters := map[string]bool{}
	for len(splitters) > 0 {
		name := splitters[0]
		splitters = splitters[1:]
		if seenSplitters[name] {
			continue
		}
		seenSplitters[name] = true
		defaults[name] = true
		resolvers = append(resolvers, name)
		e, err := o.lookup(tx, ws, structs.ServiceSplitter, name)
		if err != nil {
			return nil, err
		}
		if s, ok := e.(*structs.ServiceSplitterConfigEntry); ok {
			res.Splitters[name] = s
			splitters = append(splitters, s.ListRelatedServices()...)
		}
	}

	seenResolvers := map[string]bool{}
	for len(resolvers) > 0 {
		name := resolvers[0]
		resolvers = resolvers[1:]
		if seenResolvers[name] {
			continue
		}
		seenResolvers[name] = true
		defaults[name] = true
		e, err := o.lookup(tx, ws, structs.ServiceResolver, name)
		if err != nil {
			return nil, err
		}
		if r, ok := e.(*structs.ServiceResolverConfigEntry); ok {
			res.Resolvers[name] = r
			resolvers = append(resolvers, r.ListRelatedServices()...)
		}
	}

	for _, name := range sortedNames(defaults) {
		e, err := o.lookup(tx, ws, structs.ServiceDefaults, name)
		if err != nil {
			return nil, err
		}
		if sd, ok := e.(*structs.ServiceConfigEntry); ok {
			res.Services[name] = sd
		}
	}
	return res, nil
}

// ServiceDiscoveryChain compiles the chain of req.ServiceName from the
// stored entries (req.Entries is ignored) and returns it with the config
// entries table index. The watch fires when any entry the chain consulted
// (or would consult, once created) or the service's virtual IPs change.
func (s *Store) ServiceDiscoveryChain(ws memdb.WatchSet, req discoverychain.CompileRequest) (uint64, *structs.CompiledDiscoveryChain, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	entries, err := readChainEntries(tx, ws, req.ServiceName, nil)
	if err != nil {
		return 0, nil, err
	}
	idx := maxIndex(tx, tableConfigEntries, tableVirtualIPs)
	// Compile copies what it keeps: the stored entries stay untouched.
	req.Entries = entries
	chain, err := discoverychain.Compile(req)
	if err != nil {
		return idx, nil, fmt.Errorf("failed to compile discovery chain: %w", err)
	}
	// The chain carries its service's virtual IPs, as Consul's does: a
	// transparent proxy matches them whether or not instances exist.
	if chain.AutoVirtualIPs, chain.ManualVirtualIPs, err = chainVirtualIPs(tx, ws, req.ServiceName); err != nil {
		return idx, nil, err
	}
	return idx, chain, nil
}

// testChainDatacenter and testChainTrustDomain are arbitrary: they do not
// change whether a chain compiles.
const (
	testChainDatacenter  = "dc1"
	testChainTrustDomain = "11111111-2222-3333-4444-555555555555.consul"
)

// validateProposedConfigEntryInGraph refuses a write (next) or delete (next
// nil) of the entry kn when it would break a discovery chain, an ingress
// gateway's listener protocols or an L7 intention's protocol. It must run
// before the table is changed.
func validateProposedConfigEntryInGraph(tx *memdb.Txn, kn structs.ConfigEntryKindName, next structs.ConfigEntry) error {
	switch kn.Kind {
	case structs.ProxyDefaults:
		if kn.Name != structs.ProxyConfigGlobal {
			return nil
		}
	case structs.ServiceDefaults, structs.ServiceRouter, structs.ServiceSplitter, structs.ServiceResolver, structs.ServiceIntentions:
	case structs.IngressGateway:
		if err := checkGatewayClash(tx, kn, structs.TerminatingGateway); err != nil {
			return err
		}
	case structs.TerminatingGateway:
		return checkGatewayClash(tx, kn, structs.IngressGateway)
	default:
		return nil
	}
	return validateProposedConfigEntryInServiceGraph(tx, kn, next)
}

func checkGatewayClash(tx *memdb.Txn, kn structs.ConfigEntryKindName, otherKind string) error {
	other, err := configEntryTxn(tx, nil, otherKind, kn.Name)
	if err != nil {
		return err
	}
	if other != nil {
		return fmt.Errorf("cannot create a %q config entry with name %q, a %q config entry with that name already exists",
			kn.Kind, kn.Name, otherKind)
	}
	return nil
}

func validateProposedConfigEntryInServiceGraph(tx *memdb.Txn, kn structs.ConfigEntryKindName, next structs.ConfigEntry) error {
	chains := map[string]bool{}
	var (
		ingresses      []*structs.IngressGatewayConfigEntry
		intentions     []*structs.ServiceIntentionsConfigEntry
		enforceIngress bool
	)
	allIntentions := func() error {
		entries, err := configEntriesTxn(tx, nil, structs.ServiceIntentions)
		for _, e := range entries {
			intentions = append(intentions, e.(*structs.ServiceIntentionsConfigEntry))
		}
		return err
	}

	switch kn.Kind {
	case structs.ProxyDefaults:
		// The default protocol of every service may change: check every
		// chain that has an entry, every ingress and every intention.
		for _, kind := range []string{structs.ServiceRouter, structs.ServiceSplitter, structs.ServiceResolver} {
			entries, err := configEntriesTxn(tx, nil, kind)
			if err != nil {
				return err
			}
			for _, e := range entries {
				chains[e.GetName()] = true
			}
		}
		entries, err := configEntriesTxn(tx, nil, structs.IngressGateway)
		if err != nil {
			return err
		}
		for _, e := range entries {
			ingresses = append(ingresses, e.(*structs.IngressGatewayConfigEntry))
		}
		if err := allIntentions(); err != nil {
			return err
		}
	case structs.ServiceIntentions:
		if next == nil {
			return nil
		}
		intentions = append(intentions, next.(*structs.ServiceIntentionsConfigEntry))
	case structs.IngressGateway:
		if next == nil {
			return nil
		}
		ingresses = append(ingresses, next.(*structs.IngressGatewayConfigEntry))
		// Editing the gateway itself, protocols must match exactly.
		enforceIngress = true
	default:
		// One chain, and every chain and ingress that links to it.
		if err := allIntentions(); err != nil {
			return err
		}
		chains[kn.Name] = true
		entries, err := configEntriesTxn(tx, nil, "")
		if err != nil {
			return err
		}
		for _, e := range entries {
			var related []string
			// Ingress gateways are among these.
			if v, ok := e.(structs.DiscoveryChainConfigEntry); ok {
				related = v.ListRelatedServices()
			}
			if !containsFold(related, kn.Name) {
				continue
			}
			if ig, ok := e.(*structs.IngressGatewayConfigEntry); ok {
				ingresses = append(ingresses, ig)
			} else {
				chains[e.GetName()] = true
			}
		}
	}
	for _, ig := range ingresses {
		for _, svc := range ig.ListRelatedServices() {
			chains[svc] = true
		}
	}
	for _, ixn := range intentions {
		chains[ixn.Name] = true
	}

	o := entryOverrides{overrideKey(kn.Kind, kn.Name): next}
	protocols := map[string]string{}
	topTypes := map[string]string{}
	for _, name := range sortedNames(chains) {
		if name == structs.WildcardSpecifier {
			continue
		}
		entries, err := readChainEntries(tx, nil, name, o)
		if err != nil {
			return err
		}
		chain, err := discoverychain.Compile(discoverychain.CompileRequest{
			ServiceName:           name,
			EvaluateInDatacenter:  testChainDatacenter,
			EvaluateInTrustDomain: testChainTrustDomain,
			Entries:               entries,
		})
		if err != nil {
			return err
		}
		protocols[name] = chain.Protocol
		topTypes[name] = chain.Nodes[chain.StartNode].Type
	}

	for _, ig := range ingresses {
		for _, l := range ig.Listeners {
			for _, svc := range l.Services {
				if svc.Name == structs.WildcardSpecifier {
					continue
				}
				proto := protocols[svc.Name]
				if proto == l.Protocol {
					continue
				}
				// A tcp listener may front an L7 service whose chain is
				// just a resolver.
				if enforceIngress || l.Protocol != "tcp" || topTypes[svc.Name] != structs.DiscoveryGraphNodeTypeResolver {
					return fmt.Errorf("service %q has protocol %q, which does not match defined listener protocol %q",
						svc.Name, proto, l.Protocol)
				}
			}
		}
	}
	for _, ixn := range intentions {
		if ixn.HasWildcardDestination() || !ixn.HasAnyPermissions() {
			continue
		}
		if proto := protocols[ixn.Name]; !structs.IsProtocolHTTPLike(proto) {
			return fmt.Errorf("service %q has protocol %q, which is incompatible with L7 intentions permissions", ixn.Name, proto)
		}
	}
	return nil
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

func sortedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
