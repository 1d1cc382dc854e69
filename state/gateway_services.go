package state

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/structs"
)

// Gateway services: which ingress or terminating gateway fronts which
// service, Consul's gateway-services table. It is derived state: every row
// follows from the gateways' config entries and, for a wildcard ("*"),
// from the catalog, so it is rewritten inside the config-entry and
// service writes that change it and rebuilt on restore instead of being
// carried in snapshots (no FSM command or snapshot record of its own).

// tableGatewayServices holds one *structs.GatewayService per (gateway,
// service, ingress port).
const tableGatewayServices = "gateway-services"

// indexGateway indexes the rows by gateway name (indexService by service).
const indexGateway = "gateway"

// gatewayServicesTableSchema is the table's schema, listed in schema().
func gatewayServicesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableGatewayServices,
		Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: keyIndexer(func(g *structs.GatewayService) []string {
				return []string{g.Gateway, g.Service, strconv.Itoa(g.Port)}
			})},
			indexGateway: {Name: indexGateway, Indexer: keyIndexer(func(g *structs.GatewayService) []string {
				return []string{g.Gateway}
			})},
			indexService: {Name: indexService, Indexer: keyIndexer(func(g *structs.GatewayService) []string {
				return []string{g.Service}
			})},
		},
	}
}

// GatewayServices lists the services the ingress or terminating gateway
// named gateway fronts, wildcards expanded: ingress ones in (port,
// service) order, terminating ones in service order. A gateway without a
// config entry has none. The watch fires when the list changes.
func (s *Store) GatewayServices(ws memdb.WatchSet, gateway string) (uint64, []*structs.GatewayService, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	rows, err := gatewayRowsTxn(tx, ws, indexGateway, gateway)
	if err != nil {
		return 0, nil, err
	}
	slices.SortStableFunc(rows, func(a, b *structs.GatewayService) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Service, b.Service))
	})
	return gatewayServicesIndex(tx), cloneGatewayServices(rows), nil
}

// ServiceGateways lists the rows linking service to a gateway of kind
// (every kind when empty), in gateway order. The watch fires when a
// gateway starts or stops fronting the service.
func (s *Store) ServiceGateways(ws memdb.WatchSet, service string, kind structs.ServiceKind) (uint64, []*structs.GatewayService, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	rows, err := serviceGatewaysTxn(tx, ws, service, kind)
	if err != nil {
		return 0, nil, err
	}
	return gatewayServicesIndex(tx), cloneGatewayServices(rows), nil
}

// LinkedServices lists, sorted and once each, the services that a gateway
// of kind fronts. The watch fires on every change of the table.
func (s *Store) LinkedServices(ws memdb.WatchSet, kind structs.ServiceKind) (uint64, []string, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	rows, err := gatewayRowsTxn(tx, ws, indexID)
	if err != nil {
		return 0, nil, err
	}
	var names []string
	for _, r := range rows {
		if r.GatewayKind == kind && !slices.Contains(names, r.Service) {
			names = append(names, r.Service)
		}
	}
	slices.Sort(names)
	return gatewayServicesIndex(tx), names, nil
}

// gatewayServicesIndex is the index of the last change to the table, or
// of the gateway entries that shape it.
func gatewayServicesIndex(tx *memdb.Txn) uint64 {
	return maxIndex(tx, tableGatewayServices,
		configEntryKindIndexKey(structs.IngressGateway), configEntryKindIndexKey(structs.TerminatingGateway))
}

// gatewayRowsTxn returns the stored rows (shared: do not modify) of one
// index lookup, watching them.
func gatewayRowsTxn(tx *memdb.Txn, ws memdb.WatchSet, index string, args ...interface{}) ([]*structs.GatewayService, error) {
	it, err := tx.Get(tableGatewayServices, index, args...)
	if err != nil {
		return nil, fmt.Errorf("failed gateway services lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	var out []*structs.GatewayService
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.GatewayService))
	}
	return out, nil
}

func serviceGatewaysTxn(tx *memdb.Txn, ws memdb.WatchSet, service string, kind structs.ServiceKind) ([]*structs.GatewayService, error) {
	rows, err := gatewayRowsTxn(tx, ws, indexService, service)
	if err != nil {
		return nil, err
	}
	if kind != "" {
		rows = slices.DeleteFunc(rows, func(r *structs.GatewayService) bool { return r.GatewayKind != kind })
	}
	slices.SortStableFunc(rows, func(a, b *structs.GatewayService) int { return cmp.Compare(a.Gateway, b.Gateway) })
	return rows, nil
}

func cloneGatewayServices(rows []*structs.GatewayService) []*structs.GatewayService {
	out := make([]*structs.GatewayService, 0, len(rows))
	for _, r := range rows {
		c := *r
		c.Hosts = slices.Clone(r.Hosts)
		out = append(out, &c)
	}
	return out
}

// isGatewayEntryKind reports whether entries of kind link services to
// gateways.
func isGatewayEntryKind(kind string) bool {
	return strings.EqualFold(kind, structs.IngressGateway) || strings.EqualFold(kind, structs.TerminatingGateway)
}

// syncGatewayTxn rewrites the rows of gateway (only those for service
// only, when it is not empty) to what its config entry and the catalog
// say now, moving the table's index when anything changed.
func (tx *writeTxn) syncGatewayTxn(gateway, only string) error {
	want, err := desiredGatewayRows(tx.Txn, gateway, only)
	if err != nil {
		return err
	}
	have, err := gatewayRowsTxn(tx.Txn, nil, indexGateway, gateway)
	if err != nil {
		return err
	}
	if only != "" {
		have = slices.DeleteFunc(have, func(r *structs.GatewayService) bool { return !strings.EqualFold(r.Service, only) })
	}
	key := func(g *structs.GatewayService) string {
		return strings.ToLower(g.Service) + "\x00" + strconv.Itoa(g.Port)
	}
	wanted := make(map[string]*structs.GatewayService, len(want))
	for _, w := range want {
		wanted[key(w)] = w
	}
	changed := false
	var unlinked []string // services a terminating gateway stopped fronting
	for _, h := range have {
		if w := wanted[key(h)]; w != nil && reflect.DeepEqual(w, h) {
			delete(wanted, key(h))
			continue
		}
		if err := tx.Delete(tableGatewayServices, h); err != nil {
			return fmt.Errorf("failed deleting gateway service: %w", err)
		}
		if h.GatewayKind == structs.ServiceKindTerminatingGateway {
			unlinked = append(unlinked, h.Service)
		}
		changed = true
	}
	for _, w := range want {
		if wanted[key(w)] == nil {
			continue
		}
		if err := tx.Insert(tableGatewayServices, w); err != nil {
			return fmt.Errorf("failed inserting gateway service: %w", err)
		}
		// A service a terminating gateway fronts joins the mesh: it gets
		// a virtual IP, as in Consul, so that transparent proxies and
		// DNS can dial it (virtual_ip.go).
		if w.GatewayKind == structs.ServiceKindTerminatingGateway {
			if _, err := tx.assignVirtualIP(w.Service); err != nil {
				return err
			}
		}
		changed = true
	}
	if !changed {
		return nil
	}
	for _, svc := range unlinked {
		if err := tx.freeVirtualIP(svc); err != nil { // kept while anything else keeps it in the mesh
			return err
		}
	}
	return tx.bumpIndex(tableGatewayServices)
}

// refreshWildcardsTxn re-expands, for the services named, the wildcards of
// every gateway entry that has one: a service write can make a name start
// or stop matching ("has an ordinary instance" for terminating gateways,
// "has a Connect endpoint" for ingress gateways).
func (tx *writeTxn) refreshWildcardsTxn(names ...string) error {
	for _, kind := range []string{structs.IngressGateway, structs.TerminatingGateway} {
		entries, err := configEntriesTxn(tx.Txn, nil, kind)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !hasWildcard(e) {
				continue
			}
			for _, n := range names {
				if n == "" {
					continue
				}
				if err := tx.syncGatewayTxn(e.GetName(), n); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// rebuildGatewayServices fills the table from the restored config entries
// and catalog. Its index stays the one the snapshot's index records carry;
// a snapshot without one gets the latest write that shaped the table.
func (r *Restore) rebuildGatewayServices() error {
	idx, ok := indexValue(r.tx, nil, tableGatewayServices)
	if !ok {
		idx = maxIndex(r.tx, tableServices,
			configEntryKindIndexKey(structs.IngressGateway), configEntryKindIndexKey(structs.TerminatingGateway))
	}
	tx := &writeTxn{Txn: r.tx, idx: idx}
	for _, kind := range []string{structs.IngressGateway, structs.TerminatingGateway} {
		entries, err := configEntriesTxn(r.tx, nil, kind)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := tx.syncGatewayTxn(e.GetName(), ""); err != nil {
				return fmt.Errorf("restore gateway services of %q: %w", e.GetName(), err)
			}
		}
	}
	return nil
}

func hasWildcard(e structs.ConfigEntry) bool {
	switch e := e.(type) {
	case *structs.IngressGatewayConfigEntry:
		for _, l := range e.Listeners {
			if slices.ContainsFunc(l.Services, func(s structs.IngressService) bool { return s.Name == structs.WildcardSpecifier }) {
				return true
			}
		}
	case *structs.TerminatingGatewayConfigEntry:
		return slices.ContainsFunc(e.Services, func(s structs.LinkedService) bool { return s.Name == structs.WildcardSpecifier })
	}
	return false
}

// desiredGatewayRows computes the rows of gateway from its config entry
// (an ingress entry wins over a terminating one of the same name, which
// Consul refuses to have), restricted to service only when it is set.
func desiredGatewayRows(tx *memdb.Txn, gateway, only string) ([]*structs.GatewayService, error) {
	ing, err := configEntryTxn(tx, nil, structs.IngressGateway, gateway)
	if err != nil {
		return nil, err
	}
	if e, ok := ing.(*structs.IngressGatewayConfigEntry); ok {
		return ingressRows(tx, e, only)
	}
	term, err := configEntryTxn(tx, nil, structs.TerminatingGateway, gateway)
	if err != nil {
		return nil, err
	}
	if e, ok := term.(*structs.TerminatingGatewayConfigEntry); ok {
		return terminatingRows(tx, e, only)
	}
	return nil, nil
}

// ingressRows: one row per listener service; a wildcard stands for every
// service with a Connect endpoint that the listener does not name itself.
func ingressRows(tx *memdb.Txn, e *structs.IngressGatewayConfigEntry, only string) ([]*structs.GatewayService, error) {
	var out []*structs.GatewayService
	for _, l := range e.Listeners {
		explicit := make(map[string]bool)
		for _, s := range l.Services {
			if s.Name != structs.WildcardSpecifier {
				explicit[strings.ToLower(s.Name)] = true
			}
		}
		for _, s := range l.Services {
			gs := &structs.GatewayService{
				Gateway: e.Name, Service: s.Name, GatewayKind: structs.ServiceKindIngressGateway,
				Port: l.Port, Protocol: l.Protocol, Hosts: slices.Clone(s.Hosts),
			}
			if s.Name != structs.WildcardSpecifier {
				if only == "" || strings.EqualFold(only, s.Name) {
					out = append(out, gs)
				}
				continue
			}
			names, err := wildcardCandidates(tx, only, func(r *serviceRow) string { return connectDestination(r.Service) })
			if err != nil {
				return nil, err
			}
			for _, name := range names {
				if strings.EqualFold(name, e.Name) || explicit[strings.ToLower(name)] {
					continue
				}
				w := *gs
				w.Service, w.Hosts, w.FromWildcard = name, nil, true
				out = append(out, &w)
			}
		}
	}
	return out, nil
}

// terminatingRows: one row per linked service; a wildcard stands for
// every service with an ordinary (kind typical) instance that the entry
// does not name itself, and carries the wildcard's TLS settings.
func terminatingRows(tx *memdb.Txn, e *structs.TerminatingGatewayConfigEntry, only string) ([]*structs.GatewayService, error) {
	var out []*structs.GatewayService
	explicit := make(map[string]bool)
	var wild *structs.LinkedService
	for i := range e.Services {
		ls := &e.Services[i]
		if ls.Name == structs.WildcardSpecifier {
			wild = ls
			continue
		}
		explicit[strings.ToLower(ls.Name)] = true
		if only == "" || strings.EqualFold(only, ls.Name) {
			out = append(out, linkedRow(e.Name, ls, ls.Name, false))
		}
	}
	if wild == nil {
		return out, nil
	}
	names, err := wildcardCandidates(tx, only, func(r *serviceRow) string {
		if r.Service.Kind == structs.ServiceKindTypical {
			return r.Service.Service
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if !strings.EqualFold(name, e.Name) && !explicit[strings.ToLower(name)] {
			out = append(out, linkedRow(e.Name, wild, name, true))
		}
	}
	return out, nil
}

func linkedRow(gateway string, ls *structs.LinkedService, name string, wildcard bool) *structs.GatewayService {
	return &structs.GatewayService{
		Gateway: gateway, Service: name, GatewayKind: structs.ServiceKindTerminatingGateway,
		CAFile: ls.CAFile, CertFile: ls.CertFile, KeyFile: ls.KeyFile, SNI: ls.SNI,
		FromWildcard: wildcard, AutoHostRewrite: !ls.DisableAutoHostRewrite,
	}
}

// wildcardCandidates lists, sorted and once each, the names that match
// reports for the catalog's instances (only the instances of only when
// it is set), without "*" and the servers' "consul" service.
func wildcardCandidates(tx *memdb.Txn, only string, match func(*serviceRow) string) ([]string, error) {
	var (
		it  memdb.ResultIterator
		err error
	)
	if only != "" {
		// Instances of only itself, and the Connect endpoints standing
		// for it (a sidecar is registered under its own name).
		var rows []*serviceRow
		for _, index := range []string{indexService, indexConnect} {
			if it, err = tx.Get(tableServices, index, only); err != nil {
				return nil, fmt.Errorf("failed service lookup: %w", err)
			}
			for raw := it.Next(); raw != nil; raw = it.Next() {
				rows = append(rows, raw.(*serviceRow))
			}
		}
		return matchingNames(rows, func(r *serviceRow) string {
			if n := match(r); strings.EqualFold(n, only) {
				return n
			}
			return ""
		}), nil
	}
	if it, err = tx.Get(tableServices, indexID); err != nil {
		return nil, fmt.Errorf("failed service lookup: %w", err)
	}
	var rows []*serviceRow
	for raw := it.Next(); raw != nil; raw = it.Next() {
		rows = append(rows, raw.(*serviceRow))
	}
	return matchingNames(rows, match), nil
}

func matchingNames(rows []*serviceRow, match func(*serviceRow) string) []string {
	seen := make(map[string]bool)
	var out []string
	for _, r := range rows {
		n := match(r)
		if n == "" || n == structs.WildcardSpecifier || n == structs.ConsulServiceName || seen[strings.ToLower(n)] {
			continue
		}
		seen[strings.ToLower(n)] = true
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
