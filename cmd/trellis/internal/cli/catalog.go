package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
)

const catalogDatacentersHelp = `
Usage: trellis catalog datacenters [options]

  Lists the known datacenters, nearest first, one per line (with no WAN
  federation, the agent's own).`

func runCatalogDatacenters(args []string, env *Env) int {
	var hf httpFlags
	fs := newFlagSet("catalog datacenters", catalogDatacentersHelp, env.Stderr)
	hf.register(fs, false)
	c, code, ok := catalogClient(fs, &hf, args, env)
	if !ok {
		return code
	}
	var dcs []string
	if err := c.getJSON(context.Background(), "/v1/catalog/datacenters", nil, false, &dcs); err != nil {
		fmt.Fprintf(env.Stderr, "Error listing datacenters: %s\n", err)
		return 1
	}
	if len(dcs) == 0 {
		fmt.Fprintln(env.Stderr, "No datacenters found")
		return 1
	}
	fmt.Fprintln(env.Stdout, strings.Join(dcs, "\n"))
	return 0
}

// catalogClient parses a catalog command's flags, which take no
// arguments, and connects to the agent; when !ok the command exits with
// code.
func catalogClient(fs *flag.FlagSet, hf *httpFlags, args []string, env *Env) (c *apiClient, code int, ok bool) {
	if code, ok := parseFlags(fs, args); !ok {
		return nil, code, false
	}
	if n := len(fs.Args()); n > 0 {
		fmt.Fprintf(env.Stderr, "Too many arguments (expected 0, got %d)\n", n)
		return nil, 1, false
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error connecting to Consul agent: %s\n", err)
		return nil, 1, false
	}
	return c, 0, true
}

const catalogServicesHelp = `
Usage: trellis catalog services [options]

  Lists the services registered in the datacenter, one per line; -tags
  shows each service's tags beside it.`

func runCatalogServices(args []string, env *Env) int {
	var hf httpFlags
	var tags bool
	var node string
	var nodeMeta keyValueFlag
	fs := newFlagSet("catalog services", catalogServicesHelp, env.Stderr)
	fs.BoolVar(&tags, "tags", false, "Display each service's tags as a comma-separated list beside each service entry.")
	fs.StringVar(&node, "node", "", "Node `id or name` for which to list services.")
	fs.Var(&nodeMeta, "node-meta", "Only services on nodes with this `key=value` metadata. Can be specified multiple times.")
	hf.register(fs, true)
	c, code, ok := catalogClient(fs, &hf, args, env)
	if !ok {
		return code
	}
	q := nodeMetaQuery(nodeMeta)
	ctx := context.Background()
	var services map[string][]string
	if node != "" {
		var catalogNode *struct {
			Services map[string]struct {
				Service string
				Tags    []string
			}
		}
		if err := c.getJSON(ctx, "/v1/catalog/node/"+node, q, true, &catalogNode); err != nil {
			fmt.Fprintf(env.Stderr, "Error listing services for node: %s\n", err)
			return 1
		}
		if catalogNode != nil {
			services = map[string][]string{}
			for _, s := range catalogNode.Services {
				services[s.Service] = append(services[s.Service], s.Tags...)
			}
		}
	} else if err := c.getJSON(ctx, "/v1/catalog/services", q, true, &services); err != nil {
		fmt.Fprintf(env.Stderr, "Error listing services: %s\n", err)
		return 1
	}
	if len(services) == 0 {
		fmt.Fprintln(env.Stderr, "No services match the given query - try expanding your search.")
		return 0
	}
	names := make([]string, 0, len(services))
	for name := range services {
		names = append(names, name)
	}
	sort.Strings(names)
	if !tags {
		for _, n := range names {
			fmt.Fprintln(env.Stdout, n)
		}
		return 0
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 2, 6, ' ', 0)
	for _, n := range names {
		t := append([]string(nil), services[n]...)
		sort.Strings(t)
		fmt.Fprintf(tw, "%s\t%s\n", n, strings.Join(t, ","))
	}
	_ = tw.Flush()
	fmt.Fprintln(env.Stdout, strings.TrimSpace(b.String()))
	return 0
}

// nodeMetaQuery encodes -node-meta as the API's repeated node-meta=k:v.
func nodeMetaQuery(meta map[string]string) url.Values {
	q := url.Values{}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("node-meta", k+":"+meta[k])
	}
	return q
}

// catalogNode is a node as /v1/catalog/nodes returns it.
type catalogNode struct {
	ID              string
	Node            string
	Address         string
	Datacenter      string
	TaggedAddresses map[string]string
	Meta            map[string]string
}

const catalogNodesHelp = `
Usage: trellis catalog nodes [options]

  Lists the nodes registered in the datacenter; -detailed adds full IDs,
  tagged addresses and metadata; -service lists the nodes providing it.`

func runCatalogNodes(args []string, env *Env) int {
	var hf httpFlags
	var detailed bool
	var service, near, filter string
	var nodeMeta keyValueFlag
	fs := newFlagSet("catalog nodes", catalogNodesHelp, env.Stderr)
	fs.BoolVar(&detailed, "detailed", false, "Output detailed information about the nodes including their addresses and metadata.")
	fs.StringVar(&service, "service", "", "Service `id or name` to filter nodes.")
	fs.StringVar(&near, "near", "", "Node name to sort the node list by round-trip time from.")
	fs.StringVar(&filter, "filter", "", "Filter expression to use with the request.")
	fs.Var(&nodeMeta, "node-meta", "Only nodes with this `key=value` metadata. Can be specified multiple times.")
	hf.register(fs, true)
	c, code, ok := catalogClient(fs, &hf, args, env)
	if !ok {
		return code
	}
	q := nodeMetaQuery(nodeMeta)
	if near != "" {
		q.Set("near", near)
	}
	if filter != "" {
		q.Set("filter", filter)
	}
	ctx := context.Background()
	var nodes []catalogNode
	if service != "" {
		var entries []struct {
			ID              string
			Node            string
			Address         string
			Datacenter      string
			TaggedAddresses map[string]string
			NodeMeta        map[string]string
		}
		if err := c.getJSON(ctx, "/v1/catalog/service/"+service, q, true, &entries); err != nil {
			fmt.Fprintf(env.Stderr, "Error listing nodes for service: %s\n", err)
			return 1
		}
		for _, e := range entries {
			nodes = append(nodes, catalogNode{ID: e.ID, Node: e.Node, Address: e.Address,
				Datacenter: e.Datacenter, TaggedAddresses: e.TaggedAddresses, Meta: e.NodeMeta})
		}
	} else if err := c.getJSON(ctx, "/v1/catalog/nodes", q, true, &nodes); err != nil {
		fmt.Fprintf(env.Stderr, "Error listing nodes: %s\n", err)
		return 1
	}
	if len(nodes) == 0 {
		fmt.Fprintln(env.Stderr, "No nodes match the given query - try expanding your search.")
		return 0
	}
	rows := []string{"Node" + columnSep + "ID" + columnSep + "Address" + columnSep + "DC"}
	if detailed {
		rows[0] += columnSep + "TaggedAddresses" + columnSep + "Meta"
	}
	for _, n := range nodes {
		if detailed {
			rows = append(rows, strings.Join([]string{n.Node, n.ID, n.Address, n.Datacenter,
				mapToKV(n.TaggedAddresses, ", "), mapToKV(n.Meta, ", ")}, columnSep))
			continue
		}
		// Consul shortens the ID to its first group outside -detailed.
		id := n.ID
		if i := strings.Index(id, "-"); i > 0 {
			id = id[:i]
		}
		rows = append(rows, strings.Join([]string{n.Node, id, n.Address, n.Datacenter}, columnSep))
	}
	fmt.Fprintln(env.Stdout, columnize(rows))
	return 0
}

// mapToKV renders a map as sorted key=value pairs.
func mapToKV(m map[string]string, joiner string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, joiner)
}
