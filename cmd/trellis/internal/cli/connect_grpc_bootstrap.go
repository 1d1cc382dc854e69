package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/xds/gen"
)

const connectGRPCBootstrapHelp = `Usage: trellis connect grpc-bootstrap -service <name> [options]

  Writes the xDS bootstrap of a gRPC application that takes the mesh
  from the local agent without a sidecar ("proxyless gRPC"): the
  application dials xds:///<service> and its gRPC library asks the agent
  for listeners, routes, clusters and endpoints.

  The service must be registered on the local agent with
  Connect.Native true. The agent keeps its leaf certificate, key and the
  CA roots in files (see GET /v1/agent/connect/grpc-files/<id>), and the
  bootstrap points gRPC's file_watcher certificate provider at them.

  Hand the file to the application with GRPC_XDS_BOOTSTRAP=<file>, or its
  contents with GRPC_XDS_BOOTSTRAP_CONFIG.

    $ trellis connect grpc-bootstrap -service api -out /etc/api/xds.json`

// Names and values of the bootstrap that the agent's gRPC generators
// expect: the node metadata that selects them, the certificate-provider
// instance their TLS contexts name, and the resource name template of
// xDS-enabled gRPC servers.
const (
	grpcNodeMetaKey            = "TRELLIS_GRPC"
	grpcCertProviderInstance   = gen.GRPCCertProviderInstance
	grpcServerListenerTemplate = gen.GRPCServerListenerPrefix + "%s"
	// defaultGRPCCertRefresh is how often gRPC re-reads the files. The
	// agent re-signs leaves after a CA rotation within a jitter window of
	// 30 s, so peers must see the new roots well within it.
	defaultGRPCCertRefresh = 5 * time.Second
)

type connectGRPCBootstrapCmd struct {
	hf         httpFlags
	service    string
	serviceID  string
	out        string
	grpcAddr   string
	grpcCAFile string
	refresh    time.Duration
}

// runConnectGRPCBootstrap implements `trellis connect grpc-bootstrap`.
func runConnectGRPCBootstrap(args []string, env *Env) int {
	var c connectGRPCBootstrapCmd
	fs := newFlagSet("connect grpc-bootstrap", connectGRPCBootstrapHelp, env.Stderr)
	c.flags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if c.service == "" && c.serviceID == "" {
		fmt.Fprintln(env.Stderr, "-service or -service-id is required")
		return 1
	}
	if c.refresh < time.Second {
		fmt.Fprintln(env.Stderr, "-refresh-interval must be at least 1s")
		return 1
	}
	client, ok := c.hf.connect(env)
	if !ok {
		return 1
	}
	ctx := context.Background()
	out, warnings, err := c.generate(ctx, client, env)
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return 1
	}
	for _, w := range warnings {
		fmt.Fprintln(env.Stderr, "Warning: "+w)
	}
	if c.out == "" {
		if _, err := env.Stdout.Write(out); err != nil {
			return 1
		}
		return 0
	}
	// The bootstrap holds paths, not secrets: readable like any config.
	if err := os.WriteFile(c.out, out, 0o644); err != nil { //nolint:gosec // no secret in the file; the application's user must read it
		fmt.Fprintf(env.Stderr, "Error writing the bootstrap: %s\n", err)
		return 1
	}
	return 0
}

func (c *connectGRPCBootstrapCmd) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.service, "service", "", "The name of the Connect-native service the application is (registered on the local agent).")
	fs.StringVar(&c.serviceID, "service-id", "", "The ID of the service instance, when the agent has several instances of -service.")
	fs.StringVar(&c.out, "out", "", "Write the bootstrap to this file instead of stdout.")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "",
		"The agent's gRPC (xDS) address: host:port, http(s)://host:port or unix:///path (default CONSUL_GRPC_ADDR or "+DefaultGRPCAddr+").")
	fs.StringVar(&c.grpcCAFile, "grpc-ca-file", "",
		"A PEM file of CAs to verify the agent's gRPC certificate with, for an https:// -grpc-addr (default CONSUL_GRPC_CACERT, then -ca-file).")
	fs.DurationVar(&c.refresh, "refresh-interval", defaultGRPCCertRefresh, "How often the application re-reads its certificate files.")
	c.hf.register(fs, false)
}

// grpcFileSet is the agent's answer of /v1/agent/connect/grpc-files/<id>.
type grpcFileSet struct {
	ServiceID, Service, Dir, CertFile, KeyFile, CAFile string
	Ready                                              bool
}

// generate asks the agent for the service and its files and renders the
// bootstrap.
func (c *connectGRPCBootstrapCmd) generate(ctx context.Context, client *apiClient, env *Env) ([]byte, []string, error) {
	id := c.serviceID
	if id == "" {
		var err error
		if id, err = lookupNativeServiceID(ctx, client, c.service); err != nil {
			return nil, nil, err
		}
	}
	var files grpcFileSet
	if err := client.getJSON(ctx, "/v1/agent/connect/grpc-files/"+url.PathEscape(id), nil, false, &files); err != nil {
		return nil, nil, fmt.Errorf("Failed looking up the certificate files of %s: %w", id, err)
	}
	if c.service != "" && files.Service != c.service {
		return nil, nil, fmt.Errorf("Service %s is an instance of %s, not %s", id, files.Service, c.service)
	}
	g, err := resolveAgentGRPC(ctx, env, c.grpcAddr, c.grpcCAFile, c.hf.caFile)
	if err != nil {
		return nil, nil, err
	}
	var warnings []string
	if !files.Ready {
		warnings = append(warnings, "the agent has not written the certificate files of "+id+" yet; gRPC waits for them")
	}
	if c.hf.token != "" || c.hf.tokenFile != "" || env.Getenv("CONSUL_HTTP_TOKEN") != "" || env.Getenv("CONSUL_HTTP_TOKEN_FILE") != "" {
		warnings = append(warnings, "a gRPC xDS bootstrap cannot carry a Consul ACL token: the application's xDS stream is anonymous")
	}
	out, err := json.MarshalIndent(grpcBootstrap(id, files, g, c.refresh), "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return append(out, '\n'), warnings, nil
}

// lookupNativeServiceID finds the one Connect-native instance of name on
// the local agent.
func lookupNativeServiceID(ctx context.Context, client *apiClient, name string) (string, error) {
	ids, err := localServiceIDs(ctx, client, func(svc agentServiceInfo) bool {
		return svc.Service == name && svc.Connect != nil && svc.Connect.Native
	})
	if err != nil {
		return "", fmt.Errorf("Failed looking up service %s: %w", name, err)
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("No Connect-native service %s is registered on the local agent (register it with Connect.Native true)", name)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("More than one instance of %s is registered on the local agent.\n"+
		"    Run with -service-id and one of the following IDs: %s", name, strings.Join(ids, ", "))
}

// The gRPC xDS bootstrap format (gRFC A27, A29, A36), the fields Trellis
// writes.
type (
	grpcBootstrapFile struct {
		XDSServers                         []grpcXDSServer             `json:"xds_servers"`
		Node                               grpcNode                    `json:"node"`
		CertificateProviders               map[string]grpcCertProvider `json:"certificate_providers"`
		ServerListenerResourceNameTemplate string                      `json:"server_listener_resource_name_template"`
	}
	grpcXDSServer struct {
		ServerURI      string            `json:"server_uri"`
		ChannelCreds   []grpcChannelCred `json:"channel_creds"`
		ServerFeatures []string          `json:"server_features"`
	}
	grpcChannelCred struct {
		Type   string         `json:"type"`
		Config map[string]any `json:"config,omitempty"`
	}
	grpcNode struct {
		ID       string            `json:"id"`
		Cluster  string            `json:"cluster"`
		Metadata map[string]string `json:"metadata"`
	}
	grpcCertProvider struct {
		PluginName string         `json:"plugin_name"`
		Config     map[string]any `json:"config"`
	}
)

// grpcBootstrap is the bootstrap of the service instance id.
func grpcBootstrap(id string, files grpcFileSet, g agentGRPC, refresh time.Duration) grpcBootstrapFile {
	server := grpcXDSServer{
		ServerURI: g.address,
		// ignore_resource_deletion: a resource the agent stops sending
		// (while it restarts, say) is kept rather than dropped, so that
		// the application keeps serving on its last good configuration.
		ServerFeatures: []string{"xds_v3", "ignore_resource_deletion"},
		ChannelCreds:   []grpcChannelCred{{Type: "insecure"}},
	}
	if g.socket != "" {
		server.ServerURI = "unix://" + absSocket(g.socket)
	}
	if g.tls {
		cred := grpcChannelCred{Type: "tls"}
		if g.caFile != "" {
			cred.Config = map[string]any{"ca_certificate_file": g.caFile}
		}
		server.ChannelCreds = []grpcChannelCred{cred}
	}
	return grpcBootstrapFile{
		XDSServers: []grpcXDSServer{server},
		Node: grpcNode{ID: id, Cluster: files.Service, Metadata: map[string]string{
			grpcNodeMetaKey: "true", "namespace": "default", "partition": "default",
		}},
		CertificateProviders: map[string]grpcCertProvider{grpcCertProviderInstance: {
			PluginName: "file_watcher",
			Config: map[string]any{
				"certificate_file":    files.CertFile,
				"private_key_file":    files.KeyFile,
				"ca_certificate_file": files.CAFile,
				// A protobuf JSON Duration: seconds with an "s", never "1m0s".
				"refresh_interval": strconv.FormatFloat(refresh.Seconds(), 'f', -1, 64) + "s",
			},
		}},
		ServerListenerResourceNameTemplate: grpcServerListenerTemplate,
	}
}

// absSocket makes a socket path absolute: the application may run in
// another working directory than the command.
func absSocket(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}
