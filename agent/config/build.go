package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
)

// problems collects every validation error so that an operator fixes a
// config in one round instead of one error per start.
type problems []error

func (p *problems) add(format string, args ...any) {
	*p = append(*p, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
}

func (p problems) err() error { return errors.Join(p...) }

// isNameOf reports whether s is non-empty and made only of ASCII letters
// (lower case only unless upper is true), digits, '-' and '_': Consul's rule
// for datacenter names (lower case) and node metadata keys (any case).
func isNameOf(s string, upper bool) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		ok := 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' ||
			upper && 'A' <= c && c <= 'Z'
		if !ok {
			return false
		}
	}
	return true
}

// build turns the merged source into a validated RuntimeConfig. NodeID is
// left as configured; Load resolves it last so that an invalid config never
// writes to the data dir.
func build(s *source, dev bool, opts LoadOptions) (*RuntimeConfig, []string, error) {
	var p problems
	var warnings []string
	rc := &RuntimeConfig{
		DevMode:              dev,
		ServerMode:           *s.Server,
		Bootstrap:            *s.Bootstrap,
		BootstrapExpect:      *s.BootstrapExpect,
		NodeID:               deref(s.NodeID),
		Datacenter:           strings.ToLower(strings.TrimSpace(*s.Datacenter)),
		DataDir:              deref(s.DataDir),
		RetryMax:             *s.RetryMax,
		LeaveOnTerminate:     leaveDefault(s.LeaveOnTerminate, !*s.Server),
		SkipLeaveOnInterrupt: leaveDefault(s.SkipLeaveOnInterrupt, *s.Server),
		RaftMultiplier:       *s.Performance.RaftMultiplier,
		Locality:             buildLocality(s.Locality),
		DisableUpdateCheck:   *s.DisableUpdateCheck,
		PidFile:              deref(s.PidFile),
		EnableDebug:          *s.EnableDebug,
		EnableScriptChecks:   *s.EnableScriptChecks,
		// Consul: enable_script_checks implies the local ones.
		EnableLocalScriptChecks: *s.EnableLocalScriptChecks || *s.EnableScriptChecks,
		Limits: Limits{
			KVMaxValueSize: *s.Limits.KVMaxValueSize,
			TxnMaxReqLen:   *s.Limits.TxnMaxReqLen,
		},
		Connect: Connect{
			Enabled:    *s.Connect.Enabled,
			CAProvider: strings.ToLower(*s.Connect.CAProvider),
			ClusterID:  strings.ToLower(deref(s.Connect.CAConfig.ClusterID)),
		},
		Logging: Logging{JSON: *s.LogJSON},
	}
	rc.XDSUpdateMaxPerSecond = *s.XDS.UpdateMaxPerSecond
	rc.Autopilot = buildAutopilot(s.Autopilot, &p) // autopilot.go
	if rc.XDSUpdateMaxPerSecond < 0 {
		p.add("xds.update_max_per_second must not be negative")
	}
	rc.ACL = buildACL(s.ACL, &p) // acl.go
	// Consul: intentions default to the ACL default policy.
	rc.IntentionDefaultPolicy = rc.ACL.DefaultPolicy

	// Identity.
	rc.NodeName = strings.TrimSpace(deref(s.NodeName))
	if rc.NodeName == "" {
		host, err := opts.Hostname()
		if err != nil {
			p.add("node_name is not set and the host name is unknown: %v", err)
		}
		rc.NodeName = host
	}
	if rc.NodeName == "" {
		p.add("node_name cannot be empty")
	}
	if rc.Datacenter == "" {
		p.add("datacenter cannot be empty")
	} else if !isNameOf(rc.Datacenter, false) {
		p.add("datacenter %q can only contain lowercase alphanumeric, - or _ characters", rc.Datacenter)
	}
	if len(s.NodeMeta) > 0 {
		rc.NodeMeta = make(map[string]string, len(s.NodeMeta))
		for k, v := range s.NodeMeta {
			rc.NodeMeta[k] = v
		}
		validateNodeMeta(rc.NodeMeta, &p)
	}
	if rc.NodeID != "" && !IsUUID(strings.TrimSpace(rc.NodeID)) {
		p.add("node_id %q is not a valid UUID", rc.NodeID)
	}

	// Roles.
	switch {
	case rc.BootstrapExpect < 0:
		p.add("bootstrap_expect cannot be %d: must be greater than or equal to zero", rc.BootstrapExpect)
	case rc.BootstrapExpect > 0 && rc.Bootstrap:
		p.add("'bootstrap_expect > 0' and 'bootstrap = true' are mutually exclusive")
	case rc.BootstrapExpect > 0 && dev:
		p.add("'bootstrap_expect > 0' is not allowed in dev mode")
	case rc.BootstrapExpect > 0 && !rc.ServerMode:
		p.add("'bootstrap_expect > 0' requires 'server = true'")
	case rc.Bootstrap && !rc.ServerMode:
		p.add("'bootstrap = true' requires 'server = true'")
	case rc.BootstrapExpect == 1:
		// Consul turns this into bootstrap mode.
		rc.Bootstrap, rc.BootstrapExpect = true, 0
		warnings = append(warnings, "bootstrap_expect is set to 1; this is the same as bootstrap mode")
	case rc.BootstrapExpect > 1 && rc.BootstrapExpect%2 == 0:
		warnings = append(warnings, fmt.Sprintf("bootstrap_expect = %d: a cluster with an even number of servers does not achieve optimum fault tolerance", rc.BootstrapExpect))
	}
	if rc.Bootstrap && !dev && len(p) == 0 {
		warnings = append(warnings, "bootstrap = true: do not enable unless necessary")
	}

	// Data dir.
	if rc.DataDir == "" {
		if !dev {
			p.add("data_dir cannot be empty (only -dev runs without one)")
		}
	} else if fi, err := os.Stat(rc.DataDir); err == nil && !fi.IsDir() {
		p.add("data_dir %q is not a directory", rc.DataDir)
	}

	// Durations.
	rc.RetryInterval = duration("retry_interval", s.RetryInterval, true, &p)
	rc.ReconnectTimeout = duration("reconnect_timeout", s.ReconnectTimeout, true, &p)
	rc.SessionTTLMin = duration("session_ttl_min", s.SessionTTLMin, true, &p)
	rc.RPCHoldTimeout = duration("performance.rpc_hold_timeout", s.Performance.RPCHoldTimeout, true, &p)
	rc.AEInterval = duration("ae_interval", s.AEInterval, true, &p)
	rc.SyncCoordinateIntervalMin = duration("sync_coordinate_interval_min", s.SyncCoordinateIntervalMin, true, &p)
	rc.CheckUpdateInterval = duration("check_update_interval", s.CheckUpdateInterval, false, &p)
	rc.Connect.LeafCertTTL = duration("connect.ca_config.leaf_cert_ttl", s.Connect.CAConfig.LeafCertTTL, true, &p)
	rc.Connect.RootCertTTL = duration("connect.ca_config.root_cert_ttl", s.Connect.CAConfig.RootCertTTL, true, &p)
	rc.Connect.CSRMaxPerSecond = s.Connect.CAConfig.CSRMaxPerSecond
	if r := rc.Connect.CSRMaxPerSecond; r != nil && *r < 0 {
		p.add("connect.ca_config.csr_max_per_second must be >= 0, got %v", *r)
	}
	if c := s.Connect.CAConfig.CSRMaxConcurrent; c != nil {
		if *c < 0 {
			p.add("connect.ca_config.csr_max_concurrent must be >= 0, got %d", *c)
		}
		rc.Connect.CSRMaxConcurrent = *c
	}
	if minRT, _ := time.ParseDuration(MinReconnectTimeout); rc.ReconnectTimeout > 0 && rc.ReconnectTimeout < minRT {
		p.add("reconnect_timeout must be >= %s", minRT)
	}
	if rc.RetryMax < 0 {
		p.add("retry_max cannot be negative")
	}

	if rc.RaftMultiplier < 1 || rc.RaftMultiplier > 10 {
		p.add("performance.raft_multiplier cannot be %d: must be between 1 and 10", rc.RaftMultiplier)
	}
	if rc.Limits.KVMaxValueSize == 0 {
		p.add("limits.kv_max_value_size must be greater than zero")
	}
	if rc.Limits.TxnMaxReqLen == 0 {
		p.add("limits.txn_max_req_len must be greater than zero")
	}
	if rc.Connect.CAProvider != DefaultCAProvider {
		p.add("connect.ca_provider %q is not supported: Trellis has only the built-in CA (\"consul\")", rc.Connect.CAProvider)
	}
	if rc.Connect.ClusterID != "" && !IsUUID(rc.Connect.ClusterID) {
		p.add("connect.ca_config.cluster_id %q is not a valid UUID", rc.Connect.ClusterID)
	}

	lvl, err := normalizeLogLevel(*s.LogLevel)
	if err != nil {
		p.add("log_level: %v", err)
	}
	rc.Logging.Level = lvl

	rc.RetryJoin = joinAddrs(append(append([]string(nil), s.RetryJoin...), s.StartJoin...), &p)

	rc.Services = append(append([]Definition(nil), s.Service...), s.Services...)
	rc.Checks = append(append([]Definition(nil), s.Check...), s.Checks...)
	rc.Watches = append([]map[string]any(nil), s.Watches...)

	warnings = append(warnings, buildEncrypt(s, rc, &p)...)

	buildPorts(s, rc, &p)
	buildAddresses(s, rc, opts, &p)
	buildDNS(s, rc, &p)
	buildTLS(s, rc)
	warnings = append(warnings, buildAutoEncrypt(s.AutoEncrypt, rc, &p)...) // auto_encrypt.go
	warnings = append(warnings, tlsPortWarnings(rc)...)
	if len(p) == 0 {
		checkPortConflicts(rc, &p)
	}

	if err := p.err(); err != nil {
		return nil, nil, err
	}
	return rc, warnings, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// duration parses a Go duration string ("15s"); positive requires > 0,
// otherwise >= 0 is accepted.
func duration(name string, v *string, positive bool, p *problems) time.Duration {
	if v == nil {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(*v))
	if err != nil {
		p.add("%s: invalid duration %q (use Go syntax such as \"15s\" or \"1h30m\")", name, *v)
		return 0
	}
	switch {
	case d < 0:
		p.add("%s cannot be negative, got %s", name, *v)
	case d == 0 && positive:
		p.add("%s must be greater than zero", name)
	}
	return d
}

func validateNodeMeta(meta map[string]string, p *problems) {
	const maxPairs, maxKeyLen, maxValueLen = 64, 128, 512
	if len(meta) > maxPairs {
		p.add("node_meta cannot contain more than %d key/value pairs", maxPairs)
	}
	for k, v := range meta {
		switch {
		case !isNameOf(k, true):
			p.add("node_meta key %q contains invalid characters (allowed: letters, digits, - and _)", k)
		case len(k) > maxKeyLen:
			p.add("node_meta key %q is longer than %d characters", k, maxKeyLen)
		case strings.HasPrefix(k, "consul-"):
			p.add("node_meta key %q: the prefix 'consul-' is reserved for internal use", k)
		}
		if len(v) > maxValueLen {
			p.add("node_meta value for key %q is longer than %d characters", k, maxValueLen)
		}
	}
}

// joinAddrs trims and checks retry_join entries. Cloud auto-join
// ("provider=aws ...") needs go-discover, which Trellis does not ship.
func joinAddrs(in []string, p *problems) []string {
	var out []string
	for _, a := range in {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
			p.add("retry_join: empty address")
		case strings.Contains(a, "provider="):
			p.add("retry_join %q: cloud auto-join is not supported; give host or host:port addresses", a)
		default:
			out = append(out, a)
		}
	}
	return out
}

func buildPorts(s *source, rc *RuntimeConfig, p *problems) {
	ps := s.Ports
	rc.Ports = Ports{
		HTTP: *ps.HTTP, GRPC: *ps.GRPC, Server: *ps.Server, SerfLAN: *ps.SerfLAN,
		SidecarMin: *ps.SidecarMinPort, SidecarMax: *ps.SidecarMaxPort,
		DNS: *ps.DNS, HTTPS: *ps.HTTPS, GRPCTLS: *ps.GRPCTLS, SerfWAN: *ps.SerfWAN,
	}
	for _, c := range []struct {
		name     string
		port     int
		optional bool // -1 disables it
	}{
		{"ports.http", rc.Ports.HTTP, true},
		{"ports.grpc", rc.Ports.GRPC, true},
		{"ports.server", rc.Ports.Server, false},
		{"ports.serf_lan", rc.Ports.SerfLAN, false},
		{"ports.sidecar_min_port", rc.Ports.SidecarMin, false},
		{"ports.sidecar_max_port", rc.Ports.SidecarMax, false},
		{"ports.dns", rc.Ports.DNS, true},
		{"ports.https", rc.Ports.HTTPS, true},
		{"ports.grpc_tls", rc.Ports.GRPCTLS, true},
		{"ports.serf_wan", rc.Ports.SerfWAN, true},
	} {
		if c.optional && c.port == -1 {
			continue
		}
		if c.port < 1 || c.port > 65535 {
			if c.optional {
				p.add("%s: invalid port %d: must be between 1 and 65535, or -1 to disable", c.name, c.port)
			} else {
				p.add("%s: invalid port %d: must be between 1 and 65535", c.name, c.port)
			}
		}
	}
	if rc.Ports.SidecarMin > rc.Ports.SidecarMax {
		p.add("ports.sidecar_min_port (%d) must not exceed ports.sidecar_max_port (%d)", rc.Ports.SidecarMin, rc.Ports.SidecarMax)
	}
}

func buildAddresses(s *source, rc *RuntimeConfig, opts LoadOptions, p *problems) {
	a := &rc.Addresses
	a.Bind = singleIP("bind_addr", *s.BindAddr, p)
	a.SerfLAN = a.Bind
	if s.SerfLANBind != nil {
		a.SerfLAN = singleIP("serf_lan", *s.SerfLANBind, p)
	}
	if s.AdvertiseAddr != nil && strings.TrimSpace(*s.AdvertiseAddr) != "" {
		a.Advertise = singleIP("advertise_addr", *s.AdvertiseAddr, p)
		if ip, err := netip.ParseAddr(a.Advertise); err == nil && ip.IsUnspecified() {
			p.add("advertise_addr cannot be %s: give an address other nodes can reach", a.Advertise)
		}
	} else if a.Bind != "" {
		a.Advertise = a.Bind
		if ip, _ := netip.ParseAddr(a.Bind); ip.IsUnspecified() {
			adv, err := detectAdvertise(ip.Is6(), opts.InterfaceAddrs)
			if err != nil {
				p.add("%v", err)
			}
			a.Advertise = adv
		}
	}

	a.Client = ipList("client_addr", *s.ClientAddr, p)
	listOr := func(name string, v *string) []string {
		if v == nil || strings.TrimSpace(*v) == "" {
			return append([]string(nil), a.Client...)
		}
		return ipList(name, *v, p)
	}
	a.HTTP = listOr("addresses.http", s.Addresses.HTTP)
	a.GRPC = listOr("addresses.grpc", s.Addresses.GRPC)
	a.DNS = listOr("addresses.dns", s.Addresses.DNS)
	a.HTTPS = listOr("addresses.https", s.Addresses.HTTPS)
	a.GRPCTLS = listOr("addresses.grpc_tls", s.Addresses.GRPCTLS)
}

// singleIP parses an address key that takes exactly one IP.
func singleIP(name, v string, p *problems) string {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		p.add("%s cannot be empty", name)
		return ""
	case strings.Contains(v, "{{"):
		p.add("%s %q: go-sockaddr templates are not supported; give an IP address", name, v)
		return ""
	case len(strings.Fields(v)) > 1:
		p.add("%s %q cannot contain multiple addresses", name, v)
		return ""
	}
	ip, err := netip.ParseAddr(v)
	if err != nil {
		p.add("%s %q is not an IP address", name, v)
		return ""
	}
	return ip.Unmap().String()
}

// ipList parses a space-separated list of IPs or unix:// sockets
// (client_addr, addresses.*).
func ipList(name, v string, p *problems) []string {
	if strings.Contains(v, "{{") {
		p.add("%s %q: go-sockaddr templates are not supported; give IP addresses", name, v)
		return nil
	}
	var out []string
	before := len(*p)
	for _, f := range strings.Fields(v) {
		if strings.HasPrefix(f, "unix://") {
			if len(f) == len("unix://") {
				p.add("%s: empty unix socket path", name)
				continue
			}
			out = append(out, f)
			continue
		}
		ip, err := netip.ParseAddr(f)
		if err != nil {
			p.add("%s: %q is not an IP address or unix:// socket", name, f)
			continue
		}
		out = append(out, ip.Unmap().String())
	}
	if len(out) == 0 && len(*p) == before {
		p.add("%s cannot be empty", name)
	}
	return out
}

// detectAdvertise picks the address to advertise when binding the wildcard,
// as Consul does: the single private IPv4 address of the host (or its
// single global IPv6 address for "::"). Ambiguity is an error, not a guess.
func detectAdvertise(v6 bool, addrs func() ([]net.Addr, error)) (string, error) {
	list, err := addrs()
	if err != nil {
		return "", fmt.Errorf("finding an address to advertise: %w", err)
	}
	cgnat := netip.MustParsePrefix("100.64.0.0/10")
	var found []string
	for _, a := range list {
		var ip netip.Addr
		switch x := a.(type) {
		case *net.IPNet:
			ip, _ = netip.AddrFromSlice(x.IP)
		case *net.IPAddr:
			ip, _ = netip.AddrFromSlice(x.IP)
		default:
			continue
		}
		ip = ip.Unmap()
		if v6 {
			if ip.Is6() && ip.IsGlobalUnicast() && !ip.IsPrivate() {
				found = append(found, ip.String())
			}
			continue
		}
		if ip.Is4() && (ip.IsPrivate() || cgnat.Contains(ip)) {
			found = append(found, ip.String())
		}
	}
	kind := "private IPv4"
	if v6 {
		kind = "public IPv6"
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no %s address found: set bind_addr (-bind) or advertise_addr (-advertise)", kind)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("multiple %s addresses found (%s): set bind_addr (-bind) or advertise_addr (-advertise)", kind, strings.Join(found, ", "))
}

// checkPortConflicts rejects two listeners of Trellis on one address and
// port. Listeners that stay closed (a TLS port without a certificate) are
// not checked; DNS,
// which binds both UDP and TCP, is compared with the TCP listeners.
func checkPortConflicts(rc *RuntimeConfig, p *problems) {
	type listener struct {
		name string
		ips  []string
		port int
	}
	ls := []listener{
		{"ports.server", []string{rc.Addresses.Bind}, rc.Ports.Server},
		{"ports.serf_lan", []string{rc.Addresses.SerfLAN}, rc.Ports.SerfLAN},
	}
	if rc.Ports.HTTP > 0 {
		ls = append(ls, listener{"ports.http", rc.Addresses.HTTP, rc.Ports.HTTP})
	}
	if rc.Ports.HTTPS > 0 && rc.HTTPSHasCert() {
		ls = append(ls, listener{"ports.https", rc.Addresses.HTTPS, rc.Ports.HTTPS})
	}
	if rc.Ports.GRPCTLS > 0 && rc.GRPCTLSHasCert() {
		ls = append(ls, listener{"ports.grpc_tls", rc.Addresses.GRPCTLS, rc.Ports.GRPCTLS})
	}
	if rc.ServerMode && rc.Ports.SerfWAN > 0 {
		ls = append(ls, listener{"ports.serf_wan", []string{rc.Addresses.Bind}, rc.Ports.SerfWAN})
	}
	if rc.Ports.GRPC > 0 {
		ls = append(ls, listener{"ports.grpc", rc.Addresses.GRPC, rc.Ports.GRPC})
	}
	if rc.Ports.DNS > 0 {
		ls = append(ls, listener{"ports.dns", rc.Addresses.DNS, rc.Ports.DNS})
	}
	overlap := func(a, b string) bool {
		if strings.HasPrefix(a, "unix://") || strings.HasPrefix(b, "unix://") {
			return false
		}
		ia, _ := netip.ParseAddr(a)
		ib, _ := netip.ParseAddr(b)
		return ia == ib || ia.IsUnspecified() || ib.IsUnspecified()
	}
	shared := func(x, y listener) (string, bool) {
		if x.port != y.port {
			return "", false
		}
		for _, a := range x.ips {
			for _, b := range y.ips {
				if overlap(a, b) {
					return a, true
				}
			}
		}
		return "", false
	}
	for i := range ls {
		for j := i + 1; j < len(ls); j++ {
			if ip, clash := shared(ls[i], ls[j]); clash {
				p.add("%s and %s both use port %d on %s", ls[i].name, ls[j].name, ls[i].port, ip)
			}
		}
	}
}

// leaveDefault resolves a leave setting with Consul's per-role default:
// clients leave on both signals; servers leave on neither, because a server
// that leaves shrinks the Raft quorum, and a whole cluster stopped that way
// would restart with every server but the last outside the configuration.
func leaveDefault(v *bool, def bool) bool {
	if v != nil {
		return *v
	}
	return def
}

// buildLocality is the node's locality, nil when neither key is set.
func buildLocality(l localitySource) *Locality {
	if l.Region == nil && l.Zone == nil {
		return nil
	}
	var out Locality
	if l.Region != nil {
		out.Region = *l.Region
	}
	if l.Zone != nil {
		out.Zone = *l.Zone
	}
	return &out
}
