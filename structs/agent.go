package structs

import "slices"

// CheckType says how an agent runs one health check: exactly one of TTL,
// HTTP, TCP, GRPC or an alias (AliasNode/AliasService) is set. It is the
// check part of Consul's agent registration JSON.
type CheckType struct {
	CheckID    string   `json:",omitempty"`
	Name       string   `json:",omitempty"`
	Status     string   `json:",omitempty"`
	Notes      string   `json:",omitempty"`
	ScriptArgs []string `json:",omitempty"`
	// DockerContainerID runs ScriptArgs inside that container (a "docker"
	// check); Shell is Consul's shell for a docker check's script, kept
	// as registered.
	DockerContainerID string `json:",omitempty"`
	Shell             string `json:",omitempty"`

	HTTP          string              `json:",omitempty"`
	Header        map[string][]string `json:",omitempty"`
	Method        string              `json:",omitempty"`
	Body          string              `json:",omitempty"`
	TLSServerName string              `json:",omitempty"`
	TLSSkipVerify bool                `json:",omitempty"`
	TCP           string              `json:",omitempty"`
	GRPC          string              `json:",omitempty"`
	GRPCUseTLS    bool                `json:",omitempty"`
	AliasNode     string              `json:",omitempty"`
	AliasService  string              `json:",omitempty"`

	TTL                            Duration `json:",omitempty"`
	Interval                       Duration `json:",omitempty"`
	Timeout                        Duration `json:",omitempty"`
	DeregisterCriticalServiceAfter Duration `json:",omitempty"`
	SuccessBeforePassing           int      `json:",omitempty"`
	FailuresBeforeCritical         int      `json:",omitempty"`
	OutputMaxSize                  int      `json:",omitempty"`
}

// CheckTypes is a list of check definitions.
type CheckTypes []*CheckType

// IsTTL, IsHTTP, ... say which kind of check this is.
func (c *CheckType) IsTTL() bool   { return c.TTL > 0 }
func (c *CheckType) IsHTTP() bool  { return c.HTTP != "" && c.Interval > 0 }
func (c *CheckType) IsTCP() bool   { return c.TCP != "" && c.Interval > 0 }
func (c *CheckType) IsGRPC() bool  { return c.GRPC != "" && c.Interval > 0 }
func (c *CheckType) IsAlias() bool { return c.AliasNode != "" || c.AliasService != "" }

// IsScript and IsDocker: a script check runs ScriptArgs on the agent's
// host, a docker check runs them in DockerContainerID, both every
// Interval. Either runs only where the agent enables script checks.
func (c *CheckType) IsScript() bool {
	return len(c.ScriptArgs) > 0 && c.DockerContainerID == "" && c.Interval > 0
}
func (c *CheckType) IsDocker() bool {
	return len(c.ScriptArgs) > 0 && c.DockerContainerID != "" && c.Interval > 0
}

// Type is the check's type name as the catalog shows it ("ttl", "http", ...).
func (c *CheckType) Type() string {
	switch {
	case c.IsTTL():
		return "ttl"
	case c.IsHTTP():
		return "http"
	case c.IsTCP():
		return "tcp"
	case c.IsGRPC():
		return "grpc"
	case c.IsAlias():
		return "alias"
	case c.IsDocker():
		return "docker"
	case len(c.ScriptArgs) > 0:
		return "script"
	}
	return ""
}

// Definition is the catalog's copy of how the check runs (sharing nothing
// with c).
func (c *CheckType) Definition() HealthCheckDefinition {
	return HealthCheckDefinition{
		HTTP: c.HTTP, TLSServerName: c.TLSServerName, TLSSkipVerify: c.TLSSkipVerify, Header: cloneHeader(c.Header),
		Method: c.Method, Body: c.Body, TCP: c.TCP, GRPC: c.GRPC, GRPCUseTLS: c.GRPCUseTLS,
		AliasNode: c.AliasNode, AliasService: c.AliasService, OutputMaxSize: c.OutputMaxSize,
		Interval: c.Interval, Timeout: c.Timeout, TTL: c.TTL,
		DeregisterCriticalServiceAfter: c.DeregisterCriticalServiceAfter,
	}
}

// CheckDefinition is the body of PUT /v1/agent/check/register: a check,
// optionally bound to a local service.
type CheckDefinition struct {
	ID        string `json:",omitempty"`
	ServiceID string `json:",omitempty"`
	Token     string `json:"-"`
	CheckType
}

// ServiceDefinitionConnect is the Connect block of an agent registration.
type ServiceDefinitionConnect struct {
	Native bool `json:",omitempty"`
	// SidecarService, when set, registers a connect-proxy sidecar for this
	// service with defaults filled in by the agent.
	SidecarService *ServiceDefinition `json:",omitempty"`
}

// ServiceDefinition is the body of PUT /v1/agent/service/register and of a
// service in a config file.
type ServiceDefinition struct {
	Kind              ServiceKind               `json:",omitempty"`
	ID                string                    `json:",omitempty"`
	Name              string                    `json:",omitempty"`
	Tags              []string                  `json:",omitempty"`
	Address           string                    `json:",omitempty"`
	TaggedAddresses   map[string]ServiceAddress `json:",omitempty"`
	Meta              map[string]string         `json:",omitempty"`
	Port              int                       `json:",omitempty"`
	Ports             ServicePorts              `json:",omitempty"`
	SocketPath        string                    `json:",omitempty"`
	Weights           *Weights                  `json:",omitempty"`
	EnableTagOverride bool                      `json:",omitempty"`
	Locality          *Locality                 `json:",omitempty"`
	Check             *CheckType                `json:",omitempty"`
	Checks            CheckTypes                `json:",omitempty"`
	Proxy             *ConnectProxyConfig       `json:",omitempty"`
	Connect           *ServiceDefinitionConnect `json:",omitempty"`
	Token             string                    `json:"-"`
}

// NodeService converts the definition to the service record the catalog
// stores (the ID defaults to the name).
func (d *ServiceDefinition) NodeService() *NodeService {
	ns := &NodeService{
		Kind:              d.Kind,
		ID:                d.ID,
		Service:           d.Name,
		Tags:              d.Tags,
		Address:           d.Address,
		TaggedAddresses:   d.TaggedAddresses,
		Meta:              d.Meta,
		Port:              d.Port,
		Ports:             slices.Clone(d.Ports),
		SocketPath:        d.SocketPath,
		Weights:           d.Weights,
		EnableTagOverride: d.EnableTagOverride,
		Locality:          d.Locality.Clone(),
	}
	if ns.ID == "" {
		ns.ID = ns.Service
	}
	if d.Proxy != nil {
		ns.Proxy = *d.Proxy
	}
	if d.Connect != nil {
		ns.Connect.Native = d.Connect.Native
	}
	return ns
}

// AllChecks returns Check and Checks together.
func (d *ServiceDefinition) AllChecks() CheckTypes {
	var out CheckTypes
	if d.Check != nil {
		out = append(out, d.Check)
	}
	return append(out, d.Checks...)
}
