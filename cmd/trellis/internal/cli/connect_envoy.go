package cli

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/trellis-mesh/trellis/xds/bootstrap"
)

const connectEnvoyHelp = `
Usage: trellis connect envoy [options] [-- pass-through options]

  Generates the bootstrap configuration of an Envoy proxy for a sidecar or
  gateway registered on the local agent, then runs "envoy" from PATH with it.
  Options after -- are passed to Envoy.

  The proxy is found with -proxy-id, with -sidecar-for (the connect-proxy
  whose Proxy.DestinationServiceID is that service ID), or with -gateway (the
  one gateway of that kind on the agent, or, with -register, one registered
  now).

    $ trellis connect envoy -sidecar-for web
    $ trellis connect envoy -sidecar-for web -bootstrap > bootstrap.json
    $ trellis connect envoy -gateway=mesh -register -address 10.0.0.5:8443
    $ trellis connect envoy -proxy-id web-sidecar-proxy -- --log-level debug`

// gatewayKinds maps -gateway values to service kinds.
func gatewayKinds() map[string]string {
	return map[string]string{
		"mesh":        "mesh-gateway",
		"ingress":     "ingress-gateway",
		"terminating": "terminating-gateway",
	}
}

// defaultGatewayPort is the port a registered gateway gets without one in
// -address, as in Consul.
const defaultGatewayPort = 443

// DefaultGRPCAddr is the agent's xDS gRPC address unless -grpc-addr or
// CONSUL_GRPC_ADDR says otherwise.
const DefaultGRPCAddr = "127.0.0.1:8502"

// connectEnvoyCmd holds the parsed flags of `connect envoy`.
type connectEnvoyCmd struct {
	hf                 httpFlags
	proxyID            string
	sidecarFor         string
	nodeName           string
	gateway            string
	register           bool
	lanAddress         gatewayAddrFlag
	wanAddress         gatewayAddrFlag
	service            string
	deregAfterCritical string
	adminBind          string
	adminAccessLogPath string
	grpcAddr           string
	grpcCAFile         string
	bootstrap          bool
	envoyBinary        string
	omitDeprecatedTags bool

	gatewayKind string
}

// runConnectEnvoy implements `trellis connect envoy`.
func runConnectEnvoy(args []string, env *Env) int {
	var c connectEnvoyCmd
	fs := newFlagSet("connect envoy", connectEnvoyHelp, env.Stderr)
	c.flags(fs, env)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if err := c.checkFlags(); err != nil {
		fmt.Fprintln(env.Stderr, err)
		return 1
	}
	client, err := c.hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error connecting to Consul agent: %s\n", err)
		return 1
	}
	ctx := context.Background()
	if err := c.resolveProxyID(ctx, client); err != nil {
		fmt.Fprintln(env.Stderr, err)
		return 1
	}
	if c.register {
		if err := c.registerGateway(ctx, client); err != nil {
			fmt.Fprintln(env.Stderr, err)
			return 1
		}
		if !c.bootstrap {
			// stdout carries only the JSON with -bootstrap.
			fmt.Fprintf(env.Stdout, "Registered service: %s\n", c.service)
		}
	}
	cfg, err := c.bootstrapConfig(ctx, client, env)
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return 1
	}
	out, err := bootstrap.Generate(cfg)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error generating the Envoy bootstrap: %s\n", err)
		return 1
	}
	if c.bootstrap {
		if _, err := env.Stdout.Write(out); err != nil {
			return 1
		}
		return 0
	}
	binary, err := c.findEnvoy(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Couldn't find envoy binary: %s\n", err)
		return 1
	}
	// On success this does not return: the process becomes Envoy.
	err = execEnvoy(binary, out, fs.Args())
	fmt.Fprintf(env.Stderr, "Failed to exec envoy: %s\n", err)
	return 1
}

func (c *connectEnvoyCmd) flags(fs *flag.FlagSet, env *Env) {
	fs.StringVar(&c.proxyID, "proxy-id", env.Getenv("CONNECT_PROXY_ID"),
		"The proxy's service ID on the local agent (default CONNECT_PROXY_ID).")
	fs.StringVar(&c.sidecarFor, "sidecar-for", env.Getenv("CONNECT_SIDECAR_FOR"),
		"The ID of a service instance on the local agent that this proxy is the sidecar for. "+
			"Exactly one connect-proxy with Proxy.DestinationServiceID set to it must be registered (default CONNECT_SIDECAR_FOR).")
	fs.StringVar(&c.nodeName, "node-name", "",
		"The node the proxy is registered on, when it is not the local agent's. Requires -proxy-id.")
	fs.StringVar(&c.gateway, "gateway", "", "The kind of gateway: mesh, ingress or terminating.")
	fs.BoolVar(&c.register, "register", false, "Register the gateway service on the local agent before starting Envoy.")
	fs.Var(&c.lanAddress, "address", "The `address:port` (LAN) to register the gateway with (port 443 by default).")
	fs.Var(&c.wanAddress, "wan-address", "The `address:port` (WAN) to register the gateway with.")
	fs.StringVar(&c.service, "service", "", "The service name of the gateway registration (default the gateway kind, e.g. mesh-gateway).")
	fs.StringVar(&c.deregAfterCritical, "deregister-after-critical", "6h",
		"How long the registered gateway's health check may fail before the agent deregisters it.")
	fs.StringVar(&c.adminBind, "admin-bind", bootstrap.DefaultAdminBind,
		"The address:port of Envoy's admin server. Keep it off untrusted networks: it controls the proxy and its secrets.")
	fs.StringVar(&c.adminAccessLogPath, "admin-access-log-path", bootstrap.DefaultAdminAccessLogPath,
		"The file Envoy's admin server logs its requests to.")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "",
		"The agent's gRPC (xDS) address: host:port, http(s)://host:port or unix:///path (default CONSUL_GRPC_ADDR or "+DefaultGRPCAddr+").")
	fs.StringVar(&c.grpcCAFile, "grpc-ca-file", "",
		"A PEM file of CAs to verify the agent's gRPC certificate with, for an https:// or unix:// -grpc-addr (default CONSUL_GRPC_CACERT).")
	fs.BoolVar(&c.bootstrap, "bootstrap", false, "Print the bootstrap JSON and exit instead of running Envoy.")
	fs.StringVar(&c.envoyBinary, "envoy-binary", "", "The Envoy binary to run (default \"envoy\" from PATH).")
	fs.BoolVar(&c.omitDeprecatedTags, "omit-deprecated-tags", false,
		"Leave out the pre-1.9 consul.<tag> stats tags, keeping consul.destination.<tag>.")
	c.hf.register(fs, false)
}

// checkFlags rejects contradictory flags, with Consul's messages.
func (c *connectEnvoyCmd) checkFlags() error {
	if c.nodeName != "" && c.proxyID == "" {
		return errors.New("'-node-name' requires '-proxy-id'")
	}
	if c.gateway != "" {
		kind, ok := gatewayKinds()[c.gateway]
		if !ok {
			return errors.New("Gateway must be one of: terminating, mesh, or ingress")
		}
		c.gatewayKind = kind
		if c.service == "" {
			c.service = kind
		}
	}
	if c.register {
		if c.nodeName != "" {
			return errors.New("'-register' cannot be used with '-node-name'")
		}
		if c.gateway == "" {
			return errors.New("Auto-Registration can only be used for gateways")
		}
	}
	return nil
}

// agentServiceInfo is the part of an agent or catalog service this command
// reads.
type agentServiceInfo struct {
	Kind       string
	ID         string
	Service    string
	Address    string
	Port       int
	Datacenter string
	// Connect is set on a Connect-native service.
	Connect *struct{ Native bool }
	Proxy   *struct {
		DestinationServiceName string
		DestinationServiceID   string
		// Config is the proxy's opaque config, where the bootstrap keys
		// (envoy_prometheus_bind_addr, ...) live.
		Config map[string]any
	}
}

// resolveProxyID sets proxyID from -sidecar-for or -gateway when it was
// not given.
func (c *connectEnvoyCmd) resolveProxyID(ctx context.Context, client *apiClient) error {
	if c.proxyID != "" {
		return nil
	}
	switch {
	case c.sidecarFor != "":
		id, err := lookupSidecarProxyID(ctx, client, c.sidecarFor)
		if err != nil {
			return err
		}
		c.proxyID = id
	case c.gateway != "" && !c.register:
		svc, err := lookupGateway(ctx, client, c.gatewayKind)
		if err != nil {
			return err
		}
		c.proxyID, c.service = svc.ID, svc.Service
	case c.gateway != "" && c.register:
		c.proxyID = c.service
	}
	if c.proxyID == "" {
		return errors.New("No proxy ID specified. One of -proxy-id, -sidecar-for, or -gateway is required")
	}
	return nil
}

// lookupSidecarProxyID finds the one connect-proxy on the local agent whose
// destination service ID is serviceID (case-insensitively, as Consul).
func lookupSidecarProxyID(ctx context.Context, client *apiClient, serviceID string) (string, error) {
	ids, err := localServiceIDs(ctx, client, func(svc agentServiceInfo) bool {
		return svc.Kind == "connect-proxy" && svc.Proxy != nil && strings.EqualFold(svc.Proxy.DestinationServiceID, serviceID)
	})
	if err != nil {
		return "", fmt.Errorf("Failed looking up sidecar proxy info for %s: %w", serviceID, err)
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("No sidecar proxy registered for %s", serviceID)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("More than one sidecar proxy registered for %s.\n"+
		"    Start proxy with -proxy-id and one of the following IDs: %s", serviceID, strings.Join(ids, ", "))
}

// localServiceIDs lists, sorted, the IDs of the local agent's services
// that match.
func localServiceIDs(ctx context.Context, client *apiClient, match func(agentServiceInfo) bool) ([]string, error) {
	var svcs map[string]agentServiceInfo
	if err := client.getJSON(ctx, "/v1/agent/services", nil, false, &svcs); err != nil {
		return nil, err
	}
	var ids []string
	for _, svc := range svcs {
		if match(svc) {
			ids = append(ids, svc.ID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// lookupGateway finds the one gateway of kind on the local agent.
func lookupGateway(ctx context.Context, client *apiClient, kind string) (agentServiceInfo, error) {
	var svcs map[string]agentServiceInfo
	if err := client.getJSON(ctx, "/v1/agent/services", nil, false, &svcs); err != nil {
		return agentServiceInfo{}, fmt.Errorf("Failed looking up %s instances: %w", kind, err)
	}
	var found []agentServiceInfo
	for _, svc := range svcs {
		if svc.Kind == kind {
			found = append(found, svc)
		}
	}
	switch len(found) {
	case 0:
		return agentServiceInfo{}, fmt.Errorf("No %s services registered with this agent", kind)
	case 1:
		return found[0], nil
	}
	return agentServiceInfo{}, fmt.Errorf("Cannot lookup the %s's proxy ID because multiple are registered with the agent", kind)
}

// proxyService fetches the proxy's registration: from the local agent, or
// from the catalog with -node-name.
func (c *connectEnvoyCmd) proxyService(ctx context.Context, client *apiClient) (agentServiceInfo, error) {
	if c.nodeName == "" {
		var svc agentServiceInfo
		if err := client.getJSON(ctx, "/v1/agent/service/"+url.PathEscape(c.proxyID), nil, false, &svc); err != nil {
			return svc, fmt.Errorf("failed fetch proxy config from local agent: %w", err)
		}
		return svc, nil
	}
	var ns *struct {
		Node     struct{ Datacenter string }
		Services map[string]agentServiceInfo
	}
	if err := client.getJSON(ctx, "/v1/catalog/node/"+url.PathEscape(c.nodeName), nil, true, &ns); err != nil {
		return agentServiceInfo{}, fmt.Errorf("failed to fetch proxy config from catalog for node %q: %w", c.nodeName, err)
	}
	if ns == nil {
		return agentServiceInfo{}, fmt.Errorf("Node %q not found", c.nodeName)
	}
	svc, ok := ns.Services[c.proxyID]
	if !ok {
		return svc, fmt.Errorf("Proxy service with ID %q not found", c.proxyID)
	}
	if svc.Datacenter == "" {
		svc.Datacenter = ns.Node.Datacenter
	}
	return svc, nil
}

// bootstrapConfig gathers what the bootstrap needs: the registration, the
// addresses (resolved to IPs, since Envoy's static clusters and listeners
// take no names) and the token.
func (c *connectEnvoyCmd) bootstrapConfig(ctx context.Context, client *apiClient, env *Env) (bootstrap.Config, error) {
	svc, err := c.proxyService(ctx, client)
	if err != nil {
		return bootstrap.Config{}, err
	}
	if svc.Kind == "" {
		return bootstrap.Config{}, errors.New("service is not a Connect proxy or gateway")
	}
	opaque, accessLogs, err := c.proxyDefaults(ctx, client, svc)
	if err != nil {
		return bootstrap.Config{}, err
	}
	cfg := bootstrap.Config{
		ProxyID:            c.proxyID,
		ProxyCluster:       svc.Service,
		NodeName:           c.nodeName,
		Datacenter:         svc.Datacenter,
		AdminAccessLogPath: c.adminAccessLogPath,
		Token:              client.token,
		OmitDeprecatedTags: c.omitDeprecatedTags,
	}
	if svc.Proxy != nil && svc.Proxy.DestinationServiceName != "" {
		// A sidecar's node cluster is the service it fronts, as in Consul.
		cfg.ProxyCluster = svc.Proxy.DestinationServiceName
	}
	if cfg.AdminBind, err = resolveHostPort(ctx, "admin bind address", c.adminBind); err != nil {
		return cfg, err
	}
	if err := c.agentAddress(ctx, env, &cfg); err != nil {
		return cfg, err
	}
	if err := metricsBindAddrs(ctx, opaque, &cfg); err != nil {
		return cfg, err
	}
	if err := c.adminAccessLogs(accessLogs, &cfg, env); err != nil {
		return cfg, err
	}
	if svc.Kind == "ingress-gateway" {
		// The registered address is what the gateway's health check probes,
		// and the ingress listeners (from the config entry) may not cover
		// it: Envoy answers there itself.
		if ready := readyAddr(c.lanAddress, svc); ready != "" {
			if cfg.ReadyBindAddr, err = resolveHostPort(ctx, "ready bind address", ready); err != nil {
				return cfg, err
			}
		}
	}
	return cfg, nil
}

// readyAddr is where an ingress gateway's readiness listener binds: -address,
// else the registered address and port (loopback when the registration has
// no address), or nowhere when neither gives a port.
func readyAddr(flagAddr gatewayAddrFlag, svc agentServiceInfo) string {
	addr, port := svc.Address, svc.Port
	if flagAddr.set {
		addr, port = flagAddr.value()
	}
	if port <= 0 {
		return ""
	}
	if addr == "" {
		addr = "127.0.0.1"
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

// agentAddress fills the agent's gRPC address, socket and TLS settings.
func (c *connectEnvoyCmd) agentAddress(ctx context.Context, env *Env, cfg *bootstrap.Config) error {
	g, err := resolveAgentGRPC(ctx, env, c.grpcAddr, c.grpcCAFile, c.hf.caFile)
	if err != nil {
		return err
	}
	cfg.AgentAddress, cfg.AgentSocket, cfg.AgentTLS, cfg.AgentCAFile = g.address, g.socket, g.tls, g.caFile
	return nil
}

// agentGRPC is where a proxy or a gRPC application reaches the agent's
// xDS server: a TCP address or a Unix socket, with TLS or without.
type agentGRPC struct {
	// address is ip:port; empty for a socket.
	address string
	socket  string
	tls     bool
	// caFile is the absolute path of the CA bundle to verify the agent
	// with ("" for the system's).
	caFile string
}

// resolveAgentGRPC reads -grpc-addr (else CONSUL_GRPC_ADDR, else the
// default) and -grpc-ca-file (else CONSUL_GRPC_CACERT, else, for TLS, the
// HTTP API's -ca-file or CONSUL_CACERT), as Consul's connect commands do.
func resolveAgentGRPC(ctx context.Context, env *Env, flagAddr, flagCAFile, httpCAFile string) (agentGRPC, error) {
	var g agentGRPC
	addr := firstNonEmpty(flagAddr, env.Getenv("CONSUL_GRPC_ADDR"), DefaultGRPCAddr)
	caFile := firstNonEmpty(flagCAFile, env.Getenv("CONSUL_GRPC_CACERT"))
	lower := strings.ToLower(addr)
	switch {
	case strings.HasPrefix(lower, "unix://"):
		g.socket = addr[len("unix://"):]
		if g.socket == "" {
			return g, fmt.Errorf("Invalid gRPC address %q: empty socket path", addr)
		}
		// As in Consul, a socket is encrypted when a CA is given.
		g.tls = caFile != ""
	case strings.HasPrefix(lower, "https://"):
		g.tls = true
		addr = addr[len("https://"):]
	case strings.HasPrefix(lower, "http://"):
		addr = addr[len("http://"):]
	}
	if g.tls {
		if caFile == "" {
			// Consul falls back to the HTTP API's CA (-ca-file, then
			// CONSUL_CACERT).
			caFile = firstNonEmpty(httpCAFile, env.Getenv("CONSUL_CACERT"))
		}
		if caFile != "" {
			named, err := checkCAFile(caFile)
			if err != nil {
				return g, fmt.Errorf("Error loading gRPC CA file: %w", err)
			}
			g.caFile = named
		}
	}
	if g.socket != "" {
		return g, nil
	}
	resolved, err := resolveHostPort(ctx, "agent gRPC address", strings.TrimSuffix(addr, "/"))
	if err != nil {
		return g, err
	}
	g.address = resolved
	return g, nil
}

// checkCAFile returns the absolute path of a CA bundle the bootstrap can
// name: Envoy reads it when it starts, so a missing or empty file is an
// error now rather than a proxy that never connects.
func checkCAFile(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	pem, err := os.ReadFile(abs)
	if err != nil {
		return "", err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return "", fmt.Errorf("%s: no PEM certificate", path)
	}
	return abs, nil
}

// resolveHostPort turns host:port into ip:port, preferring IPv4 the way
// the agent's own defaults (127.0.0.1) do.
func resolveHostPort(ctx context.Context, what, hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("Invalid %s %q: %w", what, hostport, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip != nil {
		return net.JoinHostPort(ip.String(), port), nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("Failed to resolve %s %q: %w", what, host, err)
	}
	best := ips[0].IP
	for _, ip := range ips {
		if ip.IP.To4() != nil {
			best = ip.IP
			break
		}
	}
	return net.JoinHostPort(best.String(), port), nil
}

// gatewayAddrFlag is a gateway address flag: address:port, or a bare
// address that takes the default gateway port.
type gatewayAddrFlag struct {
	set     bool
	address string
	port    int
}

func (f *gatewayAddrFlag) String() string {
	if !f.set {
		return ""
	}
	return net.JoinHostPort(f.address, strconv.Itoa(f.port))
}

func (f *gatewayAddrFlag) Set(v string) error {
	host, portStr, err := net.SplitHostPort(v)
	if err != nil {
		// A bare address (an ingress gateway's WAN address, say).
		if strings.Contains(err.Error(), "missing port") {
			*f = gatewayAddrFlag{set: true, address: v, port: defaultGatewayPort}
			return nil
		}
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("invalid port %q", portStr)
	}
	*f = gatewayAddrFlag{set: true, address: host, port: port}
	return nil
}

// value is the address and port, the port defaulting to 443.
func (f *gatewayAddrFlag) value() (string, int) {
	if !f.set {
		return "", defaultGatewayPort
	}
	return f.address, f.port
}
