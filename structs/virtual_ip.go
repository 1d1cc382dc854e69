package structs

import "slices"

// Virtual IPs: the address Consul gives every service of the mesh, so that
// a transparent proxy can tell which upstream an application dialed without
// knowing the upstream's instances.

// TaggedAddressVirtualIP is the tagged address under which the catalog
// shows, on every mesh instance of a service (its sidecars and
// Connect-native instances), the service's automatically assigned virtual
// IP, with the instance's port. The servers set it on registration; a
// value an agent sends is replaced.
const TaggedAddressVirtualIP = "consul-virtual"

// VirtualIPRange is the range virtual IPs are assigned from (Consul's),
// starting at its first address after the network address: 240.0.0.1.
const VirtualIPRange = "240.0.0.0/4"

// MaxManualVirtualIPs is how many manual virtual IPs one service may have,
// as in Consul.
const MaxManualVirtualIPs = 8

// ServiceVirtualIP is a service's virtual IP assignment: IP, assigned
// automatically when the service joins the mesh, and the ManualIPs an
// operator gave it (PUT /v1/internal/service-virtual-ip).
type ServiceVirtualIP struct {
	Service   string
	IP        string
	ManualIPs []string `json:",omitempty"`
	RaftIndex
}

// Clone returns a deep copy.
func (v *ServiceVirtualIP) Clone() *ServiceVirtualIP {
	if v == nil {
		return nil
	}
	c := *v
	c.ManualIPs = slices.Clone(v.ManualIPs)
	return &c
}

// AssignServiceManualVIPsRequest replaces the manual virtual IPs of a
// service, taking each from any other service that holds it (the body of
// PUT /v1/internal/service-virtual-ip).
type AssignServiceManualVIPsRequest struct {
	Service      string
	ManualVIPs   []string
	WriteRequest `json:"-"`
}

// AssignServiceManualVIPsResponse says whether the service has a virtual
// IP assignment (the manual IPs are set only then) and which other
// services lost one of the IPs.
type AssignServiceManualVIPsResponse struct {
	Found          bool
	UnassignedFrom []PeeredServiceName
}

// CompoundServiceName is a service name with its namespace and partition
// (always the default ones here: they are left out of the JSON).
type CompoundServiceName struct {
	Name      string
	Namespace string `json:",omitempty"`
	Partition string `json:",omitempty"`
}

// PeeredServiceName is a service name with the peer it was imported from
// ("" for a local service).
type PeeredServiceName struct {
	ServiceName CompoundServiceName
	Peer        string
}

// IndexedServiceVirtualIP is the virtual IP assignment of one service, nil
// when it has none.
type IndexedServiceVirtualIP struct {
	VirtualIP *ServiceVirtualIP
	QueryMeta
}

// The internal RPC methods of virtual IPs (see endpoints.go for the
// conventions).
var (
	// MethodInternalAssignManualServiceVIPs sets a service's manual
	// virtual IPs (UpdateVirtualIPRequestType).
	MethodInternalAssignManualServiceVIPs = writeMethod[AssignServiceManualVIPsRequest, AssignServiceManualVIPsResponse]("Internal.AssignManualServiceVIPs")
	// MethodCatalogVirtualIPForService reads a service's virtual IP
	// assignment (the DNS interface's <service>.virtual names).
	MethodCatalogVirtualIPForService = readMethod[ServiceSpecificRequest, IndexedServiceVirtualIP]("Catalog.VirtualIPForService")
)
