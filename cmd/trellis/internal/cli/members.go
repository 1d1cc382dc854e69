package cli

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// agentMember is a Serf member as /v1/agent/members returns it.
type agentMember struct {
	Name   string
	Addr   string
	Port   uint16
	Tags   map[string]string
	Status int
}

// Serf tags Consul (and Trellis) gossip, and their values.
const (
	tagRole          = "role"
	tagDC            = "dc"
	tagBuild         = "build"
	tagVsn           = "vsn"
	tagSegment       = "segment"
	tagPartition     = "ap"
	roleServer       = "consul"
	roleClient       = "node"
	allSegments      = "_all"
	defaultPartition = "default"
)

// memberStatus names serf.MemberStatus values.
func memberStatus(s int) string {
	switch s {
	case 0:
		return "none"
	case 1:
		return "alive"
	case 2:
		return "leaving"
	case 3:
		return "left"
	case 4:
		return "failed"
	}
	return "unknown"
}

const membersHelp = `
Usage: trellis members [options]

  Outputs the members of the cluster as the agent sees them.`

func runMembers(args []string, env *Env) int {
	var hf httpFlags
	var detailed, wan bool
	var status, segment, filter string
	fs := newFlagSet("members", membersHelp, env.Stderr)
	fs.BoolVar(&detailed, "detailed", false, "Provides detailed information about nodes.")
	fs.BoolVar(&wan, "wan", false, "List the WAN pool of a server instead of the LAN pool.")
	fs.StringVar(&status, "status", ".*", "If provided, output is filtered to only nodes matching the regular expression for status.")
	fs.StringVar(&segment, "segment", allSegments, "(Enterprise-only) Only nodes in the given segment.")
	fs.StringVar(&filter, "filter", "", "Filter expression to use with the request.")
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	statusRe, err := regexp.Compile(status)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Failed to compile status regexp: %v\n", err)
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	q := url.Values{}
	if wan {
		q.Set("wan", "1")
	}
	if segment != "" {
		q.Set("segment", segment)
	}
	if filter != "" {
		q.Set("filter", filter)
	}
	var members []agentMember
	if err := c.getJSON(context.Background(), "/v1/agent/members", q, false, &members); err != nil {
		fmt.Fprintf(env.Stderr, "Error retrieving members: %s\n", err)
		return 1
	}
	kept := members[:0]
	for _, m := range members {
		if m.Tags == nil {
			m.Tags = map[string]string{}
		}
		if m.Tags[tagPartition] == "" {
			m.Tags[tagPartition] = defaultPartition
		}
		if segment == allSegments && m.Tags[tagRole] == roleServer {
			m.Tags[tagSegment] = "<all>"
		} else if m.Tags[tagSegment] == "" {
			m.Tags[tagSegment] = "<default>"
		}
		if statusRe.MatchString(memberStatus(m.Status)) {
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		return 2 // Consul's code for "no member matched"
	}
	// Servers first, then by segment and name.
	sort.SliceStable(kept, func(i, j int) bool {
		si, sj := kept[i].Tags[tagRole] == roleServer, kept[j].Tags[tagRole] == roleServer
		if si != sj {
			return si
		}
		if kept[i].Tags[tagSegment] != kept[j].Tags[tagSegment] {
			return kept[i].Tags[tagSegment] < kept[j].Tags[tagSegment]
		}
		return kept[i].Name < kept[j].Name
	})
	var rows []string
	if detailed {
		rows = detailedMembers(kept)
	} else {
		rows = standardMembers(kept)
	}
	fmt.Fprintln(env.Stdout, columnize(rows))
	return 0
}

func memberAddr(m agentMember) string {
	return (&net.TCPAddr{IP: net.ParseIP(m.Addr), Port: int(m.Port)}).String()
}

func standardMembers(members []agentMember) []string {
	rows := []string{strings.Join([]string{"Node", "Address", "Status", "Type", "Build", "Protocol", "DC", "Partition", "Segment"}, columnSep)}
	for _, m := range members {
		build := m.Tags[tagBuild]
		if build == "" {
			build = "< 0.3"
		} else if i := strings.Index(build, ":"); i != -1 {
			build = build[:i]
		}
		kind := ""
		switch m.Tags[tagRole] {
		case roleServer:
			kind = "server"
		case roleClient:
			kind = "client"
		default:
			rows = append(rows, strings.Join([]string{m.Name, memberAddr(m), memberStatus(m.Status), "unknown", "", "", "", "", ""}, columnSep))
			continue
		}
		rows = append(rows, strings.Join([]string{m.Name, memberAddr(m), memberStatus(m.Status), kind, build,
			m.Tags[tagVsn], m.Tags[tagDC], m.Tags[tagPartition], m.Tags[tagSegment]}, columnSep))
	}
	return rows
}

func detailedMembers(members []agentMember) []string {
	rows := []string{strings.Join([]string{"Node", "Address", "Status", "Tags"}, columnSep)}
	for _, m := range members {
		keys := make([]string, 0, len(m.Tags))
		for k := range m.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + m.Tags[k]
		}
		rows = append(rows, strings.Join([]string{m.Name, memberAddr(m), memberStatus(m.Status), strings.Join(pairs, ",")}, columnSep))
	}
	return rows
}

const joinHelp = `
Usage: trellis join [options] address ...

  Tells a running agent to join the cluster by specifying at least one
  existing member.`

func runJoin(args []string, env *Env) int {
	var hf httpFlags
	var wan bool
	fs := newFlagSet("join", joinHelp, env.Stderr)
	fs.BoolVar(&wan, "wan", false, "Joins a server to another server in the WAN pool.")
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	addrs := fs.Args()
	if len(addrs) == 0 {
		fmt.Fprintln(env.Stderr, "At least one address to join must be specified.")
		fmt.Fprintln(env.Stderr)
		fs.Usage()
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	q := url.Values{}
	if wan {
		q.Set("wan", "1")
	}
	joins := 0
	for _, a := range addrs {
		if _, err := c.put(context.Background(), "/v1/agent/join/"+a, q, nil); err != nil {
			fmt.Fprintf(env.Stderr, "Error joining address '%s': %s\n", a, err)
			continue
		}
		joins++
	}
	if joins == 0 {
		fmt.Fprintln(env.Stderr, "Failed to join any nodes.")
		return 1
	}
	fmt.Fprintf(env.Stdout, "Successfully joined cluster by contacting %d nodes.\n", joins)
	return 0
}

const leaveHelp = `
Usage: trellis leave [options]

  Causes the agent to gracefully leave the cluster and shut down.`

func runLeave(args []string, env *Env) int {
	var hf httpFlags
	fs := newFlagSet("leave", leaveHelp, env.Stderr)
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if rest := fs.Args(); len(rest) > 0 {
		fmt.Fprintf(env.Stderr, "Error found unexpected args: %v\n", rest)
		fs.Usage()
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	if _, err := c.put(context.Background(), "/v1/agent/leave", nil, nil); err != nil {
		fmt.Fprintf(env.Stderr, "Error leaving: %s\n", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, "Graceful leave complete")
	return 0
}

const forceLeaveHelp = `
Usage: trellis force-leave [options] name

  Forces a member of the cluster to enter the "left" state. Most useful for
  cleaning out "failed" nodes that are never coming back; -prune also
  removes the node from the member list at once.`

func runForceLeave(args []string, env *Env) int {
	var hf httpFlags
	var prune, wan bool
	fs := newFlagSet("force-leave", forceLeaveHelp, env.Stderr)
	fs.BoolVar(&prune, "prune", false, "Remove agent forcibly from list of members.")
	fs.BoolVar(&wan, "wan", false, "Exclusively leave the agent from the WAN serf pool.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	nodes := fs.Args()
	if len(nodes) != 1 {
		fmt.Fprintln(env.Stderr, "A single node name must be specified to force leave.")
		fmt.Fprintln(env.Stderr)
		fs.Usage()
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	q := url.Values{}
	if prune {
		q.Set("prune", "1")
	}
	if wan {
		q.Set("wan", "1")
	}
	if _, err := c.put(context.Background(), "/v1/agent/force-leave/"+nodes[0], q, nil); err != nil {
		fmt.Fprintf(env.Stderr, "Error force leaving: %s\n", err)
		return 1
	}
	return 0
}
