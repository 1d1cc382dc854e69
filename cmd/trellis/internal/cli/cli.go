// Package cli implements the trellis command line: the agent command and
// the client commands that talk to an agent over Consul's HTTP API with
// Consul's flags and output formats.
//
// Every command is a function taking its arguments and an Env and returning
// the process exit code, so tests run them in-process against an httptest
// server and inspect stdout, stderr and the requests sent. Package main only
// builds the Env from the real process and supplies the agent constructor.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/trellis-mesh/trellis/agent/config"
)

// Env is everything a command touches outside itself.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Stdin  io.Reader
	// Getenv reads environment variables (CONSUL_HTTP_ADDR, ...).
	Getenv func(string) string
	// NewAgent builds the agent run by `trellis agent`. Nil makes that
	// command fail; the client commands do not need it.
	NewAgent AgentFactory
	// ValidateDefinitions checks the service and check definitions of a
	// loaded configuration as the agent would register them, for
	// `trellis validate`; nil checks only the configuration itself.
	ValidateDefinitions func(*config.RuntimeConfig) error
	// Signals subscribes to SIGINT, SIGTERM and SIGHUP for the agent
	// command and returns the channel and a function that unsubscribes.
	// Nil uses os/signal.
	Signals func() (<-chan os.Signal, func())
}

// ProcessEnv returns an Env bound to the running process.
func ProcessEnv(newAgent AgentFactory) Env {
	return Env{
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Stdin:    os.Stdin,
		Getenv:   os.Getenv,
		NewAgent: newAgent,
		Signals:  notifySignals,
	}
}

func notifySignals() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}

// command is one subcommand: run returns the exit code.
type command struct {
	synopsis string
	run      func(args []string, env *Env) int
}

// commands is the command tree. Nested commands ("kv get") are keyed by
// their full name.
func commands() map[string]command {
	return map[string]command{
		"acl":                           {"Interact with Consul's ACLs", nil},
		"acl bootstrap":                 {"Bootstrap Consul's ACL system", runACLBootstrap},
		"acl policy":                    {"Manage Consul's ACL policies", nil},
		"acl policy create":             {"Create an ACL policy", runACLPolicyCreate},
		"acl policy delete":             {"Delete an ACL policy", runACLPolicyDelete},
		"acl policy list":               {"Lists ACL policies", runACLPolicyList},
		"acl policy read":               {"Read an ACL policy", runACLPolicyRead},
		"acl policy update":             {"Update an ACL policy", runACLPolicyUpdate},
		"acl role":                      {"Manage Consul's ACL roles", nil},
		"acl role create":               {"Create an ACL role", runACLRoleCreate},
		"acl role delete":               {"Delete an ACL role", runACLRoleDelete},
		"acl role list":                 {"Lists ACL roles", runACLRoleList},
		"acl role read":                 {"Read an ACL role", runACLRoleRead},
		"acl role update":               {"Update an ACL role", runACLRoleUpdate},
		"acl set-agent-token":           {"Assign tokens for the Consul Agent's usage", runACLSetAgentToken},
		"acl token":                     {"Manage Consul's ACL tokens", nil},
		"acl token clone":               {"Clone an ACL token", runACLTokenClone},
		"acl token create":              {"Create an ACL token", runACLTokenCreate},
		"acl token delete":              {"Delete an ACL token", runACLTokenDelete},
		"acl token list":                {"List ACL tokens", runACLTokenList},
		"acl token read":                {"Read an ACL token", runACLTokenRead},
		"acl token update":              {"Update an ACL token", runACLTokenUpdate},
		"agent":                         {"Runs a Trellis agent", runAgent},
		"bench":                         {"Measures a Consul-compatible agent under load", nil},
		"bench blocking":                {"Measures how fast blocking queries on one service return after a change", benchCommand("blocking")},
		"bench kv":                      {"Measures KV puts and check-and-set contention on one key", benchCommand("kv")},
		"bench writes":                  {"Measures catalog registrations per second and their latency", benchCommand("writes")},
		"bench xds":                     {"Measures Envoy first configs and endpoint-change propagation over delta ADS", benchCommand("xds")},
		"catalog":                       {"Interact with the catalog", nil},
		"catalog datacenters":           {"Lists all known datacenters", runCatalogDatacenters},
		"catalog nodes":                 {"Lists all nodes in the given datacenter", runCatalogNodes},
		"catalog services":              {"Lists all registered services in a datacenter", runCatalogServices},
		"config":                        {"Interact with Consul's Centralized Configurations", nil},
		"config delete":                 {"Delete a centralized config entry", runConfigDelete},
		"config list":                   {"List centralized config entries of a given kind", runConfigList},
		"config read":                   {"Read a centralized config entry", runConfigRead},
		"config write":                  {"Create or update a centralized config entry", runConfigWrite},
		"connect":                       {"Interact with Consul Connect", nil},
		"connect ca":                    {"Interact with the Connect Certificate Authority (CA)", nil},
		"connect ca get-config":         {"Display the current Connect Certificate Authority (CA) configuration", runConnectCAGetConfig},
		"connect ca set-config":         {"Modify the current Connect CA configuration", runConnectCASetConfig},
		"connect envoy":                 {"Runs or configures Envoy as a Connect proxy", runConnectEnvoy},
		"connect grpc-bootstrap":        {"Writes the xDS bootstrap of a proxyless gRPC application", runConnectGRPCBootstrap},
		"event":                         {"Fire a new event", runEvent},
		"force-leave":                   {"Forces a member of the cluster to enter the \"left\" state", runForceLeave},
		"info":                          {"Provides debugging information for operators", runInfo},
		"intention":                     {"Interact with Connect service intentions", nil},
		"intention check":               {"Check whether a connection between two services is allowed.", runIntentionCheck},
		"intention create":              {"Create intentions for service connections.", runIntentionCreate},
		"intention delete":              {"Delete an intention.", runIntentionDelete},
		"intention get":                 {"Show information about an intention.", runIntentionGet},
		"intention list":                {"List connect intentions", runIntentionList},
		"intention match":               {"Show intentions that match a source or destination.", runIntentionMatch},
		"join":                          {"Tell a Trellis agent to join the cluster", runJoin},
		"keygen":                        {"Generates a new encryption key", runKeygen},
		"keyring":                       {"Manages gossip layer encryption keys", runKeyring},
		"kv":                            {"Interact with the key-value store", nil},
		"kv delete":                     {"Removes data from the KV store", runKVDelete},
		"kv export":                     {"Exports part of the KV tree in JSON format", runKVExport},
		"kv get":                        {"Retrieves or lists data from the KV store", runKVGet},
		"kv import":                     {"Imports part of the KV tree in JSON format", runKVImport},
		"kv put":                        {"Sets or updates data in the KV store", runKVPut},
		"leave":                         {"Gracefully leaves the cluster and shuts down", runLeave},
		"lock":                          {"Execute a command holding a lock", runLock},
		"maint":                         {"Controls node or service maintenance mode", runMaint},
		"members":                       {"Lists the members of the cluster", runMembers},
		"monitor":                       {"Stream logs from a Trellis agent", runMonitor},
		"operator":                      {"Provides cluster-level tools for operators", nil},
		"operator raft":                 {"Provides cluster-level tools for Raft", nil},
		"operator raft list-peers":      {"Display the current Raft peer configuration", runRaftListPeers},
		"operator raft remove-peer":     {"Remove a Trellis server from the Raft configuration", runRaftRemovePeer},
		"operator raft transfer-leader": {"Transfer Raft leadership to another server", runRaftTransferLeader},
		"reload":                        {"Triggers the agent to reload configuration files", runReload},
		"services":                      {"Interact with services", nil},
		"services deregister":           {"Deregister services with the local agent", runServicesDeregister},
		"services register":             {"Register services with the local agent", runServicesRegister},
		"snapshot":                      {"Saves, restores and inspects snapshots of the Trellis server state", nil},
		"snapshot inspect":              {"Displays information about a Trellis snapshot file", runSnapshotInspect},
		"snapshot restore":              {"Restores snapshot of Trellis server state", runSnapshotRestore},
		"snapshot save":                 {"Saves snapshot of Trellis server state", runSnapshotSave},
		"tls":                           {"Builtin helpers for creating CAs and certificates", nil},
		"tls ca":                        {"Helpers for CAs", nil},
		"tls ca create":                 {"Create a new agent CA", runTLSCACreate},
		"tls cert":                      {"Helpers for certificates", nil},
		"tls cert create":               {"Create a new certificate", runTLSCertCreate},
		"validate":                      {"Validate config files/directories", runValidate},
		"version":                       {"Prints the Trellis version", runVersion},
		"watch":                         {"Watch for changes in Consul", runWatch},
	}
}

// Run executes the command line args (without the program name) and
// returns the exit code. Exit codes follow Consul's CLI: 0 success, 1
// failure, 127 for an unknown command.
func Run(args []string, env Env) int {
	env.fillDefaults()
	if len(args) == 0 {
		usage(env.Stderr, "")
		return 1
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(env.Stdout, "")
		return 0
	case "-v", "-version", "--version":
		return runVersion(nil, &env)
	}
	cmds := commands()
	// Longest command name that prefixes the arguments.
	name, rest := "", args
	for i := 1; i <= len(args) && i <= 3; i++ {
		candidate := strings.Join(args[:i], " ")
		if _, ok := cmds[candidate]; ok {
			name, rest = candidate, args[i:]
		}
	}
	cmd, ok := cmds[name]
	if !ok {
		fmt.Fprintf(env.Stderr, "Unknown command: %q\n\n", args[0])
		usage(env.Stderr, "")
		return 127
	}
	if cmd.run == nil {
		// A group such as "kv": list its subcommands.
		if len(rest) > 0 && !isHelp(rest[0]) {
			fmt.Fprintf(env.Stderr, "Unknown command: %q\n\n", name+" "+rest[0])
			usage(env.Stderr, name)
			return 127
		}
		out, code := env.Stderr, 1
		if len(rest) > 0 {
			out, code = env.Stdout, 0
		}
		usage(out, name)
		return code
	}
	return cmd.run(rest, &env)
}

func isHelp(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

func (e *Env) fillDefaults() {
	if e.Stdout == nil {
		e.Stdout = io.Discard
	}
	if e.Stderr == nil {
		e.Stderr = io.Discard
	}
	if e.Stdin == nil {
		e.Stdin = strings.NewReader("")
	}
	if e.Getenv == nil {
		e.Getenv = func(string) string { return "" }
	}
	if e.Signals == nil {
		e.Signals = notifySignals
	}
}

// usage lists the commands under prefix ("" for the top level).
func usage(w io.Writer, prefix string) {
	if prefix == "" {
		fmt.Fprintln(w, "Usage: trellis [--version] [--help] <command> [<args>]")
	} else {
		fmt.Fprintf(w, "Usage: trellis %s <subcommand> [options] [args]\n", prefix)
	}
	fmt.Fprintln(w, "\nAvailable commands are:")
	cmds := commands()
	var names []string
	width := 0
	for n := range cmds {
		sub, ok := strings.CutPrefix(n, prefix)
		if prefix != "" && (!ok || sub == "" || sub[0] != ' ') {
			continue
		}
		sub = strings.TrimSpace(sub)
		if strings.Contains(sub, " ") {
			continue // only direct children
		}
		names = append(names, n)
		width = max(width, len(sub))
	}
	sort.Strings(names)
	for _, n := range names {
		sub := strings.TrimSpace(strings.TrimPrefix(n, prefix))
		fmt.Fprintf(w, "    %-*s    %s\n", width, sub, cmds[n].synopsis)
	}
}

// interruptContext returns a context cancelled when a signal arrives on
// env.Signals (SIGINT, SIGTERM, SIGHUP), for the commands that run until
// interrupted, and the function that releases it and waits for its
// goroutine.
func interruptContext(env *Env) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs, stop := env.Signals()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		<-done
		stop()
	}
}
