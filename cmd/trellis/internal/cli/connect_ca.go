package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
)

// caConfig is the CA configuration as /v1/connect/ca/configuration
// returns it, in the field order Consul's CLI prints (api.CAConfig).
type caConfig struct {
	Provider                 string
	Config                   map[string]interface{}
	State                    map[string]string
	ForceWithoutCrossSigning bool
	CreateIndex              uint64
	ModifyIndex              uint64
}

const connectCAGetHelp = `
Usage: trellis connect ca get-config [options]

  Displays the current Connect Certificate Authority (CA) configuration.`

// runConnectCAGetConfig prints the CA configuration as Consul's
// `connect ca get-config` does: tab-indented JSON.
func runConnectCAGetConfig(args []string, env *Env) int {
	var hf httpFlags
	fs := newFlagSet("connect ca get-config", connectCAGetHelp, env.Stderr)
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error initializing client: %s\n", err)
		return 1
	}
	var cfg caConfig
	if err := c.getJSON(context.Background(), "/v1/connect/ca/configuration", nil, true, &cfg); err != nil {
		fmt.Fprintf(env.Stderr, "Error querying CA configuration: %s\n", err)
		return 1
	}
	out, err := json.MarshalIndent(cfg, "", "\t")
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error formatting CA configuration: %s\n", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, string(out))
	return 0
}

const connectCASetHelp = `
Usage: trellis connect ca set-config [options]

  Modifies the current Connect Certificate Authority (CA) configuration.
  Changing the key (a new PrivateKey, PrivateKeyType or PrivateKeyBits)
  rotates the root: the old root stays trusted while every leaf is
  re-issued.`

// runConnectCASetConfig writes the CA configuration from a JSON file, as
// Consul's `connect ca set-config -config-file`.
func runConnectCASetConfig(args []string, env *Env) int {
	var (
		hf         httpFlags
		configFile string
		force      bool
	)
	fs := newFlagSet("connect ca set-config", connectCASetHelp, env.Stderr)
	fs.StringVar(&configFile, "config-file", "", "The path to the config file to use.")
	fs.BoolVar(&force, "force-without-cross-signing", false,
		"Rotate the CA even if the current CA cannot cross-sign the new root; proxies that have not seen the new root yet reject new leaves until they do.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error initializing client: %s\n", err)
		return 1
	}
	if configFile == "" {
		fmt.Fprintln(env.Stderr, "The -config-file flag is required")
		return 1
	}
	raw, err := os.ReadFile(configFile)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error reading config file: %s\n", err)
		return 1
	}
	var cfg caConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		fmt.Fprintf(env.Stderr, "Error parsing config file: %s\n", err)
		return 1
	}
	// As in Consul, the flag decides, whatever the file says.
	cfg.ForceWithoutCrossSigning = force
	body, err := json.Marshal(cfg)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error setting CA configuration: %s\n", err)
		return 1
	}
	if _, _, err := c.do(context.Background(), request{method: http.MethodPut, path: "/v1/connect/ca/configuration",
		body: bytes.NewReader(body), withDC: true}); err != nil {
		fmt.Fprintf(env.Stderr, "Error setting CA configuration: %s\n", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, "Configuration updated!")
	return 0
}
