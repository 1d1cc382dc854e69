package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Virtual IPs (Consul's agent/consul/state/catalog.go, service virtual
// IPs): one row per service of the mesh, with the address assigned to it
// automatically and the manual ones an operator set. A service joins the
// mesh, and gets its address, when a Connect endpoint of it (a sidecar or a
// Connect-native instance) is registered or a service-resolver, -router or
// -splitter entry names it; it keeps the address until neither remains.
//
// Assignment is deterministic, so that every replica applying the same log
// (or restoring the same snapshot) assigns the same addresses without a
// command of its own: the lowest address of the range no service holds.
// That is the address Consul's counter and freed-address table give too,
// since every address below its counter is held or freed.

const (
	tableVirtualIPs = "service-virtual-ips"
	indexIP         = "ip"
)

// ErrVirtualIPsExhausted refuses a mesh registration when every address
// of the range is held; the text is Consul's.
var ErrVirtualIPsExhausted = errors.New("cannot allocate any more unique service virtual IPs")

// The range's first and last assignable addresses: 240.0.0.1 (Consul skips
// the network address) to 255.255.255.254 (and the broadcast address).
const (
	firstVirtualIP = 240<<24 | 1
	lastVirtualIP  = 1<<32 - 2
)

func virtualIPsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableVirtualIPs,
		Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: keyIndexer(func(v *structs.ServiceVirtualIP) []string {
				return []string{v.Service}
			})},
			indexIP: {Name: indexIP, Unique: true, Indexer: ipv4Indexer{}},
		},
	}
}

// ipv4Indexer indexes a row by its automatic IP as 4 big-endian bytes, so
// that the index walks the addresses in numeric order.
type ipv4Indexer struct{}

// FromObject implements memdb.SingleIndexer.
func (ipv4Indexer) FromObject(raw interface{}) (bool, []byte, error) {
	v, ok := raw.(*structs.ServiceVirtualIP)
	if !ok {
		return false, nil, fmt.Errorf("unexpected object type %T", raw)
	}
	a, err := netip.ParseAddr(v.IP)
	if err != nil || !a.Is4() {
		return false, nil, fmt.Errorf("virtual IP %q of %q is not an IPv4 address", v.IP, v.Service)
	}
	b := a.As4()
	return true, b[:], nil
}

// FromArgs implements memdb.Indexer: one uint32 address.
func (ipv4Indexer) FromArgs(args ...interface{}) ([]byte, error) {
	if len(args) != 1 {
		return nil, errors.New("one argument expected")
	}
	n, ok := args[0].(uint32)
	if !ok {
		return nil, fmt.Errorf("argument must be a uint32: %#v", args[0])
	}
	return binary.BigEndian.AppendUint32(nil, n), nil
}

func ipFromUint32(n uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	return netip.AddrFrom4(b).String()
}

func getVirtualIP(tx *memdb.Txn, ws memdb.WatchSet, service string) (*structs.ServiceVirtualIP, error) {
	watch, raw, err := tx.FirstWatch(tableVirtualIPs, indexID, service)
	if err != nil {
		return nil, fmt.Errorf("failed virtual IP lookup: %w", err)
	}
	ws.Add(watch)
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.ServiceVirtualIP), nil
}

// assignVirtualIP returns service's automatic virtual IP, assigning the
// lowest free one when it has none.
func (tx *writeTxn) assignVirtualIP(service string) (string, error) {
	existing, err := getVirtualIP(tx.Txn, nil, service)
	if err != nil || existing != nil {
		if existing != nil {
			return existing.IP, nil
		}
		return "", err
	}
	it, err := tx.LowerBound(tableVirtualIPs, indexIP, uint32(firstVirtualIP))
	if err != nil {
		return "", fmt.Errorf("failed virtual IP lookup: %w", err)
	}
	want := uint64(firstVirtualIP)
	for raw := it.Next(); raw != nil; raw = it.Next() {
		a, err := netip.ParseAddr(raw.(*structs.ServiceVirtualIP).IP)
		if err != nil {
			return "", fmt.Errorf("stored virtual IP: %w", err)
		}
		b := a.As4()
		held := uint64(binary.BigEndian.Uint32(b[:]))
		if held > want {
			break
		}
		want = held + 1
	}
	if want > lastVirtualIP {
		return "", ErrVirtualIPsExhausted
	}
	v := &structs.ServiceVirtualIP{
		Service:   service,
		IP:        ipFromUint32(uint32(want)),
		RaftIndex: structs.RaftIndex{CreateIndex: tx.idx, ModifyIndex: tx.idx},
	}
	if err := tx.Insert(tableVirtualIPs, v); err != nil {
		return "", fmt.Errorf("failed inserting virtual IP: %w", err)
	}
	return v.IP, tx.bumpIndex(tableVirtualIPs)
}

// freeVirtualIP drops service's virtual IPs, automatic and manual, unless
// something still keeps it in the mesh (inMesh).
func (tx *writeTxn) freeVirtualIP(service string) error {
	existing, err := getVirtualIP(tx.Txn, nil, service)
	if err != nil || existing == nil {
		return err
	}
	if keep, err := tx.inMesh(service); err != nil || keep {
		return err
	}
	if err := tx.Delete(tableVirtualIPs, existing); err != nil {
		return fmt.Errorf("failed deleting virtual IP: %w", err)
	}
	return tx.bumpIndex(tableVirtualIPs)
}

// inMesh reports whether service still has a Connect endpoint, a
// terminating gateway fronting it (the gateway-services table, which
// assigns its address when a gateway starts fronting it) or a discovery
// chain entry of its own.
func (tx *writeTxn) inMesh(service string) (bool, error) {
	raw, err := tx.First(tableServices, indexConnect, service)
	if err != nil {
		return false, fmt.Errorf("failed service lookup: %w", err)
	}
	if raw != nil {
		return true, nil
	}
	fronted, err := serviceGatewaysTxn(tx.Txn, nil, service, structs.ServiceKindTerminatingGateway)
	if err != nil || len(fronted) > 0 {
		return len(fronted) > 0, err
	}
	for _, kind := range chainVirtualIPKinds {
		e, err := configEntryTxn(tx.Txn, nil, kind, service)
		if err != nil || e != nil {
			return e != nil, err
		}
	}
	return false, nil
}

// chainVirtualIPKinds are the config entry kinds whose entry gives its
// service a virtual IP, as in Consul: a chain can be dialed before any
// instance exists.
var chainVirtualIPKinds = []string{structs.ServiceResolver, structs.ServiceRouter, structs.ServiceSplitter}

// meshVirtualIPName is the service whose virtual IP an instance carries:
// its Connect destination; "" for an instance outside the mesh.
func meshVirtualIPName(svc *structs.NodeService) string { return connectDestination(svc) }

// tagVirtualIP sets a mesh instance's TaggedAddressVirtualIP, assigning
// its service's address when needed; other instances keep what they were
// registered with, as in Consul. svc is the caller's copy.
func (tx *writeTxn) tagVirtualIP(svc *structs.NodeService) error {
	name := meshVirtualIPName(svc)
	if name == "" {
		return nil
	}
	ip, err := tx.assignVirtualIP(name)
	if err != nil {
		return err
	}
	if svc.TaggedAddresses == nil {
		svc.TaggedAddresses = map[string]structs.ServiceAddress{}
	}
	svc.TaggedAddresses[structs.TaggedAddressVirtualIP] = structs.ServiceAddress{Address: ip, Port: svc.Port}
	return nil
}

// configEntryVirtualIP assigns (written) or frees (deleted) the virtual IP
// a chain entry gives its service.
func (tx *writeTxn) configEntryVirtualIP(kind, name string, written bool) error {
	if !slices.Contains(chainVirtualIPKinds, kind) {
		return nil
	}
	if written {
		_, err := tx.assignVirtualIP(name)
		return err
	}
	return tx.freeVirtualIP(name)
}

// AssignManualServiceVIPs gives service the manual virtual IPs ips
// (replacing its previous ones), taking each from any other service that
// has it. It changes nothing and reports false when service has no
// virtual IP assignment (it is not in the mesh), as Consul does; otherwise
// it lists the services that lost an address.
func (s *Store) AssignManualServiceVIPs(idx uint64, service string, ips []string) (bool, []string, error) {
	var found bool
	var from []string
	err := s.write(idx, func(tx *writeTxn) error {
		own, err := getVirtualIP(tx.Txn, nil, service)
		if err != nil || own == nil {
			return err
		}
		found = true
		it, err := tx.Get(tableVirtualIPs, indexID)
		if err != nil {
			return fmt.Errorf("failed virtual IP lookup: %w", err)
		}
		var changed []*structs.ServiceVirtualIP
		for raw := it.Next(); raw != nil; raw = it.Next() {
			v := raw.(*structs.ServiceVirtualIP)
			if v == own || !slices.ContainsFunc(v.ManualIPs, func(ip string) bool { return slices.Contains(ips, ip) }) {
				continue
			}
			c := v.Clone()
			c.ManualIPs = slices.DeleteFunc(c.ManualIPs, func(ip string) bool { return slices.Contains(ips, ip) })
			if len(c.ManualIPs) == 0 {
				c.ManualIPs = nil
			}
			c.ModifyIndex = tx.idx
			changed = append(changed, c)
			from = append(from, c.Service)
		}
		c := own.Clone()
		c.ManualIPs = uniqueStrings(ips)
		c.ModifyIndex = tx.idx
		changed = append(changed, c)
		for _, v := range changed {
			if err := tx.Insert(tableVirtualIPs, v); err != nil {
				return fmt.Errorf("failed updating virtual IP: %w", err)
			}
		}
		return tx.bumpIndex(tableVirtualIPs)
	})
	if err != nil {
		return false, nil, err
	}
	return found, from, nil
}

// ServiceVirtualIP returns service's virtual IP assignment (a copy) or
// nil, with the table's index.
func (s *Store) ServiceVirtualIP(ws memdb.WatchSet, service string) (uint64, *structs.ServiceVirtualIP, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	v, err := getVirtualIP(tx, ws, service)
	if err != nil {
		return 0, nil, err
	}
	return maxIndex(tx, tableVirtualIPs), v.Clone(), nil
}

// chainVirtualIPs returns the automatic and manual virtual IPs of service
// for its discovery chain, watching its row.
func chainVirtualIPs(tx *memdb.Txn, ws memdb.WatchSet, service string) (auto, manual []string, err error) {
	v, err := getVirtualIP(tx, ws, service)
	if err != nil || v == nil {
		return nil, nil, err
	}
	return []string{v.IP}, slices.Clone(v.ManualIPs), nil
}

// VirtualIPs lists every assignment in the view (for snapshots).
func (sn *Snapshot) VirtualIPs() ([]*structs.ServiceVirtualIP, error) {
	it, err := sn.tx.Get(tableVirtualIPs, indexID)
	if err != nil {
		return nil, fmt.Errorf("snapshot virtual IPs: %w", err)
	}
	var out []*structs.ServiceVirtualIP
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.ServiceVirtualIP).Clone())
	}
	return out, nil
}

// VirtualIP restores an assignment.
func (r *Restore) VirtualIP(v *structs.ServiceVirtualIP) error {
	if v == nil || v.Service == "" {
		return nil
	}
	if err := r.tx.Insert(tableVirtualIPs, v.Clone()); err != nil {
		return fmt.Errorf("restore virtual IP of %q: %w", v.Service, err)
	}
	return r.raise(v.ModifyIndex, tableVirtualIPs)
}

// uniqueStrings is ss without repeats, in first-seen order.
func uniqueStrings(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
