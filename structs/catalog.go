package structs

// Health check statuses, as Consul spells them.
const (
	HealthAny         = "any"
	HealthPassing     = "passing"
	HealthWarning     = "warning"
	HealthCritical    = "critical"
	HealthMaint       = "maintenance"
	HealthUnknownNode = "unknown"
)

// Identifiers of the records the leader keeps for every cluster member.
const (
	// SerfCheckID is the node-level check whose status mirrors Serf's view of
	// the member: passing while alive, critical once Serf marks it failed.
	SerfCheckID           = "serfHealth"
	SerfCheckName         = "Serf Health Status"
	SerfCheckAliveOutput  = "Agent alive and reachable"
	SerfCheckFailedOutput = "Agent not live or unreachable"
	// ConsulServiceID/Name is the service every server registers for itself,
	// on its server RPC port, as Consul servers do.
	ConsulServiceID   = "consul"
	ConsulServiceName = "consul"
)

// ServiceKind says what a service is to the mesh. The empty kind is an
// ordinary ("typical") service.
type ServiceKind string

// Service kinds Consul defines.
const (
	ServiceKindTypical            ServiceKind = ""
	ServiceKindConnectProxy       ServiceKind = "connect-proxy"
	ServiceKindMeshGateway        ServiceKind = "mesh-gateway"
	ServiceKindTerminatingGateway ServiceKind = "terminating-gateway"
	ServiceKindIngressGateway     ServiceKind = "ingress-gateway"
)

// Node is a catalog node: one machine running an agent (or registered
// externally through /v1/catalog/register).
type Node struct {
	ID              string
	Node            string
	Address         string
	Datacenter      string
	TaggedAddresses map[string]string
	Meta            map[string]string
	Locality        *Locality `json:",omitempty" bexpr:"-"`
	RaftIndex       `bexpr:"-"`
}

// Locality is where a node or a service instance runs, in the cloud
// provider's terms (Consul 1.17+). Routing may prefer instances in the
// caller's locality; Trellis stores and serves it.
type Locality struct {
	Region string `json:",omitempty"`
	Zone   string `json:",omitempty"`
}

// Same reports whether l and o say the same (both nil, or equal).
func (l *Locality) Same(o *Locality) bool {
	if l == nil || o == nil {
		return l == o
	}
	return *l == *o
}

// Clone returns a copy (nil for nil).
func (l *Locality) Clone() *Locality {
	if l == nil {
		return nil
	}
	c := *l
	return &c
}

// Nodes is a list of catalog nodes.
type Nodes []*Node

// Weights decide a service instance's share of DNS answers and proxy
// traffic while passing or warning.
type Weights struct {
	Passing int
	Warning int
}

// ServiceAddress is one entry of a service's tagged addresses.
type ServiceAddress struct {
	Address string
	Port    int
}

// NodeService is one service instance registered on a node.
type NodeService struct {
	Kind            ServiceKind `json:",omitempty"`
	ID              string
	Service         string
	Tags            []string
	Address         string
	TaggedAddresses map[string]ServiceAddress `json:",omitempty"`
	Meta            map[string]string
	Port            int
	// Ports are a multi-port service's named ports (Consul 1.22), one of
	// them the Default; empty for a single-port service, which has Port.
	Ports             ServicePorts `json:",omitempty" bexpr:"-"`
	SocketPath        string       `json:",omitempty"`
	Weights           *Weights     `json:",omitempty"`
	EnableTagOverride bool
	Locality          *Locality `json:",omitempty" bexpr:"-"`
	// Proxy is set for connect-proxy and gateway kinds.
	Proxy ConnectProxyConfig
	// Connect holds Connect-native settings of an ordinary service.
	Connect ServiceConnect
	// LocallyRegisteredAsSidecar is agent-local bookkeeping: the sidecar was
	// expanded from its parent's registration. Never sent to the catalog.
	LocallyRegisteredAsSidecar bool `json:"-" bexpr:"-"`
	RaftIndex                  `bexpr:"-"`
}

// ServicePort is one named port of a multi-port service.
type ServicePort struct {
	Name    string
	Port    int
	Default bool
}

// ServicePorts are a service's named ports, as registered (order kept).
type ServicePorts []ServicePort

// ServiceConnect holds a service's own Connect settings.
type ServiceConnect struct {
	// Native is true when the service speaks Connect mTLS itself and is its
	// own Connect endpoint.
	Native bool `json:",omitempty"`
}

// ServiceNode is a service instance flattened together with its node, the
// shape /v1/catalog/service/<name> returns.
type ServiceNode struct {
	ID                       string
	Node                     string
	Address                  string
	Datacenter               string
	TaggedAddresses          map[string]string
	NodeMeta                 map[string]string
	ServiceKind              ServiceKind
	ServiceID                string
	ServiceName              string
	ServiceTags              []string
	ServiceAddress           string
	ServiceTaggedAddresses   map[string]ServiceAddress `json:",omitempty"`
	ServiceWeights           Weights
	ServiceMeta              map[string]string
	ServicePort              int
	ServicePorts             ServicePorts `json:",omitempty" bexpr:"-"`
	ServiceSocketPath        string       `json:",omitempty"`
	ServiceEnableTagOverride bool
	ServiceProxy             ConnectProxyConfig
	ServiceConnect           ServiceConnect
	ServiceLocality          *Locality `json:",omitempty" bexpr:"-"`
	RaftIndex                `bexpr:"-"`
}

// ServiceNodes is a list of flattened service instances.
type ServiceNodes []*ServiceNode

// ToServiceNode flattens the service together with its node.
func (s *NodeService) ToServiceNode(n *Node) *ServiceNode {
	sn := &ServiceNode{
		ServiceKind:              s.Kind,
		ServiceID:                s.ID,
		ServiceName:              s.Service,
		ServiceTags:              s.Tags,
		ServiceAddress:           s.Address,
		ServiceTaggedAddresses:   s.TaggedAddresses,
		ServiceMeta:              s.Meta,
		ServicePort:              s.Port,
		ServicePorts:             s.Ports,
		ServiceSocketPath:        s.SocketPath,
		ServiceEnableTagOverride: s.EnableTagOverride,
		ServiceProxy:             s.Proxy,
		ServiceConnect:           s.Connect,
		ServiceLocality:          s.Locality,
		RaftIndex:                s.RaftIndex,
	}
	if s.Weights != nil {
		sn.ServiceWeights = *s.Weights
	}
	if n != nil {
		sn.ID = n.ID
		sn.Node = n.Node
		sn.Address = n.Address
		sn.Datacenter = n.Datacenter
		sn.TaggedAddresses = n.TaggedAddresses
		sn.NodeMeta = n.Meta
	}
	return sn
}

// ToNodeService extracts the service part of a flattened instance.
func (s *ServiceNode) ToNodeService() *NodeService {
	w := s.ServiceWeights
	return &NodeService{
		Kind:              s.ServiceKind,
		ID:                s.ServiceID,
		Service:           s.ServiceName,
		Tags:              s.ServiceTags,
		Address:           s.ServiceAddress,
		TaggedAddresses:   s.ServiceTaggedAddresses,
		Meta:              s.ServiceMeta,
		Port:              s.ServicePort,
		Ports:             s.ServicePorts,
		SocketPath:        s.ServiceSocketPath,
		Weights:           &w,
		EnableTagOverride: s.ServiceEnableTagOverride,
		Proxy:             s.ServiceProxy,
		Connect:           s.ServiceConnect,
		Locality:          s.ServiceLocality,
		RaftIndex:         s.RaftIndex,
	}
}

// NodeServices is a node with every service registered on it, keyed by
// service ID: the shape /v1/catalog/node/<node> returns.
type NodeServices struct {
	Node     *Node
	Services map[string]*NodeService
}

// HealthCheckDefinition says how an agent runs a check. The catalog keeps it
// so that /v1/health results show what each check probes.
type HealthCheckDefinition struct {
	HTTP                           string              `json:",omitempty"`
	TLSServerName                  string              `json:",omitempty"`
	TLSSkipVerify                  bool                `json:",omitempty"`
	Header                         map[string][]string `json:",omitempty"`
	Method                         string              `json:",omitempty"`
	Body                           string              `json:",omitempty"`
	TCP                            string              `json:",omitempty"`
	UDP                            string              `json:",omitempty"`
	GRPC                           string              `json:",omitempty"`
	GRPCUseTLS                     bool                `json:",omitempty"`
	AliasNode                      string              `json:",omitempty"`
	AliasService                   string              `json:",omitempty"`
	OutputMaxSize                  int                 `json:",omitempty"`
	Interval                       Duration            `json:",omitempty"`
	Timeout                        Duration            `json:",omitempty"`
	TTL                            Duration            `json:",omitempty"`
	DeregisterCriticalServiceAfter Duration            `json:",omitempty"`
}

// HealthCheck is one check's current state in the catalog: a node check when
// ServiceID is empty, a service check otherwise.
type HealthCheck struct {
	Node        string
	CheckID     string
	Name        string
	Status      string
	Notes       string
	Output      string
	ServiceID   string
	ServiceName string
	ServiceTags []string
	Type        string
	Interval    string
	Timeout     string
	ExposedPort int
	Definition  HealthCheckDefinition `bexpr:"-"`
	RaftIndex   `bexpr:"-"`
}

// HealthChecks is a list of checks.
type HealthChecks []*HealthCheck

// TypeFromDefinition names the kind of check the definition describes
// ("http", "tcp", "udp", "grpc", "ttl", "alias"), or "" when it names
// none: the catalog fills in the Type of a check registered without one,
// as Consul's /v1/txn and catalog reads show it.
func (d *HealthCheckDefinition) TypeFromDefinition() string {
	switch {
	case d.GRPC != "":
		return "grpc"
	case d.HTTP != "":
		return "http"
	case d.TTL > 0:
		return "ttl"
	case d.TCP != "":
		return "tcp"
	case d.UDP != "":
		return "udp"
	case d.AliasNode != "" || d.AliasService != "":
		return "alias"
	}
	return ""
}

// CheckServiceNode is a service instance with its node and every check that
// applies to it (node checks and its own): the shape /v1/health/service
// returns.
type CheckServiceNode struct {
	Node    *Node
	Service *NodeService
	Checks  HealthChecks
}

// CheckServiceNodes is a list of instances with their health.
type CheckServiceNodes []CheckServiceNode

// Passing reports whether every check of the instance is passing (warnings
// count as failing, as in Consul's ?passing filter).
func (c *CheckServiceNode) Passing() bool {
	for _, chk := range c.Checks {
		if chk.Status != HealthPassing {
			return false
		}
	}
	return true
}

// RegisterRequest registers a node and optionally one service and checks on
// it: the body of /v1/catalog/register and the Register Raft command.
type RegisterRequest struct {
	ID              string
	Node            string
	Address         string
	TaggedAddresses map[string]string
	NodeMeta        map[string]string
	Locality        *Locality `json:",omitempty"`
	Service         *NodeService
	Check           *HealthCheck
	Checks          HealthChecks
	// SkipNodeUpdate keeps the stored node as it is when it exists, so that a
	// service registration cannot clobber a node's address or metadata.
	SkipNodeUpdate bool
	WriteRequest
}

// DeregisterRequest removes a node, or one of its services, or one check:
// the body of /v1/catalog/deregister.
type DeregisterRequest struct {
	Node      string
	ServiceID string
	CheckID   string
	WriteRequest
}
