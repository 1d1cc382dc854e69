package agent

import (
	"context"
	"path/filepath"

	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/agent/httpapi"
	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/version"
)

// The servers' WAN pool. Trellis federates no datacenters, but a Consul
// server is a member of the WAN pool all the same, with its own keyring
// (serf/remote.keyring), and the keyring operations answer for it: a
// client of the keyring API sees the pools a Consul cluster has. The
// servers of the datacenter join each other's WAN members from the
// wan_join_port tag of their LAN members (Consul's flood join).

// serfDir is where Serf keeps its snapshots, or "" when nothing is
// persisted.
func (a *Agent) serfDir() string {
	if a.rc.DataDir == "" || a.rc.DevMode {
		return ""
	}
	return filepath.Join(a.rc.DataDir, "serf")
}

// encryption is a pool's gossip encryption from the agent's settings.
func (a *Agent) encryption(file string) gossip.Encryption {
	e := a.rc.Encrypt
	return gossip.Encryption{
		Key:             e.Key,
		KeyringFile:     a.rc.KeyringPath(file),
		AcceptPlaintext: !e.VerifyIncoming,
		SendPlaintext:   !e.VerifyOutgoing,
	}
}

// wantWAN is whether this agent is a WAN pool member.
func (a *Agent) wantWAN() bool { return a.rc.ServerMode && a.rc.Ports.SerfWAN > 0 }

// wanKeyring is the WAN pool's keyring for the server, nil without one.
func (a *Agent) wanKeyring() server.Keyring {
	if !a.wantWAN() {
		return nil
	}
	return &a.wanRing
}

// wanPool is the WAN pool's members and coordinates for the server, nil
// interfaces without one.
func (a *Agent) wanPool() (server.Membership, server.CoordinateSource) {
	if !a.wantWAN() {
		return nil, nil
	}
	return &a.wanRing, &a.wanRing
}

// startWAN starts the WAN member and the goroutine that joins the other
// servers' WAN members.
func (a *Agent) startWAN() error {
	if !a.wantWAN() {
		return nil
	}
	rc := a.rc
	g, err := gossip.New(gossip.Config{
		Logger:        a.logger.With("pool", "wan"),
		NodeName:      rc.NodeName + "." + rc.Datacenter,
		BindAddr:      rc.Addresses.Bind,
		BindPort:      rc.Ports.SerfWAN,
		AdvertiseAddr: rc.Addresses.Advertise,
		AdvertisePort: rc.Ports.SerfWAN,
		Tags: gossip.ServerTags(rc.Datacenter, rc.NodeID, rc.Ports.Server, rc.BootstrapExpect,
			rc.Bootstrap || rc.DevMode, version.ConsulVersion),
		ReconnectTimeout: rc.ReconnectTimeout,
		SnapshotDir:      a.serfDir(),
		WAN:              true,
		Encryption:       a.encryption(config.WANKeyringFile),
	})
	if err != nil {
		return err
	}
	a.wan = g
	a.wanRing.Set(g)
	g.Start()
	ctx, cancel := context.WithCancel(context.Background())
	a.stopWAN = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-a.wanFlood:
				a.floodJoinWAN()
			}
		}
	}()
	a.triggerWANFlood()
	return nil
}

// triggerWANFlood asks the flood goroutine for a pass; a pass already
// asked for covers this one.
func (a *Agent) triggerWANFlood() {
	select {
	case a.wanFlood <- struct{}{}:
	default:
	}
}

// floodJoinWAN joins the WAN member of every alive LAN server of the
// datacenter that the WAN pool does not list yet.
func (a *Agent) floodJoinWAN() {
	known := map[string]bool{}
	for _, m := range a.wan.Members() {
		known[m.Name] = true
	}
	var addrs []string
	for _, m := range a.gossip.Members() {
		meta, ok := gossip.ParseServer(m)
		if !ok || meta.Status != serf.StatusAlive || meta.Datacenter != a.rc.Datacenter || known[m.Name+"."+a.rc.Datacenter] {
			continue
		}
		if addr, ok := gossip.WANJoinAddr(m); ok {
			addrs = append(addrs, addr)
		}
	}
	if len(addrs) == 0 {
		return
	}
	if n, err := a.wan.Join(addrs, a.rc.Ports.SerfWAN); err != nil {
		a.logger.Warn("joining servers to the WAN pool failed", "addrs", addrs, "error", err)
	} else {
		a.logger.Debug("joined servers to the WAN pool", "joined", n)
	}
}

// wanMembership is the WAN pool for /v1/agent/members?wan and
// /v1/agent/join?wan (members named "<node>.<datacenter>").
type wanMembership struct{ a *Agent }

// wanMembers is the WAN pool's view for the HTTP API, nil (no pool) on a
// client agent or with ports.serf_wan -1.
func (a *Agent) wanMembers() httpapi.Membership {
	if !a.wantWAN() {
		return nil
	}
	return wanMembership{a}
}

// Members lists the WAN pool's members: the servers of every datacenter
// joined to it.
func (w wanMembership) Members() []httpapi.MemberInfo {
	members := w.a.wanRing.Members()
	out := make([]httpapi.MemberInfo, 0, len(members))
	for _, m := range members {
		out = append(out, memberInfo(m))
	}
	return out
}

// Join joins the WAN member at addr (a server of another datacenter, or
// of this one), port ports.serf_wan when addr has none.
func (w wanMembership) Join(addr string) (int, error) {
	return w.a.wanRing.Join([]string{addr}, w.a.rc.Ports.SerfWAN)
}
