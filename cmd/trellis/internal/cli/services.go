package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// serviceDef is one service definition as found in a file: kept as the
// decoded JSON object so that every field (checks, connect, sidecar, ...)
// reaches the agent unchanged. The agent accepts Consul's CamelCase and
// snake_case keys alike.
type serviceDef map[string]any

// field returns the value of key k matched case-insensitively and ignoring
// underscores ("ID", "id"; "SidecarService", "sidecar_service").
func (s serviceDef) field(k string) (any, bool) {
	want := normalizeKey(k)
	for key, v := range s {
		if normalizeKey(key) == want {
			return v, true
		}
	}
	return nil, false
}

func (s serviceDef) str(k string) string {
	v, _ := s.field(k)
	str, _ := v.(string)
	return str
}

func normalizeKey(k string) string {
	return strings.ToLower(strings.ReplaceAll(k, "_", ""))
}

// servicesFromFile reads Consul service definition files: a JSON object
// with "service" (one definition) or "services" (a list), as Consul's
// `services register` takes. A bare registration body (an object with a
// Name) is accepted too, as a convenience.
func servicesFromFile(path string) ([]serviceDef, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(filepath.Ext(path), ".json") {
		return nil, fmt.Errorf("%s: only JSON service definitions (.json) are supported", path)
	}
	var doc serviceDef
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []serviceDef
	if v, ok := doc.field("service"); ok {
		m, isObj := v.(map[string]any)
		if !isObj {
			return nil, fmt.Errorf("%s: \"service\" must be an object", path)
		}
		out = append(out, serviceDef(m))
	}
	if v, ok := doc.field("services"); ok {
		list, isList := v.([]any)
		if !isList {
			return nil, fmt.Errorf("%s: \"services\" must be a list of objects", path)
		}
		for _, e := range list {
			m, isObj := e.(map[string]any)
			if !isObj {
				return nil, fmt.Errorf("%s: \"services\" must be a list of objects", path)
			}
			out = append(out, serviceDef(m))
		}
	}
	if len(out) == 0 {
		if doc.str("name") == "" {
			return nil, fmt.Errorf("%s: no service definition found (expected a \"service\" or \"services\" key)", path)
		}
		out = append(out, doc)
	}
	return out, nil
}

const servicesRegisterHelp = `
Usage: trellis services register [options] [FILE...]

  Registers one or more services with the local agent, from JSON service
  definition files ({"service": {...}} or {"services": [...]}) or from flags.`

func runServicesRegister(args []string, env *Env) int {
	var hf httpFlags
	var id, name, address, kind string
	var port int
	var tags stringList
	var meta keyValueFlag
	fs := newFlagSet("services register", servicesRegisterHelp, env.Stderr)
	fs.StringVar(&id, "id", "", "ID of the service to register for arg-based registration (default -name).")
	fs.StringVar(&name, "name", "", "Name of the service to register for arg-based registration.")
	fs.StringVar(&address, "address", "", "Address of the service to register for arg-based registration.")
	fs.IntVar(&port, "port", 0, "Port of the service to register for arg-based registration.")
	fs.StringVar(&kind, "kind", "", "The service's kind.")
	fs.Var(&tags, "tag", "Tag to add to the service. Can be specified multiple times.")
	fs.Var(&meta, "meta", "Metadata to set on the service, as key=value. Can be specified multiple times.")
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	files := fs.Args()
	switch {
	case len(files) == 0 && name == "":
		fmt.Fprintln(env.Stderr, "Service registration requires at least one argument or flags.")
		return 1
	case len(files) > 0 && name != "":
		fmt.Fprintln(env.Stderr, "Service registration requires arguments or -id, not both.")
		return 1
	}

	var defs []serviceDef
	if len(files) > 0 {
		for _, f := range files {
			d, err := servicesFromFile(f)
			if err != nil {
				fmt.Fprintf(env.Stderr, "Error: %s\n", err)
				return 1
			}
			defs = append(defs, d...)
		}
		// As Consul's CombineArgs: flags fill what a file leaves out.
		for _, d := range defs {
			fillFromFlags(d, id, address, kind, port, tags, meta)
		}
	} else {
		d := serviceDef{"Name": name}
		fillFromFlags(d, id, address, kind, port, tags, meta)
		defs = []serviceDef{d}
	}

	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	for _, d := range defs {
		if _, err := c.put(context.Background(), "/v1/agent/service/register", nil, d); err != nil {
			fmt.Fprintf(env.Stderr, "Error registering service %q: %s\n", d.str("name"), err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Registered service: %s\n", d.str("name"))
	}
	return 0
}

func fillFromFlags(d serviceDef, id, address, kind string, port int, tags []string, meta map[string]string) {
	setIfAbsent := func(k string, v any) {
		if _, ok := d.field(k); !ok {
			d[k] = v
		}
	}
	if id != "" {
		setIfAbsent("ID", id)
	}
	if address != "" {
		setIfAbsent("Address", address)
	}
	if kind != "" {
		setIfAbsent("Kind", kind)
	}
	if port != 0 {
		setIfAbsent("Port", port)
	}
	if len(tags) > 0 {
		existing, _ := d.field("tags")
		var all []any
		if list, ok := existing.([]any); ok {
			all = list
		}
		for _, t := range tags {
			all = append(all, t)
		}
		d.set("Tags", all)
	}
	if len(meta) > 0 {
		existing, _ := d.field("meta")
		m, _ := existing.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m[k] = meta[k]
		}
		d.set("Meta", m)
	}
}

// set replaces the key matching k (in any spelling) or adds k.
func (s serviceDef) set(k string, v any) {
	want := normalizeKey(k)
	for key := range s {
		if normalizeKey(key) == want {
			s[key] = v
			return
		}
	}
	s[k] = v
}

const servicesDeregisterHelp = `
Usage: trellis services deregister [options] [FILE...]

  Deregisters services from the local agent, by -id or by the IDs (or
  names) in service definition files.`

func runServicesDeregister(args []string, env *Env) int {
	var hf httpFlags
	var id string
	fs := newFlagSet("services deregister", servicesDeregisterHelp, env.Stderr)
	fs.StringVar(&id, "id", "", "ID to deregister.")
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	files := fs.Args()
	switch {
	case len(files) == 0 && id == "":
		fmt.Fprintln(env.Stderr, "Service deregistration requires at least one argument or -id.")
		return 1
	case len(files) > 0 && id != "":
		fmt.Fprintln(env.Stderr, "Service deregistration requires arguments or -id, not both.")
		return 1
	}
	ids := []string{id}
	if len(files) > 0 {
		ids = nil
		for _, f := range files {
			defs, err := servicesFromFile(f)
			if err != nil {
				fmt.Fprintf(env.Stderr, "Error: %s\n", err)
				return 1
			}
			for _, d := range defs {
				sid := d.str("id")
				if sid == "" {
					sid = d.str("name")
				}
				if sid == "" {
					fmt.Fprintf(env.Stderr, "Error: %s: a service definition has neither an ID nor a name\n", f)
					return 1
				}
				ids = append(ids, sid)
			}
		}
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	for _, sid := range ids {
		if _, err := c.put(context.Background(), "/v1/agent/service/deregister/"+sid, nil, nil); err != nil {
			fmt.Fprintf(env.Stderr, "Error deregistering service %q: %s\n", sid, err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Deregistered service: %s\n", sid)
	}
	return 0
}
