// Package gossip runs an agent's Serf LAN membership and defines the tags
// members use to describe themselves (role, datacenter, server RPC port,
// node ID, bootstrap expectation), with Consul's tag names so that the
// member list reads the same as Consul's.
package gossip

import (
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/serf/serf"
)

// Tag names, as Consul uses them.
const (
	TagRole      = "role"
	TagDC        = "dc"
	TagPort      = "port"
	TagID        = "id"
	TagExpect    = "expect"
	TagBootstrap = "bootstrap"
	TagBuild     = "build"
	TagVsn       = "vsn"
	TagRaftVsn   = "raft_vsn"
	// TagWANJoinPort is a server's Serf WAN port, by which the other
	// servers of its datacenter join it to the WAN pool.
	TagWANJoinPort = "wan_join_port"

	RoleServer = "consul"
	RoleClient = "node"
)

// ServerMeta is what a server member's tags say about it.
type ServerMeta struct {
	Name       string
	ID         string
	Datacenter string
	// Addr is the server RPC (and Raft) address, "ip:port".
	Addr      string
	Expect    int
	Bootstrap bool
	Status    serf.MemberStatus
}

// ParseServer reports whether m is a server and, if so, its metadata.
func ParseServer(m serf.Member) (*ServerMeta, bool) {
	if m.Tags[TagRole] != RoleServer {
		return nil, false
	}
	port, err := strconv.Atoi(m.Tags[TagPort])
	if err != nil || port <= 0 || port > 65535 {
		return nil, false
	}
	expect := 0
	if v, ok := m.Tags[TagExpect]; ok {
		expect, _ = strconv.Atoi(v)
	}
	return &ServerMeta{
		Name:       m.Name,
		ID:         m.Tags[TagID],
		Datacenter: m.Tags[TagDC],
		Addr:       net.JoinHostPort(m.Addr.String(), strconv.Itoa(port)),
		Expect:     expect,
		Bootstrap:  m.Tags[TagBootstrap] == "1",
		Status:     m.Status,
	}, true
}

// ServerTags builds the tags a server advertises.
func ServerTags(dc, nodeID string, port, expect int, bootstrap bool, build string) map[string]string {
	t := map[string]string{
		TagRole:    RoleServer,
		TagDC:      dc,
		TagPort:    strconv.Itoa(port),
		TagID:      nodeID,
		TagBuild:   build,
		TagVsn:     "2",
		TagRaftVsn: "3",
	}
	if expect > 0 {
		t[TagExpect] = strconv.Itoa(expect)
	}
	if bootstrap {
		t[TagBootstrap] = "1"
	}
	return t
}

// WANJoinAddr is the WAN pool address a LAN server member advertises, if
// any.
func WANJoinAddr(m serf.Member) (string, bool) {
	if m.Tags[TagRole] != RoleServer {
		return "", false
	}
	port, err := strconv.Atoi(m.Tags[TagWANJoinPort])
	if err != nil || port <= 0 || port > 65535 {
		return "", false
	}
	return net.JoinHostPort(m.Addr.String(), strconv.Itoa(port)), true
}

// ClientTags builds the tags a client agent advertises.
func ClientTags(dc, nodeID, build string) map[string]string {
	return map[string]string{TagRole: RoleClient, TagDC: dc, TagID: nodeID, TagBuild: build, TagVsn: "2"}
}

// Describe is a one-line summary of a member for logs.
func Describe(m serf.Member) string {
	return fmt.Sprintf("%s (%s:%d, %s)", m.Name, m.Addr, m.Port, m.Status)
}
