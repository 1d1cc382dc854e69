package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// flagValues is what the agent command line says.
type flagValues struct {
	src source
	dev bool
	// configPaths are -config-file and -config-dir values in command-line
	// order (Consul merges them in that order; a -config-file may also name
	// a directory).
	configPaths []string
	// configFormat is -config-format: the format of every config file,
	// whatever its extension ("" reads the extension).
	configFormat string
	// hcl are the -hcl fragments, in command-line order.
	hcl []string
	// ignored names the Consul flags given that Trellis does not implement.
	ignored []string
	// deprecated holds warnings for deprecated flags that were honoured.
	deprecated []string
	// refused lists the flags given that ask for protection Trellis does
	// not provide yet; Load fails on them.
	refused []refusal
}

// ignoredBoolFlags and ignoredValueFlags are Consul agent flags Trellis
// accepts and reports instead of failing on them.
func ignoredBoolFlags() []string {
	return []string{
		"auto-reload-config", "disable-host-node-id",
		"non-voting-server",
		"read-replica", "rejoin", "syslog", "ui",
	}
}

func ignoredValueFlags() []string {
	return []string{
		"advertise-wan", "check_output_max_size",
		"default-query-time", "join-wan", "log-file",
		"log-rotate-bytes", "log-rotate-duration", "log-rotate-max-files",
		"max-query-time", "primary-gateway", "protocol", "raft-protocol",
		"retry-interval-wan", "retry-join-wan", "retry-max-wan", "segment",
		"serf-wan-bind",
		"ui-content-path", "ui-dir",
	}
}

// refusedFlags maps the Consul agent flags that ask for protection
// Trellis does not provide yet to that protection.
func refusedFlags() map[string]string {
	return map[string]string{
		"allow-write-http-from":  "HTTP endpoint restrictions",
		"serf-lan-allowed-cidrs": "gossip address restrictions",
		"serf-wan-allowed-cidrs": "gossip address restrictions",
	}
}

// newFlagSet defines the agent flags with Consul's names over fv.
func newFlagSet(fv *flagValues, output io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: trellis agent [options]\n\n"+
			"  Starts a Trellis agent. Flags and config keys follow Consul's.\n\n")
		fs.PrintDefaults()
	}
	s := &fv.src

	fs.BoolVar(&fv.dev, "dev", false, "Starts the agent in development mode: a single in-memory server on 127.0.0.1.")
	fs.Var(boolPtr{&s.Server}, "server", "Switches agent to server mode.")
	fs.Var(boolPtr{&s.Bootstrap}, "bootstrap", "Sets server to bootstrap mode.")
	fs.Var(intPtr{&s.BootstrapExpect}, "bootstrap-expect", "Sets server to expect bootstrap mode.")
	fs.Var(stringPtr{&s.DataDir}, "data-dir", "Path to a data directory to store agent state.")
	fs.Var(stringPtr{&s.NodeName}, "node", "Name of this node. Must be unique in the cluster.")
	fs.Var(stringPtr{&s.NodeID}, "node-id", "A unique ID (UUID) for this node. Defaults to a random ID persisted in the data-dir.")
	fs.Var(nodeMeta{&s.NodeMeta}, "node-meta", "An arbitrary metadata key/value pair for this node, of the format `key:value`. Can be specified multiple times.")
	fs.Var(stringPtr{&s.Datacenter}, "datacenter", "Datacenter of the agent.")
	fs.Var(stringPtr{&s.BindAddr}, "bind", "Sets the bind address for cluster communication.")
	fs.Var(stringPtr{&s.AdvertiseAddr}, "advertise", "Sets the advertise address to use.")
	fs.Var(stringPtr{&s.SerfLANBind}, "serf-lan-bind", "Address to bind Serf LAN listeners to.")
	fs.Var(stringPtr{&s.ClientAddr}, "client", "Sets the address to bind for client access (HTTP, gRPC and DNS).")
	fs.Var(intPtr{&s.Ports.HTTP}, "http-port", "Sets the HTTP API port to listen on.")
	fs.Var(intPtr{&s.Ports.GRPC}, "grpc-port", "Sets the gRPC (xDS) port to listen on.")
	fs.Var(intPtr{&s.Ports.Server}, "server-port", "Sets the server port to listen on.")
	fs.Var(intPtr{&s.Ports.SerfLAN}, "serf-lan-port", "Sets the Serf LAN port to listen on.")
	fs.Var(intPtr{&s.Ports.DNS}, "dns-port", "DNS port to use (UDP and TCP); -1 disables the DNS interface.")
	fs.Var(stringPtr{&s.Domain}, "domain", "Domain to use for DNS interface.")
	fs.Var(stringPtr{&s.AltDomain}, "alt-domain", "Alternate domain to use for DNS interface.")
	fs.Var(stringSlice{&s.Recursors}, "recursor", "Address of an upstream DNS server. Can be specified multiple times.")
	fs.Var(intPtr{&s.Ports.HTTPS}, "https-port", "Sets the HTTPS API port (-1 disables it; needs tls.https.cert_file).")
	fs.Var(intPtr{&s.Ports.GRPCTLS}, "grpc-tls-port", "Sets the gRPC-TLS (xDS) port (-1 disables it; needs tls.grpc.cert_file).")
	fs.Var(intPtr{&s.Ports.SerfWAN}, "serf-wan-port", "Sets the Serf WAN port of a server; -1 disables the WAN pool.")
	fs.Var(stringPtr{&s.Encrypt}, "encrypt", "Provides the gossip encryption key (base64 of 16, 24 or 32 bytes, as from `trellis keygen`).")
	fs.Var(boolPtr{&s.DisableKeyringFile}, "disable-keyring-file", "Disables the backing up of the keyring to a file.")
	fs.Var(stringSlice{&s.RetryJoin}, "retry-join", "Address of an agent to join at start time with retries enabled. Can be specified multiple times.")
	fs.Var(stringSlice{&s.StartJoin}, "join", "Deprecated: use -retry-join. Can be specified multiple times.")
	fs.Var(stringPtr{&s.RetryInterval}, "retry-interval", "Time to wait between join attempts.")
	fs.Var(intPtr{&s.RetryMax}, "retry-max", "Maximum number of join attempts. 0 retries indefinitely.")
	fs.Var(stringSlice{&fv.configPaths}, "config-file", "Path to a config file (.json or .hcl). Can be specified multiple times.")
	fs.Var(stringSlice{&fv.configPaths}, "config-dir", "Path to a directory whose *.json and *.hcl files are read in alphabetical order. Can be specified multiple times.")
	fs.Var(configFormat{&fv.configFormat}, "config-format", "Config files are in this format irrespective of their extension: 'hcl' or 'json'.")
	fs.Var(stringSlice{&fv.hcl}, "hcl", "An HCL config fragment, merged after the config files and flags. Can be specified multiple times.")
	fs.Var(stringPtr{&s.LogLevel}, "log-level", "Log level of the agent: trace, debug, info, warn or error.")
	fs.Var(boolPtr{&s.LogJSON}, "log-json", "Output logs in JSON format.")
	fs.Var(stringPtr{&s.PidFile}, "pid-file", "Path to file to store agent PID.")
	fs.Var(boolPtr{&s.EnableScriptChecks}, "enable-script-checks", "Enables health check scripts, also when registered over the HTTP API.")
	fs.Var(boolPtr{&s.EnableLocalScriptChecks}, "enable-local-script-checks", "Enables health check scripts from configuration files only.")

	for _, name := range ignoredBoolFlags() {
		fs.Var(ignoredFlag{name: name, isBool: true, seen: &fv.ignored}, name, "Consul flag accepted for compatibility; not implemented by Trellis.")
	}
	for _, name := range ignoredValueFlags() {
		fs.Var(ignoredFlag{name: name, seen: &fv.ignored}, name, "Consul flag accepted for compatibility; not implemented by Trellis.")
	}
	for name, feature := range refusedFlags() {
		fs.Var(refusedFlag{name: name, feature: feature, seen: &fv.refused}, name,
			"Consul flag for "+feature+", which Trellis does not provide yet: refused at start.")
	}
	return fs
}

// parseFlags parses the agent's arguments.
func parseFlags(args []string, output io.Writer) (*flagValues, error) {
	fv := &flagValues{}
	fs := newFlagSet(fv, output)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, ErrHelp
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidFlag, err)
	}
	if rest := fs.Args(); len(rest) > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments: %s", ErrInvalidFlag, strings.Join(rest, " "))
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "join" {
			fv.deprecated = append(fv.deprecated, "the -join flag is deprecated: use -retry-join instead")
		}
	})
	return fv, nil
}

type stringPtr struct{ p **string }

func (v stringPtr) String() string {
	if v.p == nil || *v.p == nil {
		return ""
	}
	return **v.p
}
func (v stringPtr) Set(s string) error { *v.p = &s; return nil }

type boolPtr struct{ p **bool }

func (v boolPtr) String() string {
	if v.p == nil || *v.p == nil {
		return ""
	}
	return strconv.FormatBool(**v.p)
}
func (v boolPtr) IsBoolFlag() bool { return true }
func (v boolPtr) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("invalid boolean %q", s)
	}
	*v.p = &b
	return nil
}

type intPtr struct{ p **int }

func (v intPtr) String() string {
	if v.p == nil || *v.p == nil {
		return ""
	}
	return strconv.Itoa(**v.p)
}
func (v intPtr) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("invalid number %q", s)
	}
	*v.p = &n
	return nil
}

type stringSlice struct{ p *[]string }

func (v stringSlice) String() string {
	if v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}
func (v stringSlice) Set(s string) error { *v.p = append(*v.p, s); return nil }

// nodeMeta parses Consul's -node-meta key:value.
type nodeMeta struct{ p *map[string]string }

func (v nodeMeta) String() string { return "" }
func (v nodeMeta) Set(s string) error {
	k, val, ok := strings.Cut(s, ":")
	if !ok || k == "" {
		return fmt.Errorf("node-meta must be of the form key:value, got %q", s)
	}
	if *v.p == nil {
		*v.p = map[string]string{}
	}
	(*v.p)[k] = val
	return nil
}

type ignoredFlag struct {
	name   string
	isBool bool
	seen   *[]string
}

func (v ignoredFlag) String() string   { return "" }
func (v ignoredFlag) IsBoolFlag() bool { return v.isBool }
func (v ignoredFlag) Set(string) error {
	*v.seen = append(*v.seen, "-"+v.name)
	return nil
}

// refusedFlag records a flag whose value asks for protection Trellis
// does not provide; an empty value asks for nothing and is accepted.
type refusedFlag struct {
	name, feature string
	seen          *[]refusal
}

func (v refusedFlag) String() string { return "" }
func (v refusedFlag) Set(s string) error {
	if s != "" {
		*v.seen = append(*v.seen, refusal{path: "-" + v.name, feature: v.feature})
	}
	return nil
}

// configFormat is -config-format, Consul's json or hcl.
type configFormat struct{ p *string }

func (v configFormat) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v configFormat) Set(s string) error {
	if s != formatJSON && s != formatHCL {
		return fmt.Errorf("-config-format must be either 'hcl' or 'json', not %q", s)
	}
	*v.p = s
	return nil
}
