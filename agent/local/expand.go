package local

import (
	"fmt"
	"iter"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// Expansion of a service registration into what local state stores: the
// defaults Consul's agent fills in, the check records, and the sidecar
// registered from Connect.SidecarService.

// Tagged address keys the agent adds to every service with an IP address.
const (
	TaggedAddressLANIPv4 = "lan_ipv4"
	TaggedAddressWANIPv4 = "wan_ipv4"
	TaggedAddressLANIPv6 = "lan_ipv6"
	TaggedAddressWANIPv6 = "wan_ipv6"
)

// Sidecar defaults, Consul's.
const (
	// SidecarSuffix makes a sidecar's ID (and default name) from its
	// parent's.
	SidecarSuffix = "-sidecar-proxy"
	// DefaultSidecarMinPort and DefaultSidecarMaxPort bound the ports
	// given to sidecars registered without one (inclusive).
	DefaultSidecarMinPort = 21000
	DefaultSidecarMaxPort = 21255
	// SidecarListeningCheckName and SidecarAliasCheckPrefix name the two
	// checks a sidecar gets when its definition has none.
	SidecarListeningCheckName = "Connect Sidecar Listening"
	SidecarAliasCheckPrefix   = "Connect Sidecar Aliasing "
	sidecarCheckInterval      = 10 * time.Second
)

// SidecarServiceID is the ID of the sidecar registered for serviceID.
func SidecarServiceID(serviceID string) string { return serviceID + SidecarSuffix }

// LocalCheck is one check as the agent keeps it: the record the catalog
// gets and the definition its runner needs. Type is nil for checks that
// nothing runs (maintenance checks).
type LocalCheck struct {
	Check *structs.HealthCheck
	Type  *structs.CheckType
}

// Expansion is a validated registration, ready for State.AddService: the
// service with its checks and, when the definition asked for one, its
// sidecar with the sidecar's checks.
type Expansion struct {
	Service       *structs.NodeService
	Checks        []LocalCheck
	Sidecar       *structs.NodeService
	SidecarChecks []LocalCheck
}

// ExpandOptions is what expansion needs from the agent.
type ExpandOptions struct {
	// NodeName goes into every check record.
	NodeName string
	// SidecarMinPort..SidecarMaxPort (inclusive) is the range sidecar
	// ports are picked from; a bound below 1 disables auto-assignment.
	SidecarMinPort int
	SidecarMaxPort int
	// LocalServices are the services registered on this agent now (read
	// only; nil means none): sidecar ports are allocated and conflicts
	// detected against them.
	LocalServices LocalServices
}

// LocalServices is what expansion reads of the services registered on
// this agent: State answers from its indexes, so that expanding one
// definition costs the same with 10 or 5,000 local services. ServiceMap
// is a plain map for callers without a State.
type LocalServices interface {
	// Service returns the service registered under id, nil when none.
	Service(id string) *structs.NodeService
	// OnPort yields the services registered with Port port.
	OnPort(port int) iter.Seq[*structs.NodeService]
}

// ServiceMap is LocalServices over a map keyed by service ID; each
// OnPort scans it.
type ServiceMap map[string]*structs.NodeService

// Service returns m[id].
func (m ServiceMap) Service(id string) *structs.NodeService { return m[id] }

// OnPort yields the services of m whose Port is port.
func (m ServiceMap) OnPort(port int) iter.Seq[*structs.NodeService] {
	return func(yield func(*structs.NodeService) bool) {
		for _, s := range m {
			if s.Port == port && !yield(s) {
				return
			}
		}
	}
}

// localServices is opts.LocalServices, an empty set when nil.
func (opts ExpandOptions) localServices() LocalServices {
	if opts.LocalServices == nil {
		return ServiceMap(nil)
	}
	return opts.LocalServices
}

// ExpandService validates def (ValidateServiceDefinition) and expands it
// as Consul's agent does:
//   - ID defaults to Name; Weights to {1, 1}; unset Tags and Meta become
//     empty ([] and {} in JSON);
//   - an IPv4 (IPv6) Address adds lan_ipv4/wan_ipv4 (lan_ipv6/wan_ipv6)
//     tagged addresses from the service's own Address and Port, unless
//     those keys were given;
//   - a single check gets the ID service:<id>, several get
//     service:<id>:1, :2, ...; a check's Status (default critical) is its
//     initial status;
//   - Connect.SidecarService registers <id>-sidecar-proxy (see
//     expandSidecar); the parent keeps no trace of the block.
//
// def is not modified.
func ExpandService(def *structs.ServiceDefinition, opts ExpandOptions) (*Expansion, error) {
	if err := ValidateServiceDefinition(def); err != nil {
		return nil, err
	}
	def = def.Clone()
	ns := def.NodeService()
	applyServiceDefaults(ns)
	exp := &Expansion{Service: ns, Checks: serviceChecks(ns, nonEmptyChecks(def.AllChecks()), opts.NodeName)}

	if sd := sidecarDefinition(def); sd != nil {
		sidecar, checks, err := expandSidecar(ns, sd, opts)
		if err != nil {
			return nil, err
		}
		exp.Sidecar, exp.SidecarChecks = sidecar, checks
	}
	return exp, nil
}

// applyServiceDefaults fills in what Consul's agent fills in before it
// stores a service.
func applyServiceDefaults(ns *structs.NodeService) {
	if ns.ID == "" {
		ns.ID = ns.Service
	}
	if ns.Weights == nil {
		ns.Weights = &structs.Weights{Passing: 1, Warning: 1}
	}
	if ns.Tags == nil {
		ns.Tags = []string{}
	}
	if ns.Meta == nil {
		ns.Meta = map[string]string{}
	}
	ip := net.ParseIP(ns.Address)
	if ip == nil {
		return
	}
	lan, wan := TaggedAddressLANIPv4, TaggedAddressWANIPv4
	if ip.To4() == nil {
		lan, wan = TaggedAddressLANIPv6, TaggedAddressWANIPv6
	}
	if ns.TaggedAddresses == nil {
		ns.TaggedAddresses = make(map[string]structs.ServiceAddress, 2)
	}
	for _, k := range []string{lan, wan} {
		if _, ok := ns.TaggedAddresses[k]; !ok {
			ns.TaggedAddresses[k] = structs.ServiceAddress{Address: ns.Address, Port: ns.Port}
		}
	}
}

// serviceChecks builds the check records of a service's check blocks.
func serviceChecks(ns *structs.NodeService, types structs.CheckTypes, node string) []LocalCheck {
	out := make([]LocalCheck, 0, len(types))
	for i, ct := range types {
		id := ct.CheckID
		if id == "" {
			id = "service:" + ns.ID
			if len(types) > 1 {
				id += ":" + strconv.Itoa(i+1)
			}
		}
		name := ct.Name
		if name == "" {
			name = fmt.Sprintf("Service '%s' check", ns.Service)
		}
		hc := healthCheck(ct, node, id, name)
		hc.ServiceID = ns.ID
		hc.ServiceName = ns.Service
		hc.ServiceTags = slices.Clone(ns.Tags)
		out = append(out, LocalCheck{Check: hc, Type: ct.Clone()})
	}
	return out
}

// healthCheck is the catalog record of a check definition, in its initial
// status (the definition's Status, critical by default).
func healthCheck(ct *structs.CheckType, node, id, name string) *structs.HealthCheck {
	hc := &structs.HealthCheck{
		Node:       node,
		CheckID:    id,
		Name:       name,
		Status:     structs.HealthCritical,
		Notes:      ct.Notes,
		Type:       ct.Type(),
		Definition: ct.Definition(),
	}
	if ct.Status != "" {
		hc.Status = ct.Status
	}
	if ct.Interval != 0 {
		hc.Interval = ct.Interval.Duration().String()
	}
	if ct.Timeout != 0 {
		hc.Timeout = ct.Timeout.Duration().String()
	}
	return hc
}

// expandSidecar builds the sidecar of parent from its nested definition,
// with Consul's defaults: ID <id>-sidecar-proxy, Kind connect-proxy, Name
// <name>-sidecar-proxy, the parent's Address, Tags, Meta and Locality when
// it has none of its own, Proxy.DestinationServiceName/ID naming the parent,
// LocalServiceAddress 127.0.0.1 and LocalServicePort the parent's port
// (or the parent's socket path), a port from the sidecar range (kept when
// the same sidecar is registered again), and, unless the definition gives
// checks of its own, a TCP check of the proxy port and an alias of the
// parent.
func expandSidecar(parent *structs.NodeService, sd *structs.ServiceDefinition, opts ExpandOptions) (*structs.NodeService, []LocalCheck, error) {
	sidecar := sd.NodeService()
	sidecar.ID = SidecarServiceID(parent.ID)
	sidecar.LocallyRegisteredAsSidecar = true
	if len(sidecar.Meta) == 0 && len(parent.Meta) > 0 {
		sidecar.Meta = maps.Clone(parent.Meta)
	}
	if len(sidecar.Tags) == 0 && len(parent.Tags) > 0 {
		sidecar.Tags = slices.Clone(parent.Tags)
	}
	if sidecar.Locality == nil {
		sidecar.Locality = parent.Locality.Clone()
	}
	if sidecar.Kind == "" {
		sidecar.Kind = structs.ServiceKindConnectProxy
	}
	if sidecar.Service == "" {
		sidecar.Service = parent.Service + SidecarSuffix
	}
	if sidecar.Address == "" {
		sidecar.Address = parent.Address
	}
	p := &sidecar.Proxy
	if p.DestinationServiceName == "" {
		p.DestinationServiceName = parent.Service
	}
	if p.DestinationServiceID == "" {
		p.DestinationServiceID = parent.ID
	}
	if p.LocalServiceSocketPath == "" && (p.LocalServiceAddress == "" || p.LocalServicePort < 1) {
		if parent.SocketPath != "" {
			p.LocalServiceSocketPath = parent.SocketPath
		} else {
			if p.LocalServiceAddress == "" {
				p.LocalServiceAddress = "127.0.0.1"
			}
			if p.LocalServicePort < 1 {
				p.LocalServicePort = parent.Port
			}
		}
	}

	if sidecar.Port < 1 {
		port, err := allocateSidecarPort(sidecar.ID, parent, opts)
		if err != nil {
			return nil, nil, err
		}
		sidecar.Port = port
	} else if err := checkSidecarPortFree(sidecar, parent, opts.localServices()); err != nil {
		return nil, nil, err
	}
	applyServiceDefaults(sidecar)

	types := nonEmptyChecks(sd.AllChecks())
	if len(types) == 0 {
		addr := sidecar.Address
		if addr == "" {
			addr = p.LocalServiceAddress
		}
		types = structs.CheckTypes{
			{
				Name:     SidecarListeningCheckName,
				TCP:      net.JoinHostPort(addr, strconv.Itoa(sidecar.Port)),
				Interval: structs.Duration(sidecarCheckInterval),
			},
			{
				Name:         SidecarAliasCheckPrefix + parent.ID,
				AliasService: parent.ID,
			},
		}
	}
	if err := validateNodeService(sidecar, nil); err != nil {
		return nil, nil, err
	}
	return sidecar, serviceChecks(sidecar, types, opts.NodeName), nil
}

// allocateSidecarPort picks a sidecar's port as Consul does: the port the
// same sidecar already has when it lies in the range, otherwise the lowest
// port of the range no other local service (nor the parent) uses. It looks
// at the ports of the range in order, so it costs at most the size of the
// range (256 by default), whatever the number of local services.
func allocateSidecarPort(sidecarID string, parent *structs.NodeService, opts ExpandOptions) (int, error) {
	lo, hi := opts.SidecarMinPort, opts.SidecarMaxPort
	if lo < 1 || hi < 1 {
		return 0, fmt.Errorf("%w: no port provided for sidecar_service and auto-assignment disabled in config", ErrNoSidecarPort)
	}
	local := opts.localServices()
	inRange := func(p int) bool { return p >= lo && p <= hi }
	if old := local.Service(sidecarID); old != nil && inRange(old.Port) {
		return old.Port, nil
	}
	used := func(port int) bool {
		if port == parent.Port {
			return true
		}
		for s := range local.OnPort(port) {
			if s.ID != sidecarID && s.ID != parent.ID {
				return true
			}
		}
		return false
	}
	for port := lo; port <= hi; port++ {
		if !used(port) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("%w: no port provided for sidecar_service and none left in the configured range [%d, %d]", ErrNoSidecarPort, lo, hi)
}

// checkSidecarPortFree refuses an explicit sidecar port that another
// local service (or the parent) already listens on at an overlapping
// address: the proxy could not bind it.
func checkSidecarPortFree(sidecar, parent *structs.NodeService, local LocalServices) error {
	clash := func(s *structs.NodeService) bool {
		return s.Port == sidecar.Port && (s.Address == "" || sidecar.Address == "" || s.Address == sidecar.Address)
	}
	if clash(parent) {
		return invalid("Connect.SidecarService.Port",
			"Invalid SidecarService: Port %d is already used by local service %q", sidecar.Port, parent.ID)
	}
	// The lowest clashing ID, so that the message does not depend on map
	// order.
	other := ""
	for s := range local.OnPort(sidecar.Port) {
		if s.ID != sidecar.ID && s.ID != parent.ID && clash(s) && (other == "" || s.ID < other) {
			other = s.ID
		}
	}
	if other != "" {
		return invalid("Connect.SidecarService.Port",
			"Invalid SidecarService: Port %d is already used by local service %q", sidecar.Port, other)
	}
	return nil
}

// CheckFromDefinition validates the body of PUT /v1/agent/check/register
// and builds the check record and its runner definition, as Consul does:
// Name is required; the ID defaults to the name; Status (default critical)
// must be passing, warning or critical. Whether ServiceID names a local
// service is for State.RegisterCheck to decide.
func CheckFromDefinition(def *structs.CheckDefinition, node string) (*structs.HealthCheck, *structs.CheckType, error) {
	if def == nil || def.Name == "" {
		return nil, nil, invalid("Name", MsgMissingCheckName)
	}
	if def.Status != "" && !validStatus(def.Status) {
		return nil, nil, invalid("Status", "Bad check status")
	}
	ct := def.CheckType.Clone()
	if field, msg := checkTypeProblem(ct); msg != "" {
		return nil, nil, invalid(field, "Invalid check: %s", msg)
	}
	id := def.ID
	if id == "" {
		id = def.CheckID
	}
	if id == "" {
		id = def.Name
	}
	ct.CheckID = id
	hc := healthCheck(ct, node, id, def.Name)
	hc.ServiceID = def.ServiceID
	return hc, ct, nil
}
