package agent

import (
	"runtime"
	"strconv"

	"github.com/trellis-mesh/trellis/version"
)

// stats builds /v1/agent/self's Stats in Consul's sections, which `consul
// info` (and `trellis info`) print and monitoring scripts grep.
func (a *Agent) stats() map[string]map[string]string {
	b := version.Get()
	out := map[string]map[string]string{
		"build": {
			"prerelease":       b.Prerelease,
			"revision":         b.Revision,
			"version":          b.ConsulVersion,
			"version_metadata": "",
		},
		"runtime": {
			"arch":       runtime.GOARCH,
			"os":         runtime.GOOS,
			"version":    runtime.Version(),
			"cpu_count":  strconv.Itoa(runtime.NumCPU()),
			"max_procs":  strconv.Itoa(runtime.GOMAXPROCS(0)),
			"goroutines": strconv.Itoa(runtime.NumGoroutine()),
		},
	}
	if a.local != nil && a.local.state != nil {
		checks := a.local.state.Checks()
		ttls, monitors := 0, 0
		for _, c := range checks {
			switch c.Type {
			case "ttl":
				ttls++
			case "script":
				monitors++
			}
		}
		out["agent"] = map[string]string{
			"services":       strconv.Itoa(len(a.local.state.Services())),
			"checks":         strconv.Itoa(len(checks)),
			"check_monitors": strconv.Itoa(monitors),
			"check_ttls":     strconv.Itoa(ttls),
		}
	}
	consul := map[string]string{"server": strconv.FormatBool(a.server != nil)}
	if a.server != nil {
		consul["leader"] = strconv.FormatBool(a.server.IsLeader())
		consul["leader_addr"] = a.server.LeaderAddr()
		consul["bootstrap"] = strconv.FormatBool(a.rc.Bootstrap)
		consul["known_datacenters"] = "1"
		out["raft"] = a.server.RaftStats()
	} else if a.router != nil {
		consul["known_servers"] = strconv.Itoa(len(a.router.Servers()))
	}
	out["consul"] = consul
	if a.gossip != nil {
		out["serf_lan"] = a.gossip.Stats()
	}
	return out
}
