package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"github.com/trellis-mesh/trellis/structs"
)

// The config entry commands: config write|read|list|delete, with Consul's
// flags, messages and exit codes.

const configWriteHelp = `
Usage: trellis config write [options] <configuration>

  Request a config entry to be created or updated. The configuration
  argument is either a file path or '-' to indicate that the config
  should be read from stdin. The data must be JSON (keys in any case or
  snake_case, as Consul accepts them).

  Example (from file):

    $ trellis config write web.service.json

  Example (from stdin):

    $ trellis config write -`

func runConfigWrite(args []string, env *Env) int {
	var (
		hf          httpFlags
		cas         bool
		modifyIndex uint64
	)
	fs := newFlagSet("config write", configWriteHelp, env.Stderr)
	fs.BoolVar(&cas, "cas", false, "Perform a Check-And-Set operation. Specifying this value also requires the -modify-index flag to be set. The default value is false.")
	fs.Uint64Var(&modifyIndex, "modify-index", 0, "Unsigned integer representing the ModifyIndex of the config entry. This is used in combination with the -cas flag.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(env.Stderr, "Must provide exactly one positional argument to specify the config entry to write")
		return 1
	}
	data, err := loadDataSource(fs.Arg(0), env.Stdin)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Failed to load data: %v\n", err)
		return 1
	}
	entry, err := structs.DecodeConfigEntryJSON(data)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Failed to decode config entry input: %v\n", err)
		return 1
	}
	kind, name := entry.GetKind(), entry.GetName()
	c, ok := configClient(&hf, env)
	if !ok {
		return 1
	}
	body, err := json.Marshal(entry)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error writing config entry %s/%s: %v\n", kind, name, err)
		return 1
	}
	var q url.Values
	if cas {
		q = url.Values{"cas": {strconv.FormatUint(modifyIndex, 10)}}
	}
	resp, _, err := c.do(context.Background(), request{method: http.MethodPut, path: "/v1/config", query: q,
		body: bytes.NewReader(body), withDC: true})
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error writing config entry %s/%s: %v\n", kind, name, err)
		return 1
	}
	if !bytes.Equal(bytes.TrimSpace(resp), []byte("true")) {
		fmt.Fprintf(env.Stderr, "Config entry not updated: %s/%s\n", kind, name)
		return 1
	}
	fmt.Fprintf(env.Stdout, "Config entry written: %s/%s\n", kind, name)
	return 0
}

// loadDataSource reads a file, or standard input for "-".
func loadDataSource(arg string, stdin io.Reader) ([]byte, error) {
	if arg == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(arg)
}

const configReadHelp = `
Usage: trellis config read [options] -kind <config kind> -name <config name>

  Reads the config entry specified by the given kind and name and outputs
  its JSON representation.

  Example:

    $ trellis config read -kind proxy-defaults -name global`

func runConfigRead(args []string, env *Env) int {
	var f entryFlags
	fs := newFlagSet("config read", configReadHelp, env.Stderr)
	f.register(fs, "The kind of configuration to read.", "The name of configuration to read.")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, ok := f.client(env)
	if !ok {
		return 1
	}
	kind, name := f.kind, f.name
	body, _, err := c.do(context.Background(), request{method: http.MethodGet, path: "/v1/config/" + kind + "/" + name, withDC: true})
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error reading config entry %s/%s: %v\n", kind, name, err)
		return 1
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, bytes.TrimSpace(body), "", "    "); err != nil {
		fmt.Fprintf(env.Stderr, "Error reading config entry %s/%s: %v\n", kind, name, err)
		return 1
	}
	fmt.Fprintln(env.Stdout, pretty.String())
	return 0
}

const configListHelp = `
Usage: trellis config list -kind <config kind>

  Lists all of the config entries for a given kind.

  Example:

    $ trellis config list -kind service-defaults`

func runConfigList(args []string, env *Env) int {
	var f entryFlags
	fs := newFlagSet("config list", configListHelp, env.Stderr)
	f.register(fs, "The kind of configurations to list.", "")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, ok := f.client(env)
	if !ok {
		return 1
	}
	kind := f.kind
	var entries []struct{ Kind, Name string }
	if err := c.getJSON(context.Background(), "/v1/config/"+kind, nil, true, &entries); err != nil {
		fmt.Fprintf(env.Stderr, "Error listing config entries for kind %q: %v\n", kind, err)
		return 1
	}
	for _, e := range entries {
		name := e.Name
		if kind == structs.MeshConfig && name == "" {
			name = structs.MeshConfigMesh
		}
		fmt.Fprintln(env.Stdout, name)
	}
	return 0
}

const configDeleteHelp = `
Usage: trellis config delete [options] -kind <config kind> -name <config name>

  Deletes the configuration entry specified by the kind and name.

  Example:

    $ trellis config delete -kind service-defaults -name web`

func runConfigDelete(args []string, env *Env) int {
	var (
		f           entryFlags
		cas         bool
		modifyIndex uint64
	)
	fs := newFlagSet("config delete", configDeleteHelp, env.Stderr)
	f.register(fs, "The kind of configuration to delete.", "The name of configuration to delete.")
	fs.BoolVar(&cas, "cas", false, "Perform a Check-And-Set operation. Specifying this value also requires the -modify-index flag to be set. The default value is false.")
	fs.Uint64Var(&modifyIndex, "modify-index", 0, "Unsigned integer representing the ModifyIndex of the config entry. This is used in combination with the -cas flag.")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, ok := f.client(env)
	if !ok {
		return 1
	}
	kind, name := f.kind, f.name
	var q url.Values
	if cas {
		q = url.Values{"cas": {strconv.FormatUint(modifyIndex, 10)}}
	}
	resp, _, err := c.do(context.Background(), request{method: http.MethodDelete, path: "/v1/config/" + kind + "/" + name, query: q, withDC: true})
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error deleting config entry %s/%s: %v\n", kind, name, err)
		return 1
	}
	if cas && !bytes.Equal(bytes.TrimSpace(resp), []byte("true")) {
		fmt.Fprintf(env.Stderr, "Config entry not deleted: %s/%s\n", kind, name)
		return 1
	}
	fmt.Fprintf(env.Stdout, "Config entry deleted: %s/%s\n", kind, name)
	return 0
}

// entryFlags are the -kind and -name flags of config read, list and
// delete (list has no -name), with the HTTP API flags.
type entryFlags struct {
	hf         httpFlags
	kind, name string
	// withName is set when -name is registered, and so required.
	withName bool
}

// register adds the flags to fs; an empty nameHelp registers no -name.
func (f *entryFlags) register(fs *flag.FlagSet, kindHelp, nameHelp string) {
	fs.StringVar(&f.kind, "kind", "", kindHelp)
	if nameHelp != "" {
		fs.StringVar(&f.name, "name", "", nameHelp)
		f.withName = true
	}
	f.hf.register(fs, true)
}

// client checks the required flags, in Consul's order and words, and
// connects; false once it has printed why it cannot.
func (f *entryFlags) client(env *Env) (*apiClient, bool) {
	if f.kind == "" {
		fmt.Fprintln(env.Stderr, "Must specify the -kind parameter")
		return nil, false
	}
	if f.withName && f.name == "" {
		fmt.Fprintln(env.Stderr, "Must specify the -name parameter")
		return nil, false
	}
	return configClient(&f.hf, env)
}

// configClient connects to the agent, printing Consul's message when it
// cannot.
func configClient(hf *httpFlags, env *Env) (*apiClient, bool) {
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error connect to Consul agent: %s\n", err)
		return nil, false
	}
	return c, true
}
