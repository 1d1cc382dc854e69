package local

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"regexp"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// Validation of agent registrations, in the order and with the texts of
// Consul's PUT /v1/agent/service/register and /v1/agent/check/register.
// Every failure is a *ValidationError (HTTP 400).

// MaxPort is the largest service port accepted. Consul takes any int (and
// the compatibility notes record that it keeps negative ports); Trellis
// refuses only ports above the TCP range, which no client can mean.
const MaxPort = 65535

// Consul's metadata limits.
const (
	metaMaxKeyPairs       = 64
	metaKeyMaxLength      = 128
	metaValueMaxLength    = 512
	metaKeyReservedPrefix = "consul-"
)

var metaKeyFormat = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Texts Consul answers with; tests and the HTTP layer refer to them.
const (
	MsgMissingServiceName = "Missing service name"
	MsgInvalidAddress     = "Invalid service address"
	MsgBadCheckStatus     = "Status for checks must 'passing', 'warning', 'critical'"
	MsgMissingCheckName   = "Missing check name"
	MsgScriptsDisabled    = "Scripts are disabled on this agent from remote calls; to enable, configure 'enable_script_checks' to true"
	// MsgLocalScriptsDisabled refuses a script check of a config file.
	MsgLocalScriptsDisabled = "Scripts are disabled on this agent; to enable, configure 'enable_script_checks' or 'enable_local_script_checks' to true"
)

// ValidateServiceDefinition checks a service registration before anything
// is expanded or stored: the name, address and port, weights, metadata,
// tagged addresses, the kind-specific rules (connect-proxy, gateways,
// Connect-native, the nested sidecar) and every check, the sidecar's
// included. Rules that depend on what else is registered (sidecar port
// conflicts) are checked by ExpandService.
func ValidateServiceDefinition(def *structs.ServiceDefinition) error {
	if def == nil || def.Name == "" {
		return invalid("Name", MsgMissingServiceName)
	}
	if isAnyAddress(def.Address) {
		return invalid("Address", MsgInvalidAddress)
	}
	if err := validatePort("Port", def.Port); err != nil {
		return err
	}
	if err := validatePorts(def.Ports); err != nil {
		return err
	}
	if def.Weights != nil {
		if err := validateWeights(def.Weights); err != nil {
			return invalid("Weights", "Invalid Weights: %s", err)
		}
	}
	if err := validateMeta(def.Kind, def.Meta); err != nil {
		return invalid("Meta", "Invalid Service Meta: %s", err)
	}
	if err := validateTaggedAddresses(def.TaggedAddresses); err != nil {
		return err
	}
	if err := validateNodeService(def.NodeService(), def.Connect); err != nil {
		return err
	}
	if err := validateCheckTypes(def.AllChecks(), "Invalid check: "); err != nil {
		return err
	}
	sd := sidecarDefinition(def)
	if sd == nil {
		return nil
	}
	if err := validateCheckTypes(sd.AllChecks(), "Invalid check in sidecar_service: "); err != nil {
		err.Field = "Connect.SidecarService." + err.Field
		return err
	}
	if err := validatePort("Connect.SidecarService.Port", sd.Port); err != nil {
		return err
	}
	if isAnyAddress(sd.Address) {
		return invalid("Connect.SidecarService.Address", MsgInvalidAddress)
	}
	if err := validateMeta(structs.ServiceKindConnectProxy, sd.Meta); err != nil {
		return invalid("Connect.SidecarService.Meta", "Invalid SidecarService: %s", err)
	}
	if sd.Weights != nil {
		if err := validateWeights(sd.Weights); err != nil {
			return invalid("Connect.SidecarService.Weights", "Invalid Weights: %s", err)
		}
	}
	return nil
}

func sidecarDefinition(def *structs.ServiceDefinition) *structs.ServiceDefinition {
	if def.Connect == nil {
		return nil
	}
	return def.Connect.SidecarService
}

func validatePort(field string, port int) error {
	if port > MaxPort {
		return invalid(field, "Invalid %s: %d exceeds the maximum port number %d", field, port, MaxPort)
	}
	return nil
}

// validatePorts checks a multi-port service's ports as Consul 1.22 does:
// each named, in range and named once, exactly one of them the Default.
func validatePorts(ports structs.ServicePorts) error {
	if len(ports) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(ports))
	defaults := 0
	for _, p := range ports {
		switch {
		case strings.TrimSpace(p.Name) == "":
			return invalid("Ports", "Invalid Ports: Ports.Name cannot be empty")
		case p.Port <= 0:
			return invalid("Ports", "Invalid Ports: Ports.Port must be non-zero")
		case seen[p.Name]:
			return invalid("Ports", "Invalid Ports: Ports.Name %q has to be unique", p.Name)
		}
		if err := validatePort("Ports", p.Port); err != nil {
			return err
		}
		seen[p.Name] = true
		if p.Default {
			defaults++
		}
	}
	switch {
	case defaults > 1:
		return invalid("Ports", "Invalid Ports: only one port can be marked as default")
	case defaults == 0:
		return invalid("Ports", "Invalid Ports: one of the Ports must be marked as Default")
	}
	return nil
}

// isAnyAddress reports the unspecified addresses (0.0.0.0, ::), which no
// client could dial.
func isAnyAddress(a string) bool {
	a = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
	ip, err := netip.ParseAddr(a)
	return err == nil && ip.IsUnspecified()
}

func validateWeights(w *structs.Weights) error {
	switch {
	case w.Passing < 1:
		return fmt.Errorf("Passing must be greater than 0")
	case w.Warning < 0:
		return fmt.Errorf("Warning must be greater or equal than 0")
	case w.Passing > 65535 || w.Warning > 65535:
		return fmt.Errorf("Weight must be smaller than 65536")
	}
	return nil
}

// validateMeta applies Consul's service metadata rules. Gateways may carry
// the one reserved key Consul allows them.
func validateMeta(kind structs.ServiceKind, meta map[string]string) error {
	if len(meta) > metaMaxKeyPairs {
		return fmt.Errorf("Node metadata cannot contain more than %d key/value pairs", metaMaxKeyPairs)
	}
	for k, v := range meta {
		if err := validateMetaPair(kind, k, v); err != nil {
			return fmt.Errorf("Couldn't load metadata pair ('%s', '%s'): %w", k, v, err)
		}
	}
	return nil
}

func validateMetaPair(kind structs.ServiceKind, key, value string) error {
	switch {
	case key == "":
		return fmt.Errorf("Key cannot be blank")
	case !metaKeyFormat.MatchString(key):
		return fmt.Errorf("Key contains invalid characters")
	case len(key) > metaKeyMaxLength:
		return fmt.Errorf("Key is too long (limit: %d characters)", metaKeyMaxLength)
	case strings.HasPrefix(key, metaKeyReservedPrefix) &&
		!(key == "consul-wan-federation" && (kind == structs.ServiceKindMeshGateway || kind == structs.ServiceKindTerminatingGateway)):
		return fmt.Errorf("Key prefix '%s' is reserved for internal use", metaKeyReservedPrefix)
	case len(value) > metaValueMaxLength:
		return fmt.Errorf("Value is too long (limit: %d characters)", metaValueMaxLength)
	}
	return nil
}

func validateTaggedAddresses(ta map[string]structs.ServiceAddress) error {
	for _, k := range []string{TaggedAddressLANIPv4, TaggedAddressWANIPv4} {
		if sa, ok := ta[k]; ok {
			if ip := net.ParseIP(sa.Address); ip == nil || ip.To4() == nil {
				return invalid("TaggedAddresses."+k, "Service tagged address %q must be a valid ipv4 address", k)
			}
		}
	}
	for _, k := range []string{TaggedAddressLANIPv6, TaggedAddressWANIPv6} {
		if sa, ok := ta[k]; ok {
			if ip := net.ParseIP(sa.Address); ip == nil || ip.To4() != nil {
				return invalid("TaggedAddresses."+k, "Service tagged address %q must be a valid ipv6 address", k)
			}
		}
	}
	return nil
}

// fieldMsg is one failed rule: the field it is about and Consul's text.
type fieldMsg struct{ field, msg string }

// validateNodeService applies Consul's NodeService.Validate rules (the
// connect-proxy, gateway, Connect-native and nested-sidecar ones).
// Consul collects every failure with go-multierror; so do we, and the
// error names the first failing field.
func validateNodeService(s *structs.NodeService, conn *structs.ServiceDefinitionConnect) *ValidationError {
	var errs []fieldMsg
	add := func(field, format string, args ...any) {
		errs = append(errs, fieldMsg{field, fmt.Sprintf(format, args...)})
	}
	switch s.Kind {
	case structs.ServiceKindTypical:
	case structs.ServiceKindConnectProxy:
		if s.Port == 0 && s.SocketPath == "" {
			add("Port", "Port or SocketPath must be set for a %s", s.Kind)
		}
		if strings.TrimSpace(s.Proxy.DestinationServiceName) == "" {
			add("Proxy.DestinationServiceName", "Proxy.DestinationServiceName must be non-empty for Connect proxy services")
		}
		if s.Proxy.DestinationServiceName == "*" {
			add("Proxy.DestinationServiceName", "Proxy.DestinationServiceName must not be a wildcard for Connect proxy services")
		}
		if s.Connect.Native {
			add("Connect.Native", "A Proxy cannot also be Connect Native, only typical services")
		}
		errs = append(errs, validateUpstreams(s.Proxy.Upstreams)...)
		errs = append(errs, validateExpose(s.Proxy.Expose)...)
	case structs.ServiceKindMeshGateway, structs.ServiceKindTerminatingGateway, structs.ServiceKindIngressGateway:
		if s.Port == 0 && s.Kind != structs.ServiceKindIngressGateway {
			add("Port", "Port must be non-zero for a %s", s.Kind)
		}
		if conn != nil && conn.SidecarService != nil {
			add("Connect.SidecarService", "A %s cannot have a sidecar service defined", s.Kind)
		}
		p := s.Proxy
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"DestinationServiceName", p.DestinationServiceName != ""},
			{"DestinationServiceID", p.DestinationServiceID != ""},
			{"LocalServiceAddress", p.LocalServiceAddress != ""},
			{"LocalServicePort", p.LocalServicePort != 0},
			{"LocalServiceSocketPath", p.LocalServiceSocketPath != ""},
			{"Upstreams", len(p.Upstreams) != 0},
		} {
			if f.set {
				add("Proxy."+f.name, "The Proxy.%s configuration is invalid for a %s", f.name, s.Kind)
			}
		}
	default:
		add("Kind", "Invalid service kind %q", s.Kind)
	}
	if conn != nil && conn.SidecarService != nil {
		if conn.SidecarService.ID != "" {
			add("Connect.SidecarService.ID", "A SidecarService cannot specify an ID as this is managed by the agent")
		}
		if c := conn.SidecarService.Connect; c != nil && c.SidecarService != nil {
			add("Connect.SidecarService.Connect.SidecarService", "A SidecarService cannot have a nested SidecarService")
		}
	}
	if s.Connect.Native && s.Port == 0 && s.SocketPath == "" {
		add("Port", "Port or SocketPath must be set for a Connect native service.")
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.msg
	}
	return &ValidationError{Field: errs[0].field, Reason: multiError(msgs)}
}

func validateUpstreams(ups []structs.Upstream) []fieldMsg {
	var errs []fieldMsg
	keys := make(map[string]bool)
	binds := make(map[string]bool)
	for i, u := range ups {
		field := fmt.Sprintf("Proxy.Upstreams[%d]", i)
		if msg := upstreamProblem(u); msg != "" {
			errs = append(errs, fieldMsg{field, msg})
			continue
		}
		key := fmt.Sprintf("[type=%q, name=%q, partition=%q, namespace=%q, datacenter=%q, peer=%q]",
			u.DestinationType, u.DestinationName, u.DestinationPartition, u.DestinationNamespace, u.Datacenter, u.DestinationPeer)
		if keys[key] {
			errs = append(errs, fieldMsg{field, "upstreams cannot contain duplicates of " + key})
			continue
		}
		keys[key] = true
		addr := u.LocalBindSocketPath
		if u.LocalBindPort > 0 {
			host := u.LocalBindAddress
			if host == "" {
				host = "127.0.0.1"
			}
			addr = net.JoinHostPort(host, fmt.Sprint(u.LocalBindPort))
		}
		if binds[addr] && !u.CentrallyConfigured {
			errs = append(errs, fieldMsg{field, fmt.Sprintf(
				"upstreams cannot contain duplicates by local bind address and port or unix path; %q is specified twice", addr)})
			continue
		}
		binds[addr] = true
	}
	return errs
}

func upstreamProblem(u structs.Upstream) string {
	switch {
	case u.DestinationName == "":
		return "upstream destination name cannot be empty"
	case u.DestinationName == "*" && !u.CentrallyConfigured:
		return "upstream destination name cannot be a wildcard"
	case u.DestinationPeer != "" && u.Datacenter != "":
		return "upstream cannot specify both destination peer and datacenter"
	case u.LocalBindPort == 0 && u.LocalBindSocketPath == "" && !u.CentrallyConfigured:
		return "upstream local bind port or local socket path must be defined and nonzero"
	case u.LocalBindPort != 0 && u.LocalBindSocketPath != "" && !u.CentrallyConfigured:
		return "only one of upstream local bind port or local socket path can be defined and nonzero"
	}
	return ""
}

func validateExpose(e structs.ExposeConfig) []fieldMsg {
	var errs []fieldMsg
	seen := make(map[int]bool)
	for i, p := range e.Paths {
		field := fmt.Sprintf("Proxy.Expose.Paths[%d]", i)
		if p.Path == "" {
			errs = append(errs, fieldMsg{field, "expose.paths: empty path exposed"})
		}
		if seen[p.ListenerPort] {
			errs = append(errs, fieldMsg{field, "expose.paths: duplicate listener ports exposed"})
		}
		seen[p.ListenerPort] = true
		if p.ListenerPort <= 0 || p.ListenerPort > MaxPort {
			errs = append(errs, fieldMsg{field, fmt.Sprintf("expose.paths: invalid listener port: %d", p.ListenerPort)})
		}
		if proto := strings.ToLower(p.Protocol); proto != "" && proto != "http" && proto != "http2" {
			errs = append(errs, fieldMsg{field, fmt.Sprintf(
				"protocol '%s' not supported for path: %s, must be in: [http http2]", proto, p.Path)})
		}
	}
	return errs
}

// checkIsEmpty mirrors Consul's CheckType.Empty: a check block with nothing
// in it (what `"Check": {}` decodes to) is ignored, not refused.
func checkIsEmpty(c *structs.CheckType) bool {
	return c == nil || reflect.DeepEqual(*c, structs.CheckType{})
}

// nonEmptyChecks drops the empty check blocks, as Consul's
// ServiceDefinition.CheckTypes does.
func nonEmptyChecks(in structs.CheckTypes) structs.CheckTypes {
	var out structs.CheckTypes
	for _, c := range in {
		if !checkIsEmpty(c) {
			out = append(out, c)
		}
	}
	return out
}

// validateCheckTypes validates the service's check blocks; prefix is
// Consul's ("Invalid check: " for the service's own checks).
func validateCheckTypes(all structs.CheckTypes, prefix string) *ValidationError {
	checks := nonEmptyChecks(all)
	for i, c := range checks {
		field := "Check"
		if len(checks) > 1 {
			field = fmt.Sprintf("Checks[%d]", i)
		}
		if sub, msg := checkTypeProblem(c); msg != "" {
			return &ValidationError{Field: field + "." + sub, Reason: prefix + msg}
		}
		if c.Status != "" && !validStatus(c.Status) {
			return invalid(field+".Status", MsgBadCheckStatus)
		}
	}
	return nil
}

// ValidateCheckType applies Consul's CheckType.Validate rules (one of TTL,
// an interval check (HTTP, TCP, gRPC, script) or an alias; no negative
// durations) and returns the failing field and Consul's text, or "", "".
func ValidateCheckType(c *structs.CheckType) (field, msg string) {
	return checkTypeProblem(c)
}

func checkTypeProblem(c *structs.CheckType) (string, string) {
	intervalCheck := len(c.ScriptArgs) > 0 || c.HTTP != "" || c.TCP != "" || c.GRPC != ""
	switch {
	case c.Interval > 0 && c.TTL > 0:
		return "Interval", "Interval and TTL cannot both be specified"
	case (intervalCheck && c.Interval <= 0) || c.Interval < 0:
		return "Interval", "Interval must be > 0 for Script, HTTP, H2PING, TCP, UDP or OSService checks"
	case intervalCheck && c.IsAlias():
		return "Interval", "Interval cannot be set for Alias checks"
	case c.IsAlias() && c.TTL > 0:
		return "TTL", "TTL must be not be set for Alias checks"
	case !intervalCheck && !c.IsAlias() && c.TTL <= 0:
		return "TTL", "TTL must be > 0 for TTL checks"
	case c.OutputMaxSize < 0:
		return "OutputMaxSize", "MaxOutputMaxSize must be positive"
	case c.Timeout < 0:
		return "Timeout", "Timeout must be >= 0"
	case c.DeregisterCriticalServiceAfter < 0:
		return "DeregisterCriticalServiceAfter", "DeregisterCriticalServiceAfter must be >= 0"
	}
	return "", ""
}

func validStatus(s string) bool {
	return s == structs.HealthPassing || s == structs.HealthWarning || s == structs.HealthCritical
}
